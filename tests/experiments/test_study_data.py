"""StudyData (harness/experiment/figures/data.py): which cells of a results folder count as finished."""

from __future__ import annotations

import json

from harness.experiment.figures.data import StudyData


def _folder(tmp_path, files: dict[str, list[str]]):
    """A results folder whose cells' run folders hold the named (empty) files."""
    cells = [{"id": cid, "run_dir": str(tmp_path / "runs" / cid), "axes": {"seed": i}} for i, cid in enumerate(files)]
    (tmp_path / "cells.json").write_text(json.dumps(cells))
    for cid, names in files.items():
        (tmp_path / "runs" / cid).mkdir(parents=True)
        for name in names:
            (tmp_path / "runs" / cid / name).write_text("{}")
    return tmp_path


def test_drop_incomplete_takes_the_marker_file_that_makes_a_cell_finished(tmp_path):
    files = {"done": ["metrics.jsonl", "summary.json", "eval.json"], "training": ["metrics.jsonl"], "never": []}
    study = _folder(tmp_path, files)

    data = StudyData(study)
    assert [c["id"] for c in data.drop_incomplete()] == ["training", "never"]  # default: eval.json, as before
    assert [c["id"] for c in data.cells] == ["done"]

    data = StudyData(study)
    assert [c["id"] for c in data.drop_incomplete("metrics.jsonl")] == ["never"]
    assert [c["id"] for c in data.cells] == ["done", "training"]
    assert [c["id"] for c in data.all_cells] == ["done", "training", "never"]  # the total stays known

    data = StudyData(study)
    assert [c["id"] for c in data.drop_incomplete(marker="summary.json")] == ["training", "never"]
