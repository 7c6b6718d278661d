"""The contract lives in the repo: docs/objective.md lists every objective knob, mode value,
preset and logged metric; docs/studies.md says what every study in experiments/ is for; and no
code comment or doc points to a file outside the repository. Whoever adds a knob, a preset, a
metric or a study makes these tests pass by documenting it."""

import json
import re
from pathlib import Path

import pytest

from harness.objective import MODE_KNOBS, ObjectiveConfig
from harness.objective.explain import knob_rows
from harness.objective.presets import BUILTIN_PRESETS

REPO = Path(__file__).resolve().parents[2]
OBJECTIVE = (REPO / "docs" / "objective.md").read_text()
STUDIES = (REPO / "docs" / "studies.md").read_text()
RECORDS = sorted((REPO / "tests" / "golden" / "records").glob("*.json"))


def section(doc: str, start: str, end: str) -> str:
    """The text of `doc` from the line starting with `start` to the next line starting with `end`."""
    m = re.search(rf"^{re.escape(start)}.*?(?=^{re.escape(end)})", doc, re.S | re.M)
    assert m, f"no section {start!r} .. {end!r} in the doc"
    return m.group(0)


def ticked(text: str) -> set[str]:
    return set(re.findall(r"`([^`\n]+)`", text))


KNOB_TABLE = section(OBJECTIVE, "### Every knob at a glance", "## Advantage\n")
PRESET_TABLE = section(OBJECTIVE, "## Presets\n", "## DPO\n")
METRICS = section(OBJECTIVE, "## DPO\n", "## Public Python API\n")  # DPO's metrics and every other metric


@pytest.mark.parametrize("knob", [r.name for r in knob_rows()])
def test_every_objective_knob_is_in_the_knob_table(knob):
    assert f"`{knob}`" in KNOB_TABLE, f"ObjectiveConfig.{knob} is missing from docs/objective.md's knob table"


def _mode_values() -> list[tuple[str, str]]:
    assert set(MODE_KNOBS) <= set(ObjectiveConfig.model_fields)
    return [(knob, v) for knob, reg in MODE_KNOBS.items() for v in reg.builtin_names()]


MODE_VALUES = _mode_values()


def test_the_mode_values_are_found():
    assert {"baseline", "scale", "ratio", "clip", "agg", "kl_estimator"} <= {k for k, _ in MODE_VALUES}


@pytest.mark.parametrize("knob, value", MODE_VALUES)
def test_every_allowed_value_of_a_mode_knob_is_documented(knob, value):
    assert f"`{value}`" in OBJECTIVE, f"{knob}: {value!r} is allowed but not documented in docs/objective.md"


@pytest.mark.parametrize("preset", BUILTIN_PRESETS)
def test_every_preset_has_a_row_in_the_preset_table(preset):
    assert f"| `{preset}` |" in PRESET_TABLE, f"preset {preset!r} has no row in docs/objective.md, 'Presets'"


def test_the_preset_table_lists_only_presets():
    rows = re.findall(r"^\| `([a-z0-9_]+)` \|", PRESET_TABLE, re.M)  # a preset name may hold digits (m2po)
    assert rows and set(rows) == set(BUILTIN_PRESETS)


def _pattern(token: str) -> re.Pattern:
    """A documented key; `{k}`, `{difficulty}`... stand for one path component."""
    return re.compile("^" + re.sub(r"\\\{[^}]*\\\}", "[^/]+", re.escape(token)) + "$")


DOCUMENTED = [_pattern(t) for t in ticked(METRICS)]


def _logged_keys() -> list[str]:
    keys = set()
    for path in RECORDS:
        for record in json.loads(path.read_text()):
            if record.get("step") != "final":  # the last entry is the record's digest of the weights, not a metric
                keys |= set(record)
    return sorted(keys)


LOGGED = _logged_keys()


def test_the_golden_runs_log_what_is_checked():
    assert len(RECORDS) == 6 and len(LOGGED) > 50  # grpo, dapo, ppo, dpo, moe, countdown


@pytest.mark.parametrize("key", LOGGED)
def test_every_metric_the_runs_log_is_documented(key):
    assert any(p.match(key) for p in DOCUMENTED), (
        f"metric {key!r} is logged but not in docs/objective.md, 'DPO' or 'Metrics'"
    )


def _perf_keys_in_code() -> list[str]:
    keys = set()
    for path in (REPO / "harness").rglob("*.py"):
        keys |= set(re.findall(r"[\"'](perf/[a-z0-9_]+)[\"']", path.read_text()))
    return sorted(keys)


PERF = _perf_keys_in_code()


def test_the_code_writes_perf_keys():
    assert len(PERF) >= 8


@pytest.mark.parametrize("key", PERF)
def test_every_perf_metric_is_documented(key):
    assert f"`{key}`" in METRICS, f"{key} is written by the code but not in docs/objective.md, 'Metrics'"


@pytest.mark.parametrize("study", sorted(p.name for p in (REPO / "experiments").glob("*.yaml")))
def test_every_study_has_its_section_in_studies_md(study):
    heading = re.search(rf"^## .*`experiments/{re.escape(study)}`", STUDIES, re.M)
    assert heading, f"experiments/{study} has no section (## ... `experiments/{study}`) in docs/studies.md"


def _text_files() -> list[Path]:
    files = [REPO / n for n in ("Snakefile", "Makefile", "README.md")]
    for folder in ("harness", "tests", "analysis", "benchmarks", "docs", "experiments", "profiles"):
        files += [
            p
            for p in (REPO / folder).rglob("*")
            if p.is_file() and p.suffix in (".py", ".md", ".yaml", ".yml", ".txt", ".sh", "")
        ]
    return [p for p in files if p.is_file() and "__pycache__" not in p.parts]


# files of the developers' own notes, which a clone of the project does not have (spelled in
# pieces so that this file does not cite them)
OUTSIDE = ["OBJECTIVE" + ".md", "SCIENCE" + ".md", "ARCHITECTURE" + ".md", "STYLE" + ".md", "shared" + "/design"]


def test_nothing_cites_a_file_outside_the_repo():
    hits = [
        f"{p.relative_to(REPO)}: {name}"
        for p in _text_files()
        for name in OUTSIDE
        if name in p.read_text(errors="replace")
    ]
    assert not hits, "cite docs/objective.md or docs/studies.md instead:\n" + "\n".join(hits)


ARCHITECTURE = (REPO / "docs" / "architecture.md").read_text()


def test_architecture_starts_from_the_reference_step():
    first = ARCHITECTURE.split("\n## ", 1)[0]
    assert "harness/objective/reference_grpo.py" in first and (REPO / "harness/objective/reference_grpo.py").exists()


@pytest.mark.parametrize("knob", [r.name for r in knob_rows()])
def test_architecture_explains_every_knob_as_a_difference_from_it(knob):
    assert f"`{knob}`" in ARCHITECTURE, f"docs/architecture.md does not say how {knob!r} changes the reference step"


def test_extending_shows_the_tested_plugin_file():
    """docs/extending.md's file is tests/plugins/my_variants.py, which the plugin tests run."""
    page = (REPO / "docs" / "extending.md").read_text()
    block = page.split("```python\n", 1)[1].split("```", 1)[0]
    assert block == (REPO / "tests" / "plugins" / "my_variants.py").read_text()


def test_extending_shows_a_builtin_declared_as_the_plugin_is():
    """docs/extending.md's built-in example is harness/objective/advantages.py's code, verbatim: a built-in is
    declared with the plugin's decorator."""
    page = (REPO / "docs" / "extending.md").read_text()
    block = page.split("## A built-in looks the same", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    assert block.startswith("@register_baseline(")
    assert block in (REPO / "harness" / "objective" / "advantages.py").read_text()
