"""Summary table and generic figures of a study's results folder (results/<study>/<scale>/).

    harness summarize results/demo/smoke --csv results/demo/smoke/summary.csv
    harness summarize results/demo/smoke --figures results/demo/smoke/figures [--notebook analysis/demo.py]

The folder holds cells.json and study.json (written by the Snakefile; `harness grid STUDY
--write-configs` writes the same) and runs/<cell>/ (config.yaml, metrics.jsonl,
summary.json, eval.json). Only those files are read: this module knows the run-directory
contract, not the trainer.

Figures: when the study has an analysis notebook (analysis/<study>.py, jupytext percent
format) it is run as a script with
    HARNESS_STUDY_DIR   the results folder (cells.json, summary.csv, runs/)
    HARNESS_FIGURES_DIR where to write PNG/PDF files
    HARNESS_STUDY, HARNESS_SCALE, HARNESS_EXPERIMENT (the MLflow experiment), MLFLOW_TRACKING_URI
otherwise the generic figures are drawn: eval pass@1 vs step and response lengths vs step,
one curve per variant (cells that differ only by seed), mean over seeds with a shaded
95% t-interval. Either way the figures are written to a temp folder that is renamed into
place, then logged as artifacts of a study-level MLflow run (tag kind=study), with summary.csv,
probe.json, cells.json and study.json (`harness figures --from-mlflow` reads them back).
"""
from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

LENGTH_KEYS = ("length/mean", "length/correct", "length/incorrect", "length/truncated_frac")


def read_jsonl(path: Path) -> list[dict]:
    out = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                break  # a torn last line
    return out


def load_index(study_dir: str | os.PathLike) -> tuple[dict, list[dict]]:
    d = Path(study_dir)
    if not (d / "cells.json").exists():
        raise FileNotFoundError(f"{d}/cells.json not found: run the Snakefile or `harness grid STUDY --write-configs`")
    study = json.loads((d / "study.json").read_text()) if (d / "study.json").exists() else {}
    return study, json.loads((d / "cells.json").read_text())


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
    row.update({
        "status": "complete" if summary else "missing",
        "steps": summary.get("steps"),
        "initial_pass_at_1": ini.get("eval/pass_at_1"),
        "final_pass_at_1": fin.get("eval/pass_at_1"),
        "final_pass_at_k": pk, "k": k,
        "final_pass_at_1_in_loop": fin_loop.get("eval/pass_at_1"),
        # in-loop first -> last eval on the same prompts and seed, bootstrap 95% CI over prompts
        "paired_rise_pass_at_1": rise.get("delta_pass_at_1"),
        "paired_rise_ci95_lo": rise.get("ci95", [None, None])[0],
        "paired_rise_ci95_hi": rise.get("ci95", [None, None])[1],
        "train_accuracy_last": train[-1].get("reward/accuracy") if train else None,
        "wall_seconds": summary.get("wall_seconds"),
    })
    for key in LENGTH_KEYS:
        name = key.replace("/", "_")
        row[f"mean_{name}"] = _mean([r.get(key) for r in train])
        tail = train[-max(1, len(train) // 4):] if train else []
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
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp{os.getpid()}")
    df.to_csv(tmp, index=False)
    os.replace(tmp, out)
    return out


# ----------------------------------------------------------------------------- figures

def t_interval(values: list[float]) -> tuple[float, float]:
    """Mean and half-width of the 95% t-interval (0 with one value)."""
    n = len(values)
    m = sum(values) / n
    if n < 2:
        return m, 0.0
    from scipy.stats import t

    sd = math.sqrt(sum((x - m) ** 2 for x in values) / (n - 1))
    return m, float(t.ppf(0.975, n - 1)) * sd / math.sqrt(n)


def curves(cells: list[dict], key: str, relative: bool = False) -> dict[str, dict]:
    """variant -> {steps, mean, half, n}: a metric vs step, mean and 95% CI over the variant's seeds
    (only steps that every seed has). relative: each seed's curve minus its first value (a paired
    change, which removes per-seed offsets such as a seed-dependent eval set)."""
    by_variant: dict[str, list[dict[int, float]]] = {}
    for c in cells:
        series = {int(r["step"]): float(r[key]) for r in read_jsonl(Path(c["run_dir"]) / "metrics.jsonl")
                  if key in r and r[key] is not None and math.isfinite(float(r[key]))}
        if series and relative:
            first = series[min(series)]
            series = {st: v - first for st, v in series.items()}
        if series:
            by_variant.setdefault(c.get("variant") or "all", []).append(series)
    out = {}
    for v, seeds in by_variant.items():
        steps = sorted(set.intersection(*(set(s) for s in seeds)))
        stats = [t_interval([s[st] for s in seeds]) for st in steps]
        out[v] = {"steps": steps, "mean": [m for m, _ in stats], "half": [h for _, h in stats], "n": len(seeds)}
    return out


def _plot(ax, data: dict[str, dict], label_suffix: str = "", style: str = "-") -> None:
    import matplotlib

    many = len(data) > 10  # past 10 series the default cycle repeats: 20 colours, and a marker per ten
    for i, (variant, d) in enumerate(sorted(data.items())):
        color = matplotlib.colormaps["tab20"](i % 20) if many else f"C{i % 10}"
        marker = "osD^v"[(i // 10) % 5] if many else "o"
        lo = [m - h for m, h in zip(d["mean"], d["half"])]
        hi = [m + h for m, h in zip(d["mean"], d["half"])]
        ax.plot(d["steps"], d["mean"], style, color=color, marker=marker if len(d["steps"]) < 30 else None, ms=3,
                label=f"{variant}{label_suffix} (n={d['n']})")
        if d["n"] > 1:
            ax.fill_between(d["steps"], lo, hi, color=color, alpha=0.2, lw=0)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def generic_figures(study_dir: str | os.PathLike, out_dir: str | os.PathLike) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    study, cells = load_index(study_dir)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    name = f"{study.get('name', '?')} ({study.get('scale', '?')})"
    axes = ", ".join(a for a in study.get("axes", []) if a != "seed") or "base config"
    n_seeds = len(study.get("seeds", [])) or "?"
    paths = []

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    _plot(ax, curves(cells, "eval/pass_at_1"))
    ax.set_xlabel("training step (policy iterations)")
    ax.set_ylabel("held-out pass@1 (fraction of prompts, unbiased estimator)")
    ax.set_title("pass@1 (interval clipped to [0, 1], where pass@1 lives)", fontsize=10)
    lo, hi = ax.get_ylim()
    ax.set_ylim(max(lo, 0.0), min(hi, 1.0))
    _plot(ax2, curves(cells, "eval/pass_at_1", relative=True))
    ax2.axhline(0, color="k", lw=0.8)
    ax2.set_xlabel("training step (policy iterations)")
    ax2.set_ylabel("pass@1 minus the same seed's step-0 pass@1")
    ax2.set_title("change since step 0 (paired per seed)", fontsize=10)
    for a in (ax, ax2):
        a.grid(alpha=0.3)
    ax2.legend(fontsize=7)
    fig.suptitle(f"{name}: held-out pass@1 vs training step by {axes}; "
                 f"mean over {n_seeds} seed(s), shaded = 95% t-interval", fontsize=11)
    fig.tight_layout()
    paths.append(out_dir / "eval_pass_at_1.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)

    fig, axs = plt.subplots(1, 3, figsize=(14, 4.2))
    for ax, key, title in ((axs[0], "length/correct", "correct responses"),
                           (axs[1], "length/incorrect", "incorrect responses")):
        _plot(ax, curves(cells, key))
        ax.set_xlabel("training step (policy iterations)")
        ax.set_ylabel("mean response length (tokens)")
        ax.set_title(f"train rollouts: {title}", fontsize=10)
        ax.grid(alpha=0.3)
    _plot(axs[2], curves(cells, "reward/accuracy"))
    axs[2].set_xlabel("training step (policy iterations)")
    axs[2].set_ylabel("train accuracy (fraction of rollouts correct)")
    axs[2].set_title("train accuracy (compare lengths at matched accuracy)", fontsize=10)
    axs[2].grid(alpha=0.3)
    axs[2].legend(fontsize=7)
    fig.suptitle(f"{name}: response length of correct vs incorrect rollouts by {axes} "
                 f"(mean over seeds, 95% t-interval)", fontsize=11)
    fig.tight_layout()
    paths.append(out_dir / "lengths.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)
    return paths


def run_notebook(notebook: str | os.PathLike, study_dir: Path, figures_dir: Path) -> None:
    """Run a jupytext percent notebook as a script with the HARNESS_* variables set."""
    study, _ = load_index(study_dir)
    from harness.tracking import default_tracking_uri

    env = {**os.environ, "HARNESS_STUDY_DIR": str(Path(study_dir).resolve()),
           "HARNESS_FIGURES_DIR": str(figures_dir.resolve()), "HARNESS_STUDY": study.get("name", ""),
           "HARNESS_SCALE": study.get("scale", ""), "HARNESS_EXPERIMENT": study.get("experiment", ""),
           "MLFLOW_TRACKING_URI": default_tracking_uri(), "MPLBACKEND": "Agg"}
    subprocess.run([sys.executable, str(notebook)], env=env, check=True)


def make_figures(study_dir: str | os.PathLike, out: str | os.PathLike, notebook: str | None = None,
                 log_mlflow: bool = True) -> Path:
    study_dir, out = Path(study_dir), Path(out)
    tmp = out.with_name(f".{out.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    if notebook:
        run_notebook(notebook, study_dir, tmp)
    else:
        generic_figures(study_dir, tmp)
    if out.exists():
        shutil.rmtree(out)
    os.replace(tmp, out)
    if log_mlflow:
        files = ("summary.csv", "probe.json", "cells.json", "study.json")
        log_study_artifacts(study_dir, [out] + [study_dir / f for f in files])
    return out


def log_study_artifacts(study_dir: Path, paths: list[Path]) -> str | None:
    """Log figures and the study's files to its study-level MLflow run, the parent of its cells
    (harness/tracking/study_runs.py)."""
    from harness.tracking.study_runs import log_study_outputs

    return log_study_outputs(study_dir, paths)


def log_cell_evals(study_dir: str | os.PathLike) -> int:
    """Attach each cell's eval.json and groups.jsonl to the cell's MLflow run, with its summary row
    as result/* metrics, nested under the study run (harness/tracking/study_runs.py)."""
    from harness.tracking.study_runs import record_cells

    return record_cells(study_dir)
