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


def test_a_folder_read_from_another_working_directory_reads_its_own_runs(tmp_path, monkeypatch):
    """cells.json's run_dir is relative to where Snakemake ran. Read from another checkout whose results/ holds an
    older run of the same study (the same cell ids), the folder's cells must be the folder's runs, not the older
    ones the relative path names from there (seen: a kl_leash summary mixing the first design's cells into the
    second's). A cell not run in the folder stays absent, not found elsewhere."""
    from harness.experiment.results import load_index

    rel = "results/demo/cpu/runs/arm=a__seed=1"
    study = tmp_path / "study_checkout" / "results" / "demo" / "cpu"
    (study / "runs" / "arm=a__seed=1").mkdir(parents=True)
    (study / "runs" / "arm=a__seed=1" / "summary.json").write_text('{"which": "new"}')
    cells = [
        {"id": "arm=a__seed=1", "run_dir": rel, "config": "results/demo/cpu/configs/arm=a__seed=1.yaml"},
        {"id": "arm=a__seed=2", "run_dir": "results/demo/cpu/runs/arm=a__seed=2"},
        {"id": "arm=b__seed=1", "run_dir": "/abs/elsewhere/run"},
        {"id": "arm=c__seed=1", "run_dir": "/abs/machine/that/ran/it/runs/arm=c__seed=1"},  # copied here
    ]
    (study / "runs" / "arm=c__seed=1").mkdir()
    (study / "cells.json").write_text(json.dumps(cells))
    other = tmp_path / "other_checkout"
    for seed in (1, 2):  # the decoy: an older run of the same study under the other checkout's results/
        (other / f"results/demo/cpu/runs/arm=a__seed={seed}").mkdir(parents=True)
        (other / f"results/demo/cpu/runs/arm=a__seed={seed}" / "summary.json").write_text('{"which": "old"}')
    monkeypatch.chdir(other)
    _, got = load_index(study)
    assert got[0]["run_dir"] == str(study / "runs" / "arm=a__seed=1")
    assert got[0]["config"] == str(study / "configs" / "arm=a__seed=1.yaml")
    assert got[1]["run_dir"] == str(study / "runs" / "arm=a__seed=2")  # not run here: not the decoy
    assert got[2]["run_dir"] == "/abs/elsewhere/run"  # absolute, not held here: as written
    assert got[3]["run_dir"] == str(study / "runs" / "arm=c__seed=1")  # the folder's own copy
    data = StudyData(study)
    assert json.loads((data.run_dir(data.cells[0]) / "summary.json").read_text())["which"] == "new"
    assert [c["id"] for c in data.cells if (data.run_dir(c) / "summary.json").exists()] == ["arm=a__seed=1"]


def test_a_panels_band_stays_inside_the_range_its_quantity_can_take(monkeypatch):
    """F.panel(bounds=(-1, 1)) clips the shaded 95% interval of a correlation to [-1, 1] (seen: the kl_leash
    figure's Pearson r band reached -1.8 where four seeds disagreed), and so does a key that names a
    correlation (ranges.metric_range); a key of no known range keeps the band as computed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from harness.experiment.figures import curves

    # 4 seeds and 4 steps: a shaded band, not lines or points
    cur = curves.Curve([0, 1, 2, 3], [0.5, -0.5, 0, 0], [-1.8, -1.5, -1, -1], [1.5, 0.9, 1, 1], 4)
    cur.interval = "95% t-interval over seeds"
    monkeypatch.setattr(curves, "curve", lambda data, cells, key, window: cur)

    class Data:
        def color(self, label):
            return "C0"

        def marker(self, label):
            return "o"

    for bounds, key, low, high in (
        ((-1.0, 1.0), "hacking/x", -1.0, 1.0),
        (None, "hacking/corr", -1.0, 1.0),
        (None, "hacking/x", -1.8, 1.5),
    ):
        fig, ax = plt.subplots()
        curves.panel(ax, Data(), {"a": []}, key, "r", "t", bounds=bounds)
        ys = ax.collections[0].get_paths()[0].vertices[:, 1]
        assert ys.min() == low and ys.max() == high
        plt.close(fig)
