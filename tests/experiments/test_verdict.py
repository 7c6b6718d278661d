"""`harness verdict`: each word reached by a constructed study folder, missing cells reported, the family
corrected by Holm, the files written; and the hypotheses refused when the study loads (one line naming the
key, the value and what is allowed)."""

import json

import pytest
from verdict_fixture import study_yaml, write_folder

from harness.cli import main
from harness.experiment import StudyError, load_study
from harness.experiment.hypotheses import Hypothesis
from harness.experiment.results import load_index
from harness.experiment.verdict.judge import judge

B = [0.30, 0.30, 0.30]  # arm b's final pass@1 per seed; arm a = b + the differences below


def _h(**kw) -> Hypothesis:
    base = {"name": "h", "metric": "eval/pass_at_1", "at": "final", "contrast": "a - b", "direction": "greater"}
    return Hypothesis(**{**base, "sesoi": 0.05, **kw})


def _judge(tmp_path, diffs, hypotheses, b=B, correction="none"):
    a = [None if d is None else bv + d for bv, d in zip(b, diffs)]
    _, cells = load_index(write_folder(tmp_path / "res", {"a": a, "b": b}))
    return judge(hypotheses, correction, cells)


@pytest.mark.parametrize(
    "direction, diffs, word",
    [
        # m 0.12, sd 0.02, se 0.011547, t = 10.39, p = 0.0046 < 0.05
        ("greater", [0.10, 0.12, 0.14], "CONFIRMED"),
        # m 0, se 0.005774: the 90% interval's upper end 0 + 2.92 * 0.005774 = 0.0169 < sesoi 0.05
        ("greater", [-0.01, 0.0, 0.01], "NOT CONFIRMED"),
        # m 0.0167, se 0.0726: upper end 0.229 >= 0.05, p = 0.42
        ("greater", [-0.10, 0.0, 0.15], "INCONCLUSIVE"),
        ("less", [-0.10, -0.12, -0.14], "CONFIRMED"),
        ("two-sided", [-0.10, -0.12, -0.14], "CONFIRMED"),
        # TOST: t = -+0.05 / 0.005774 = -+8.66, both p = 0.0065 < 0.05
        ("equivalent", [-0.01, 0.0, 0.01], "EQUIVALENT"),
        # the 90% interval 0.12 -+ 0.0337 = [0.086, 0.154] lies wholly above 0.05
        ("equivalent", [0.10, 0.12, 0.14], "NOT CONFIRMED"),
        ("equivalent", [-0.10, 0.0, 0.15], "INCONCLUSIVE"),
    ],
)
def test_each_word_is_reached(tmp_path, direction, diffs, word):
    (row,) = _judge(tmp_path, diffs, [_h(direction=direction)])
    assert row["word"] == word, row["reason"]
    assert row["n"] == 3 and row["differences"][1] == pytest.approx(diffs[0])


def test_a_confirmed_effect_smaller_than_the_sesoi_says_so(tmp_path):
    (row,) = _judge(tmp_path, [0.010, 0.011, 0.012], [_h()])
    assert row["word"] == "CONFIRMED" and "smaller than the sesoi" in row["reason"]


def test_fewer_than_two_paired_seeds_is_inconclusive_and_the_missing_cells_are_listed(tmp_path):
    (row,) = _judge(tmp_path, [0.1, None, None], [_h()], b=[0.3, 0.3, None])
    assert row["word"] == "INCONCLUSIVE" and "1 paired seed" in row["reason"]
    assert "arm=a__seed=2: no run folder (the cell has not run)" in row["missing"]
    assert "seed 2: only b has a value" in row["missing"]
    assert "arm=b__seed=3: no run folder (the cell has not run)" in row["missing"]


def test_holm_corrects_the_family(tmp_path):
    """d = [0.10, 0.12, 0.14]: t = 0.12 / 0.011547 = 10.3923 (t^2 = 108), df 2, so p = 1/2 - t / (2 sqrt(110))
    = 0.5 - 0.495434 = 0.004566 < alpha 0.005: confirmed alone. The family's other member (direction less on
    the same data) has p = 0.995434; Holm: 2 * 0.004566 = 0.009133 >= 0.005 (not confirmed), and
    max(0.009133, 1 * 0.995434) = 0.995434."""
    hs = [_h(name="big", alpha=0.005), _h(name="null", metric="eval/pass_at_1", at="final", direction="less")]
    rows = _judge(tmp_path, [0.10, 0.12, 0.14], hs, correction="none")
    assert rows[0]["p"] == pytest.approx(0.004566, abs=1e-6) and rows[0]["word"] == "CONFIRMED"
    rows = _judge(tmp_path / "holm", [0.10, 0.12, 0.14], hs, correction="holm")
    assert rows[0]["p_adjusted"] == pytest.approx(0.009133, abs=2e-6) and rows[0]["word"] == "INCONCLUSIVE"
    assert rows[1]["p_adjusted"] == pytest.approx(0.995434, abs=1e-6)


def test_the_other_places_a_value_is_read(tmp_path):
    """paired_rise: final - 0.25 per cell; eval_step 2: 0.27 in every cell; steps 0..3: length/incorrect 10."""
    rise = _h(name="rise", at="paired_rise", contrast="a", value=0.0)  # arm a alone: final - 0.25 = 0.15..0.19
    step = _h(name="step", at={"eval_step": 2}, direction="equivalent")
    window = _h(name="len", metric="length/incorrect", at={"steps": [0, 3]}, direction="equivalent", sesoi=1)
    rows = _judge(tmp_path, [0.10, 0.12, 0.14], [rise, step, window])
    assert rows[0]["differences"] == pytest.approx({1: 0.15, 2: 0.17, 3: 0.19}) and rows[0]["word"] == "CONFIRMED"
    assert rows[1]["differences"] == pytest.approx({1: 0.0, 2: 0.0, 3: 0.0}) and rows[1]["word"] == "EQUIVALENT"
    assert rows[2]["differences"] == pytest.approx({1: 0.0, 2: 0.0, 3: 0.0})
    late = _h(name="late", at={"eval_step": 9})
    (row,) = _judge(tmp_path / "late", [0.1, 0.1, 0.1], [late])
    assert "arm=a__seed=1: no eval/pass_at_1 at step 9 in metrics.jsonl" in row["missing"]


def test_the_command_writes_the_table_and_the_json(tmp_path, capsys):
    path = study_yaml(tmp_path / "toy.yaml", [{**_h().model_dump(), "name": "rise"}])
    write_folder(tmp_path / "results" / "toy" / "smoke", {"a": [0.40, 0.42, 0.44], "b": B})
    assert main(["verdict", str(path), "--results", str(tmp_path / "results")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Verdict: toy (smoke)") and "**EXPLORATORY**: not committed." in out
    assert "| rise | `eval/pass_at_1` | final | a - b | greater |" in out and "**CONFIRMED**" in out
    written = json.loads((tmp_path / "results" / "toy" / "smoke" / "verdict.json").read_text())
    assert written["hypotheses"][0]["word"] == "CONFIRMED"
    assert written["hypotheses"][0]["per_seed"]["a"] == {"1": 0.40, "2": 0.42, "3": 0.44}
    assert (tmp_path / "results" / "toy" / "smoke" / "verdict.md").read_text() == out
    assert main(["verdict", str(path), "--results", str(tmp_path / "results"), "--plan"]) == 0
    plan = capsys.readouterr().out
    # sd 0.02 against sesoi 0.05: 2 seeds (noncentrality 0.05 sqrt(2) / 0.02 = 3.5 against t_{0.95, 1} = 6.3) fall
    # short of 80%; 3 seeds (4.3 against 2.9) reach it
    assert "| rise | greater | 0.05 | 0.05 | 3 | 0.02 | 3 |" in plan


def _refused(tmp_path, capsys, hypotheses, argv=None) -> str:
    path = study_yaml(tmp_path / "toy.yaml", hypotheses)
    assert main(argv or ["grid", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


GOOD = {
    "name": "h",
    "metric": "eval/pass_at_1",
    "at": "final",
    "contrast": "a - b",
    "direction": "greater",
    "sesoi": 0.05,
}


@pytest.mark.parametrize(
    "change, needles",
    [
        ({"contrast": "a - c"}, ["hypotheses[0].contrast", "'c'", "arms: ['a', 'arm=a', 'arm=b', 'b']"]),
        ({"sesoi": 0}, ["hypotheses[0].sesoi", "greater than 0", "(got 0)"]),
        ({"direction": "bigger"}, ["hypotheses[0].direction", "'greater', 'less', 'two-sided' or 'equivalent'"]),
        ({"alpha": 2}, ["hypotheses[0].alpha", "less than 0.5", "(got 2)"]),
        ({"metric": "eval/pass_at1"}, ["hypotheses[0].metric", "'eval/pass_at1' is no key", "'eval/pass_at_1'"]),
        ({"metric": "length/incorrect"}, ["hypotheses[0].metric", "a training metric", "{steps: [a, b]}"]),
        ({"at": {"eval_step": 3}}, ["hypotheses[0].at.eval_step", "3 is no eval step", "allowed: [0, 2, 4]"]),
        (
            {"at": {"steps": [0, 4]}, "metric": "length/incorrect"},
            ["hypotheses[0].at.steps", "[0, 4]", "[0, 3] (train.steps=4)"],
        ),
        ({"at": "middle"}, ["hypotheses[0].at", "final | paired_rise | {eval_step: N} | {steps: [a, b]}"]),
        ({"at": {"steps": [3, 1]}}, ["hypotheses[0].at", "0 <= a <= b", "[3, 1]"]),
        ({"contrast": "a-b"}, ["hypotheses[0].contrast", "'a-b'"]),
        ({"contrast": "a - a"}, ["hypotheses[0].contrast", "an arm minus itself", "'a - a'"]),
        ({"name": "h 1"}, ["hypotheses[0].name", "letters, digits"]),
        ({"typo": 1}, ["unknown key 'hypotheses[0].typo'", "allowed keys here"]),
    ],
)
def test_bad_hypotheses_are_refused_when_the_study_loads(tmp_path, capsys, change, needles):
    err = _refused(tmp_path, capsys, [{**GOOD, **change}])
    assert all(n in err for n in needles), err


def test_two_hypotheses_of_one_name_are_refused(tmp_path, capsys):
    err = _refused(tmp_path, capsys, [GOOD, GOOD])
    assert "hypotheses[1].name: 'h' is used twice" in err


def test_a_good_hypothesis_loads(tmp_path):
    study = load_study(study_yaml(tmp_path / "toy.yaml", [GOOD, {**GOOD, "name": "w", "at": {"eval_step": 2}}]))
    assert [h.name for h in study.hypotheses] == ["h", "w"] and study.correction == "holm"


def test_the_command_refuses_a_study_without_hypotheses_or_results(tmp_path, capsys):
    err = _refused(tmp_path, capsys, [GOOD], ["verdict", str(tmp_path / "toy.yaml"), "--results", str(tmp_path)])
    assert "no cells.json" in err
    err = _refused(tmp_path, capsys, None, ["verdict", str(tmp_path / "toy.yaml")])
    assert "no `hypotheses:` to judge" in err
    assert main(["verdict", "nosuchstudy"]) == 2
    assert "no study named 'nosuchstudy'" in capsys.readouterr().err
    with pytest.raises(StudyError, match="lists no cells"):
        from harness.experiment.verdict.run import _cells

        (tmp_path / "empty").mkdir()
        (tmp_path / "empty" / "cells.json").write_text("[]")
        _cells(tmp_path / "empty")


def test_the_example_in_docs_loads_against_its_study():
    """docs/studies.md's worked `hypotheses:` example is a valid family for experiments/length_bias.yaml at every
    scale it runs at."""
    import re
    from pathlib import Path

    import yaml

    doc = (Path(__file__).resolve().parents[2] / "docs" / "studies.md").read_text()
    block = re.search(r"```yaml\n(# an example for experiments/length_bias.yaml.*?)```", doc, re.S).group(1)
    example = yaml.safe_load(block)
    raw = yaml.safe_load(Path("experiments/length_bias.yaml").read_text())
    for scale in ("smoke", "cpu"):
        study = load_study({**raw, **example}, scale, path="experiments/length_bias.yaml")
        assert [h.name for h in study.hypotheses][-1] == "early_truncation" and study.correction == "holm"
