"""`harness verdict`: a study's hypotheses judged from its results folder (verdict.md, verdict.json beside
cells.json), or with `plan` the seeds a confirmatory run needs from a pilot's folder."""

from __future__ import annotations

import os
from pathlib import Path

from harness.atomic import atomic_write_text
from harness.experiment import load_study, study_dir
from harness.experiment.results import load_index
from harness.experiment.study import Study, StudyError
from harness.experiment.verdict.judge import judge
from harness.experiment.verdict.plan import plan
from harness.experiment.verdict.prereg import preregistration
from harness.experiment.verdict.report import plan_markdown, to_json, verdict_markdown


def _study(name: str, scale: str | None) -> Study:
    study = load_study(name, scale)
    if not study.hypotheses:
        raise StudyError(
            f"{study.path}: no `hypotheses:` to judge; allowed: a list of {{name, metric, at, contrast, direction, "
            'sesoi}} (docs/studies.md "Hypotheses and the verdict")'
        )
    return study


def _cells(folder: Path) -> list[dict]:
    try:
        _, cells = load_index(folder)
    except FileNotFoundError:
        raise StudyError(
            f"{folder}: no cells.json (the study has not run there; a results folder is <results>/<study>/<scale>, "
            "written by the Snakefile)"
        ) from None
    if not cells:
        raise StudyError(f"{folder}/cells.json lists no cells")
    return cells


def verdict(name: str, scale: str | None = None, results: str | os.PathLike = "results") -> dict:
    """Judge the study's hypotheses on results/<study>/<scale>; writes verdict.md and verdict.json there."""
    study = _study(name, scale)
    folder = study_dir(study, results)
    cells = _cells(folder)
    rows = judge(study.hypotheses, study.correction, cells)
    prereg = preregistration(study.path, cells)
    md = verdict_markdown(study.name, study.scale, rows, prereg, study.correction)
    payload = {"study": study.name, "scale": study.scale, "correction": study.correction, "preregistration": prereg}
    payload["hypotheses"] = rows
    atomic_write_text(folder / "verdict.md", md)
    atomic_write_text(folder / "verdict.json", to_json(payload))
    return {"markdown": md, "json": payload, "folder": folder}


def verdict_plan(name: str, scale: str | None = None, results: str | os.PathLike = "results", pilot=None) -> dict:
    """The seeds needed per hypothesis, from the pilot's folder (default: the study's results folder at `scale`)."""
    study = _study(name, scale)
    folder = Path(pilot) if pilot else study_dir(study, results)
    rows = plan(study.hypotheses, study.correction, _cells(folder))
    return {"markdown": plan_markdown(study.name, str(folder), rows, study.correction), "json": {"plan": rows}}
