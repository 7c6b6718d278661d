"""What `harness fit` writes: the fit table (fit.csv beside summary.csv), the paired comparison of the arms
(fit_compare.csv), the figure (fit.png), and the fitted parameters in MLflow (metrics fit/* on the study's
parent run and on each cell's run; the files on the parent)."""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path

from harness.atomic import atomic_write
from harness.experiment.fit.figure import draw
from harness.experiment.fit.study_fit import Options, StudyFit
from harness.experiment.results import load_index
from harness.experiment.study_runs import open_study
from harness.tracking.runs import run_id_of
from harness.tracking.store import client_for, retry_locked

DEFAULT = Options()
FIT_KEYS = ("R0", "A", "A_lo", "A_hi", "B", "B_lo", "B_hi", "C_mid", "C_mid_lo", "C_mid_hi", "rmse", "points")
EXTRAP_KEYS = ("extrap_points", "extrap_rmse", "extrap_mean_error")
COMPARE_COLUMNS = ["arm", "reference", "metric", "compute", "seeds", "resampled", "d_a", "d_a_lo", "d_a_hi", "d_b"]


def stem(opts: Options) -> str:
    """fit (the default metric and compute), else fit_<compute>_<metric>."""
    if (opts.metric, opts.compute) == (DEFAULT.metric, DEFAULT.compute):
        return "fit"
    return "fit_" + re.sub(r"[^\w.-]+", "_", f"{opts.compute}_{opts.metric}").strip("_")


def title(study: dict, sf: StudyFit, opts: Options) -> str:
    names = [a.split("=", 1)[-1] for a in dict.fromkeys(r["arm"] for r in sf.rows)]  # "arm=grpo" -> "grpo"
    arms = " vs ".join(names)
    arms = arms if len(arms) <= 60 else f"{len(names)} arms (legend)"  # the figure is ~100 characters wide
    return (
        f"{study.get('name')} ({study.get('scale')}): {arms}\n"
        f"{opts.metric} vs cumulative {opts.compute}, fitted R = R0 + (A - R0) / (1 + (C_mid / C)^B)"
    )


def _csv(rows: list[dict], path: Path, columns: list[str] | None = None) -> Path:
    """The rows as a CSV; with none, the header alone (a study of one arm compares nothing)."""
    import pandas as pd

    df = pd.DataFrame(rows) if rows else pd.DataFrame(columns=columns or [])
    atomic_write(path, lambda tmp: df.to_csv(tmp, index=False))
    return path


def write_outputs(study_dir: str | Path, sf: StudyFit, opts: Options, out: str | Path | None = None) -> dict:
    """fit.csv, fit_compare.csv and fit.png into `out` (default: the study's results folder)."""
    d = Path(study_dir)
    out = Path(out) if out else d
    out.mkdir(parents=True, exist_ok=True)
    study, _ = load_index(d)
    name = stem(opts)
    paths = {
        "table": _csv(sf.rows, out / f"{name}.csv"),
        "compare": _csv(sf.compare, out / f"{name}_compare.csv", COMPARE_COLUMNS),
    }
    paths["figure"] = draw(sf, out / f"{name}.png", title(study, sf, opts), opts.metric, opts.compute)
    return paths


def _name(s: str) -> str:
    return re.sub(r"[^\w.\- /]", "_", str(s))


def _metrics(row: dict, prefix: str, step: int = 0) -> list:
    from mlflow.entities import Metric  # late: mlflow takes seconds to import

    now = int(time.time() * 1000)
    out = []
    for k in (*FIT_KEYS, *EXTRAP_KEYS, "d_a", "d_a_lo", "d_a_hi", "d_b", "d_b_lo", "d_b_hi"):
        v = row.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            out.append(Metric(_name(prefix + k), float(v), now, step))
    return out


def log_mlflow(study_dir: str | Path, sf: StudyFit, opts: Options, paths: dict, uri: str | None = None) -> int:
    """Each fitted cell's run gets metrics <prefix>A, ... and a tag <prefix>status (refused: the reason);
    the study's parent run gets every arm's and comparison's numbers and the files. Returns the runs written."""
    d = Path(study_dir)
    study, cells = load_index(d)
    if not study.get("experiment"):
        return 0
    client, uri = client_for(uri)
    prefix = "fit/" if stem(opts) == "fit" else f"fit/{opts.compute}/{opts.metric}/"
    run_of = {c["id"]: run_id_of(c["run_dir"]) for c in cells}
    n = 0
    for row in sf.rows:
        run_id = run_of.get(row.get("cell") or "")
        if row["level"] != "run" or not run_id:
            continue
        retry_locked(client.log_batch, run_id, metrics=_metrics(row, prefix))
        status = row["status"] + (f": {row['reason']}" if row["reason"] else "")
        retry_locked(client.set_tag, run_id, _name(prefix + "status"), status)
        n += 1
    parent = open_study(d, uri)
    metrics = [m for r in sf.rows if r["level"] == "arm" for m in _metrics(r, f"{prefix}{r['arm']}/")]
    metrics += [m for r in sf.compare for m in _metrics(r, f"{prefix}{r.get('arm')}_vs_{r.get('reference')}/")]
    retry_locked(client.log_batch, parent, metrics=metrics)
    retry_locked(client.set_tag, parent, _name(prefix + "options"), json.dumps(opts.__dict__))
    for p in paths.values():
        retry_locked(client.log_artifact, parent, str(p), "fit")
    return n + 1
