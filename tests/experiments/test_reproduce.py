"""`harness reproduce` (harness/experiment/reproduce.py): a cell's numbers, how a rerun is judged on
the report's kernel path and on another one, and (slow) a smoke-scale rerun end to end."""

import json
from pathlib import Path

import pytest

from harness import machine
from harness.experiment import reproduce as rp

# a kernel path no x86 machine runs: "another machine" whatever this one is (AVX2 or AVX512)
OTHER_ISA = "SVE256"


def _run_dir(tmp_path, rise=0.05, ci=(0.03, 0.07), kl=(0.1, 0.3, 0.2, 0.4)):
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text(
        json.dumps(
            {
                "paired_rise": {"delta_pass_at_1": rise, "ci95": list(ci)},
                "initial_eval": {"eval/pass_at_1": 0.45},
                "final_eval": {"eval/pass_at_1": 0.5},
            }
        )
    )
    (run / "eval.json").write_text(json.dumps({"eval/pass_at_1": 0.51, "eval/pass_at_8": 0.8, "checkpoint": "step_4"}))
    rows = [{"step": i, "reward/mean": 0.5, "mismatch/k3_kl": k, "perf/step_seconds": 3.0} for i, k in enumerate(kl)]
    rows.insert(1, {"step": 0, "eval/pass_at_1": 0.45})  # an eval-only record is not a training step
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "run.json").write_text(json.dumps({"attempts": [{"machine": machine.describe()}]}))
    return run


def test_cell_numbers_by_hand(tmp_path):
    n = rp.cell_numbers(_run_dir(tmp_path))
    assert n["paired_rise_pass_at_1"] == {"value": 0.05, "ci95": [0.03, 0.07]}
    assert n["initial_pass_at_1"] == 0.45 and n["final_pass_at_1"] == 0.5
    assert n["final_eval eval/pass_at_8"] == 0.8 and "final_eval checkpoint" not in n
    assert n["mean mismatch/k3_kl"] == pytest.approx(0.25) and n["max mismatch/k3_kl"] == 0.4
    assert n["last_quarter mismatch/k3_kl"] == 0.4  # the last quarter of 4 steps: the last one
    assert not any("perf/" in k for k in n) and "mean step" not in n


def test_compare_on_the_same_kernel_path_wants_every_number_equal():
    rec = {"paired_rise_pass_at_1": {"value": 0.05, "ci95": [0.03, 0.07]}, "mean mismatch/k3_kl": 0.25, "max x": 1.0}
    got = {"paired_rise_pass_at_1": {"value": 0.05, "ci95": [0.03, 0.07]}, "mean mismatch/k3_kl": 0.2500001}
    rows = {r["name"]: r["verdict"] for r in rp.compare(rec, got, same_path=True)}
    assert rows == {"paired_rise_pass_at_1": "equal", "mean mismatch/k3_kl": "DIFFERS", "max x": "MISSING"}


def test_nan_equals_nan_and_nothing_else():
    """A mean over an empty set (the length of correct answers when none is) is NaN in record and rerun."""
    nan = float("nan")
    rows = rp.compare({"a": nan, "b": nan, "c": 1.0}, {"a": nan, "b": 1.0, "c": nan}, same_path=True)
    assert [r["verdict"] for r in rows] == ["equal", "DIFFERS", "DIFFERS"]


def test_compare_on_another_kernel_path_judges_intervals_and_lists_levels():
    rec = {"paired_rise_pass_at_1": {"value": 0.055, "ci95": [0.042, 0.068]}, "initial_pass_at_1": 0.455}
    inside = rp.compare(rec, {"paired_rise_pass_at_1": {"value": 0.064}, "initial_pass_at_1": 0.35}, same_path=False)
    assert [r["verdict"] for r in inside] == ["inside (bootstrap)", "level"] and not rp.failed(inside)
    outside = rp.compare(rec, {"paired_rise_pass_at_1": {"value": 0.070}, "initial_pass_at_1": 0.35}, same_path=False)
    assert [r["verdict"] for r in outside] == ["OUTSIDE (bootstrap)", "level"] and len(rp.failed(outside)) == 1
    # with the arm's seeds: judged by the prediction interval of one more seed, not the bootstrap one
    seeds = {"paired_rise_pass_at_1": {"value": 0.055, "ci95": [0.042, 0.068], "predict95": [0.041, 0.077]}}
    rows = rp.compare(seeds, {"paired_rise_pass_at_1": {"value": 0.070}}, same_path=False)
    assert rows[0]["verdict"] == "inside (seeds)" and rows[0]["ci95"] == [0.041, 0.077]


def test_prediction_intervals_by_hand():
    """Seeds 0.060, 0.055, 0.062 of one arm: mean 0.059, sd 0.0036056, t(0.975, 2) = 4.3027:
    0.059 +- 4.3027 * 0.0036056 * sqrt(4/3) = +- 0.017914."""
    cells = {f"arm=a__seed={i}": {"x": v, "y": 1.0 if i < 3 else None} for i, v in ((1, 0.060), (2, 0.055), (3, 0.062))}
    cells["arm=b__seed=1"] = {"x": 0.5}
    rp.add_prediction_intervals(cells, {c: c.split("__")[0] for c in cells})
    lo, hi = cells["arm=a__seed=2"]["x"]["predict95"]
    assert lo == pytest.approx(0.059 - 0.017914, abs=1e-5) and hi == pytest.approx(0.059 + 0.017914, abs=1e-5)
    assert cells["arm=a__seed=2"]["x"]["value"] == 0.055
    assert cells["arm=b__seed=1"]["x"] == 0.5  # one seed: no interval
    assert cells["arm=a__seed=1"]["y"] == 1.0  # a seed lacks it: no interval


def test_same_kernel_path():
    here = machine.describe()
    assert rp.same_kernel_path(here, here)
    assert not rp.same_kernel_path(None, here)  # a report made before machines were recorded
    assert not rp.same_kernel_path({**here, "cpu_capability": OTHER_ISA}, here)
    assert rp.same_kernel_path({**here, "cpu": "another model name", "threads": 7}, here)  # not kernel-selecting


def not_yet_run(report: Path) -> bool:
    """A report's frame written before its study ran says so in bold before its first section."""
    return "**NOT YET RUN.**" in report.read_text().split("\n## ", 1)[0]


def test_every_report_has_a_record_naming_its_cells():
    """A report stands on a record; a frame marked NOT YET RUN has none (and loses the mark with one)."""
    reports = sorted(p for p in rp.REPORTS.glob("*.md") if p.stem != "README")
    for report in reports:
        study = report.stem
        if not_yet_run(report):
            assert not rp.record_path(study).exists(), f"{study}: a record exists but the report says NOT YET RUN"
            continue
        record = rp.load_record(study)
        assert record["study"] == study and record["cells"], study
        for cell, numbers in record["cells"].items():
            assert numbers, (study, cell)


def test_a_report_is_not_yet_run_only_by_its_opening_mark(tmp_path):
    framed, done = tmp_path / "framed.md", tmp_path / "done.md"
    framed.write_text("# (g) study\n\n**NOT YET RUN.** The frame.\n\n## Regime\n")
    done.write_text("# (e) study\n\n**Verdict**: appears.\n\n## First design\n\n**NOT YET RUN.** an old arm\n")
    assert not_yet_run(framed) and not not_yet_run(done)


def test_reproduce_refuses_an_unknown_study_or_cell(capsys):
    from harness.cli import main

    assert main(["reproduce", "no_such_study", "--cell", "x"]) == 2
    assert "no record for study 'no_such_study'" in capsys.readouterr().err
    assert main(["reproduce", "moe_stability", "--cell", "arm=nope__seed=9"]) == 2
    assert "records no cell 'arm=nope__seed=9'" in capsys.readouterr().err


@pytest.mark.slow
def test_a_smoke_cell_reproduces_bitwise_on_this_machine(tmp_path, monkeypatch):
    """Run a smoke cell, record it, rerun it in another results root: every number equal."""
    monkeypatch.setattr(rp, "REPORTS", tmp_path / "reports")
    results = str(tmp_path / "results")
    rp.rerun_cell("demo", "smoke", "preset=grpo__seed=1", results, cores=2)
    rp.write_record("demo", "smoke", results)
    rows, ctx = rp.reproduce("demo", "preset=grpo__seed=1", "smoke", str(tmp_path / "again"), cores=2)
    assert ctx["same_kernel_path"] and rows and not rp.failed(rows), rp.format_rows(rows)
    assert any(r["name"] == "paired_rise_pass_at_1" for r in rows)


def test_a_merged_record_keeps_the_cells_the_folder_lacks():
    """A report adds arms to an older run: the record keeps the old arm's cells, takes the folder's numbers for a
    cell in both, and recomputes the prediction intervals over the merged arms (seeds 0.060, 0.055 of arm a kept,
    0.062 re-recorded as 0.062 and arm b new: arm a's interval is the one of test_prediction_intervals_by_hand)."""
    old = {
        "commit": ["c0"],
        "machines": [{"cpu": "old"}],
        "warm_starts": {"ws0": {"sha": 1}},
        "cells": {
            "arm=a__seed=1": {"x": {"value": 0.060, "predict95": [0, 1]}},
            "arm=a__seed=2": {"x": {"value": 0.055, "ci95": [0.05, 0.06], "predict95": [0, 1]}},
            "arm=a__seed=3": {"x": {"value": 0.062, "predict95": [0, 1]}},
        },
    }
    new_cells = {"arm=a__seed=3": {"x": 0.062}, "arm=b__seed=1": {"x": 0.5}}
    cells, machines, commits, warm = rp.merge_records(old, new_cells, [{"cpu": "new"}], {"c1"}, {"ws1": {"sha": 2}})
    assert sorted(cells) == ["arm=a__seed=1", "arm=a__seed=2", "arm=a__seed=3", "arm=b__seed=1"]
    assert cells["arm=a__seed=1"]["x"] == 0.060  # the stale interval dropped
    assert cells["arm=a__seed=2"]["x"] == {"value": 0.055, "ci95": [0.05, 0.06]}  # the bootstrap interval kept
    assert machines == [{"cpu": "new"}, {"cpu": "old"}] and commits == {"c0", "c1"} and set(warm) == {"ws0", "ws1"}
    rp.add_prediction_intervals(cells, {c: c.split("__")[0] for c in cells})
    lo, hi = cells["arm=a__seed=1"]["x"]["predict95"]
    assert lo == pytest.approx(0.059 - 0.017914, abs=1e-5) and hi == pytest.approx(0.059 + 0.017914, abs=1e-5)
    after = {"cells": cells}
    rerun = set(new_cells)
    text = rp.merge_report(old, after, rerun)
    assert "added: arm=b__seed=1" in text and "re-recorded arm=a__seed=3: 1 numbers equal" in text
    assert "kept as recorded: arm=a__seed=1, arm=a__seed=2" in text and "re-recorded arm=a__seed=1" not in text
    after["cells"]["arm=a__seed=3"]["x"]["value"] = 0.07
    assert "re-recorded arm=a__seed=3: 1 of 1 differ (x)" in rp.merge_report(old, after, rerun)


def test_a_merge_into_a_transcribed_record_keeps_its_note(tmp_path, monkeypatch):
    """A record transcribed from a report's text has `warm_starts: null` and a note: the merge keeps both
    its cells and its note (dpo_displacement's record, re-recorded with dpo_shift's cells)."""
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "results" / "demo" / "smoke"
    run = folder / "runs" / "preset=grpo__seed=1"
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"paired_rise": {"delta_pass_at_1": 0.1, "ci95": [0.0, 0.2]}}))
    cells = [{"id": "preset=grpo__seed=1", "variant": "preset=grpo", "run_dir": str(run)}]
    (folder / "cells.json").write_text(json.dumps(cells))
    out = tmp_path / "record.json"
    old_cell = {"paired_rise_pass_at_1": {"value": 0.05, "decimals": 2}}
    note = "transcribed from the report's text"
    out.write_text(json.dumps({"warm_starts": None, "note": note, "cells": {"preset=old__seed=1": old_cell}}))
    record = json.loads(rp.write_record("demo", "smoke", tmp_path / "results", out=out, merge=True).read_text())
    assert record["cells"]["preset=old__seed=1"] == old_cell
    assert record["cells"]["preset=grpo__seed=1"]["paired_rise_pass_at_1"]["value"] == 0.1
    assert record["note"] == f"cells kept from the earlier record: {note}"


def test_merge_goes_with_write_record(capsys):
    from harness.cli import main

    assert main(["reproduce", "moe_stability", "--merge"]) == 2
    assert "--merge goes with --write-record" in capsys.readouterr().err


def test_a_merged_record_keeping_cells_of_an_unrecorded_machine_names_no_machine(tmp_path, monkeypatch):
    """A record transcribed before machines were recorded (machine null) keeps its cells in a merge: the merged
    record's machine stays null, so a rerun of a kept cell is judged as from another kernel path, not bit for bit."""
    monkeypatch.setattr(rp, "REPORTS", tmp_path / "reports")
    results = tmp_path / "results"
    folder = results / "demo" / "smoke"
    run = folder / "runs" / "preset=grpo__seed=1"
    (run).mkdir(parents=True)
    (run / "summary.json").write_text("{}")
    (run / "run.json").write_text(json.dumps({"attempts": [{"commit": "c1", "machine": machine.describe()}]}))
    cells = [{"id": "preset=grpo__seed=1", "run_dir": str(run), "variant": "preset=grpo"}]
    monkeypatch.setattr(rp, "load_index", lambda _folder: ({}, cells))
    monkeypatch.setattr(rp, "cell_numbers", lambda _run: {"x": 1.0})
    out = tmp_path / "record.json"
    out.write_text(json.dumps({"machine": None, "warm_starts": None, "cells": {"preset=old__seed=1": {"x": 2.0}}}))
    rp.write_record("demo", "smoke", results, out=out, merge=True)
    merged = json.loads(out.read_text())
    assert merged["machine"] is None and merged["machines"] == [machine.describe()]
    assert set(merged["cells"]) == {"preset=grpo__seed=1", "preset=old__seed=1"}
    rp.write_record("demo", "smoke", results, out=out, merge=False)
    assert json.loads(out.read_text())["machine"] == machine.describe()  # no kept cell: the folder's machine


def test_each_cell_of_a_merged_record_is_judged_against_its_own_machine(tmp_path, monkeypatch):
    """A merge of a record whose cells ran on machine `old` with new cells run here: each cell keeps the machine
    it ran on (`cell_machines`), the record-wide machine is null (two machines), and a rerun is judged against the
    cell's own machine: a new cell bit for bit on this machine, a kept one as from another kernel path. A record
    made before cells named their machine falls back on its record-wide one."""
    monkeypatch.setattr(rp, "REPORTS", tmp_path / "reports")
    results = tmp_path / "results"
    run = results / "demo" / "smoke" / "runs" / "preset=grpo__seed=1"
    run.mkdir(parents=True)
    (run / "summary.json").write_text("{}")
    here = machine.describe()
    (run / "run.json").write_text(json.dumps({"attempts": [{"commit": "c1", "machine": here}]}))
    cells = [{"id": "preset=grpo__seed=1", "run_dir": str(run), "variant": "preset=grpo"}]
    monkeypatch.setattr(rp, "load_index", lambda _folder: ({}, cells))
    monkeypatch.setattr(rp, "cell_numbers", lambda _run: {"x": 1.0})
    out = tmp_path / "record.json"
    OTHER = {**here, "cpu_capability": OTHER_ISA}
    old = {"machine": OTHER, "machines": [OTHER], "warm_starts": {}, "cells": {"preset=old__seed=1": {"x": 2.0}}}
    out.write_text(json.dumps(old))
    merged = json.loads(rp.write_record("demo", "smoke", results, out=out, merge=True).read_text())
    assert merged["machine"] is None and merged["machines"] == [here, OTHER]
    assert merged["cell_machines"] == {"preset=grpo__seed=1": here, "preset=old__seed=1": OTHER}
    assert rp.record_machine(merged, "preset=grpo__seed=1") == here
    assert rp.same_kernel_path(rp.record_machine(merged, "preset=grpo__seed=1"), here)
    assert not rp.same_kernel_path(rp.record_machine(merged, "preset=old__seed=1"), here)
    assert rp.record_machine(old, "preset=old__seed=1") == OTHER  # no cell_machines: the record-wide machine
    merged_again = json.loads(rp.write_record("demo", "smoke", results, out=out, merge=True).read_text())
    assert merged_again["cell_machines"]["preset=old__seed=1"] == OTHER  # kept through a second merge


def test_the_record_finds_the_warm_starts_from_any_working_directory(tmp_path, monkeypatch):
    """The study folder's warmstart/<name>.json names the warm start's folder by its absolute path: the record
    reads it there, so `--write-record` run from another checkout (whose results/warmstart lacks it) still
    fingerprints the warm start the cells trained from (seen: a record with `warm_starts: {}`)."""
    ws = tmp_path / "elsewhere" / "results" / "warmstart" / "tiny-dense-dataset-abc"
    ws.mkdir(parents=True)
    (ws / "model.safetensors").write_bytes(b"weights")
    (ws / "warmstart.json").write_text(json.dumps({"accuracy": 0.3, "key": {"code": "c", "kernels": "k"}}))
    folder = tmp_path / "elsewhere" / "results" / "demo" / "smoke"
    (folder / "warmstart").mkdir(parents=True)
    (folder / "warmstart" / "tiny-dense-dataset-abc.json").write_text(json.dumps({"folder": str(ws)}))
    monkeypatch.chdir(tmp_path)  # not where Snakemake ran: results/warmstart here does not exist
    assert rp.study_warm_starts(folder, []) == [ws]
    fp = rp.warm_start_fingerprint(ws)
    assert fp["accuracy"] == 0.3 and fp["code"] == "c" and len(fp["weights_sha256"]) == 16
