"""Summary table of a study's results folder (results/<study>/<scale>/): one row per cell.

    harness summarize results/demo/smoke --csv results/demo/smoke/summary.csv
    harness summarize results/demo/smoke --figures results/demo/smoke/figures [--notebook analysis/demo.py]

The folder holds cells.json and study.json (written by the Snakefile; `harness grid STUDY
--write-configs` writes the same) and runs/<cell>/ (config.yaml, metrics.jsonl,
summary.json, eval.json). Figures: harness/experiment/render.py.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from harness.atomic import atomic_write
from harness.experiment.results import load_index, read_jsonl

LENGTH_KEYS = ("length/mean", "length/correct", "length/incorrect", "length/truncated_frac")


def _eval_metrics(obj) -> dict[str, float]:
    """`eval/...` numbers of an eval.json / summary section, wherever they sit (top level or nested)."""
    out: dict[str, float] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(k, str) and k.startswith("eval/") and isinstance(v, (int, float)) and not isinstance(v, bool):
                out[k] = float(v)
            elif isinstance(v, dict):
                for kk, vv in _eval_metrics(v).items():
                    out.setdefault(kk, vv)
    return out


def _pass_k(metrics: dict[str, float]) -> tuple[int | None, float | None]:
    ks = [int(k.rsplit("_", 1)[1]) for k in metrics if k.startswith("eval/pass_at_") and k.rsplit("_", 1)[1].isdigit()]
    if not ks:
        return None, None
    k = max(ks)
    return k, metrics[f"eval/pass_at_{k}"]


def _mean(xs: list[float]) -> float:
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    return sum(xs) / len(xs) if xs else float("nan")


def cell_row(cell: dict) -> dict:
    run = Path(cell["run_dir"])
    summary = json.loads((run / "summary.json").read_text()) if (run / "summary.json").exists() else {}
    final_eval = json.loads((run / "eval.json").read_text()) if (run / "eval.json").exists() else {}
    records = read_jsonl(run / "metrics.jsonl")
    train = [r for r in records if "reward/mean" in r]
    ini = _eval_metrics(summary.get("initial_eval", {}))
    fin_loop = _eval_metrics(summary.get("final_eval", {}))
    fin = _eval_metrics(final_eval) or fin_loop
    k, pk = _pass_k(fin)
    rise = summary.get("paired_rise") or {}
    row = {"cell": cell["id"], "variant": cell.get("variant", ""), **{k_: _scalar(v) for k_, v in cell["axes"].items()}}
    row.update(
        {
            "status": "complete" if summary else "missing",
            "steps": summary.get("steps"),
            "initial_pass_at_1": ini.get("eval/pass_at_1"),
            "final_pass_at_1": fin.get("eval/pass_at_1"),
            "final_pass_at_k": pk,
            "k": k,
            "final_pass_at_1_in_loop": fin_loop.get("eval/pass_at_1"),
            # in-loop first -> last eval on the same prompts and seed, bootstrap 95% CI over prompts
            "paired_rise_pass_at_1": rise.get("delta_pass_at_1"),
            "paired_rise_ci95_lo": rise.get("ci95", [None, None])[0],
            "paired_rise_ci95_hi": rise.get("ci95", [None, None])[1],
            "train_accuracy_last": train[-1].get("reward/accuracy") if train else None,
            "wall_seconds": summary.get("wall_seconds"),
        }
    )
    for key in LENGTH_KEYS:
        name = key.replace("/", "_")
        row[f"mean_{name}"] = _mean([r.get(key) for r in train])
        tail = train[-max(1, len(train) // 4) :] if train else []
        row[f"last_quarter_{name}"] = _mean([r.get(key) for r in tail])
    row["eval_length_correct"] = fin.get("eval/length/correct")
    for key, v in sorted(fin.items()):
        if key.startswith("eval/pass_at_1/"):
            row["final_pass_at_1_" + key.rsplit("/", 1)[1]] = v
    return row


def _scalar(v):
    return json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v


def summary_table(study_dir: str | os.PathLike):
    import pandas as pd

    _, cells = load_index(study_dir)
    return pd.DataFrame([cell_row(c) for c in cells])


def write_csv(study_dir: str | os.PathLike, out: str | os.PathLike) -> Path:
    out = Path(out)
    df = summary_table(study_dir)
    atomic_write(out, lambda tmp: df.to_csv(tmp, index=False))
    return out
