"""The compute-curve fit (harness fit, docs/fit.md) on what each committed report keeps, without rerunning it.

python analysis/reports/fit_of_reports.py          # one line per report: the fitter's verdict on each cell

A report keeps its runs' numbers in analysis/reports/<study>/record.json. The fitter needs each run's
held-out pass@1 at several steps; a record holds the first and last eval of each run at most (the paired
rise, or initial and final pass@1). Each cell's curve is built from what the record holds (pass@1 relative
to the first eval, the compute axis in steps) and given to the fitter's own refusal rule; the runs' own
eval schedule (from the study file) says whether the runs themselves would have carried a fit.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from harness.experiment import load_study
from harness.experiment.fit.data import RunCurve
from harness.experiment.fit.study_fit import refusal

REPORTS = Path(__file__).resolve().parent


def committed_curve(cell: dict, steps: int) -> RunCurve:
    """The pass@1 evals a record keeps for one cell, as the fitter's curve (the first eval at compute 0)."""
    if "initial_pass_at_1" in cell and "final_pass_at_1" in cell:
        y = [cell["initial_pass_at_1"]["value"], cell["final_pass_at_1"]["value"]]
    else:
        y = [0.0, cell["paired_rise_pass_at_1"]["value"]]
    return RunCurve(np.array([0, steps]), np.array([0.0, float(steps)]), np.array(y))


def run_evals(study: str) -> str:
    """The eval steps the study's runs made (its cpu scale), from the study file."""
    cfg = load_study(study, "cpu").cells[0].config
    ev, n = cfg.eval, cfg.train.steps
    if cfg.trainer != "rl":
        return f"{cfg.trainer} trainer, an eval every {ev.every} steps (its step count is set by its pairs)"
    steps = ev.log_steps(n) if ev.spacing == "log" else sorted({0, *range(ev.every, n + 1, ev.every), n})
    return f"evals at steps {', '.join(map(str, steps))} of {n}"


def main() -> None:
    for rec_path in sorted(REPORTS.glob("*/record.json")):
        rec = json.loads(rec_path.read_text())
        study = rec["study"]
        verdicts = {}
        for cell_id, cell in rec["cells"].items():
            if "paired_rise_pass_at_1" not in cell:
                continue
            verdicts[cell_id] = refusal(committed_curve(cell, 20)) or "fit"
        reasons = sorted(set(verdicts.values()))
        print(f"{study}: {len(verdicts)} cells, the runs' {run_evals(study)}; fitter on the record: {reasons}")


if __name__ == "__main__":
    main()
