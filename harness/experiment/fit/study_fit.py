"""A study's fits: per run (arm x seed), per arm (its seeds pooled), and every arm against a reference.

Refusals (the row's `status` = refused, `reason` says why, naming the arm and the seed): fewer than
MIN_POINTS evals after the first, a flat curve, no rise (the later half's mean not above the first eval,
or not by twice its standard error, or a curve that falls with log compute by more than twice its slope's standard error), a run whose
records lack the compute axis.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness.experiment.fit.bootstrap import Pool, intervals, paired, resampling
from harness.experiment.fit.data import NoCompute, RunCurve, logged_eval_metrics, read_curve
from harness.experiment.fit.sigmoid import Fit
from harness.experiment.results import load_index
from harness.experiment.study import StudyError

MIN_POINTS = 4  # evals after the first: three parameters need at least one more point


def rise_and_se(c: RunCurve) -> tuple[float, float]:
    """The later half of the evals' mean minus the first eval, and its standard error: over the prompts when
    the run saved per-prompt scores (each prompt's later mean minus its first: paired), else over the later
    evals' spread (which holds the curve's own trend too: conservative)."""
    pos = np.flatnonzero(c.compute > 0)
    later = pos[len(pos) // 2 :]
    if c.prompts is not None:
        d = c.prompts[later].mean(0) - c.prompts[0]
        return float(d.mean()), float(d.std(ddof=1) / np.sqrt(len(d)))
    y = c.y[later]
    return float(y.mean() - c.y[0]), float(y.std(ddof=1) / np.sqrt(len(y)))


def refusal(c: RunCurve) -> str | None:
    """Why a curve cannot carry a fit, or None."""
    n = int((c.compute > 0).sum())
    if n < MIN_POINTS:
        return f"too few points: {n} eval(s) after the first, {MIN_POINTS} needed"
    y, r0 = c.y[c.compute > 0], float(c.y[0])
    if np.ptp(c.y) == 0:
        return f"flat: every eval is {r0:g}"
    later = y[len(y) // 2 :].mean()
    if later <= r0:
        return f"no rise: the later evals' mean {later:.4g} is not above the first eval {r0:.4g}"
    rise, se = rise_and_se(c)
    if rise < 2 * se:
        return f"no rise beyond noise: the later evals' mean is {rise:+.4g} over the first eval, +-{se:.2g} (1 se)"
    (slope, _), cov = np.polyfit(np.log(c.compute[c.compute > 0]), y, 1, cov=True)
    if slope + 2 * np.sqrt(max(cov[0, 0], 0.0)) < 0:  # falls beyond its noise (a saturated curve does not)
        return f"no rise: the evals fall with log compute (slope {slope:.3g} per e-fold)"
    return None


@dataclass
class Options:
    metric: str = "eval/pass_at_1"
    compute: str = "generated_tokens"
    params: float | None = None
    n_boot: int = 1000
    level: float = 0.95
    seed: int = 0
    reference: str | None = None


@dataclass
class StudyFit:
    """The table's rows, the comparison's rows, and each arm's pool and fits (for the figure)."""

    rows: list[dict] = field(default_factory=list)
    compare: list[dict] = field(default_factory=list)
    pools: dict[str, Pool] = field(default_factory=dict)
    fits: dict[str, tuple[Fit, Fit | None]] = field(default_factory=dict)
    refused: dict[str, list[RunCurve]] = field(default_factory=dict)  # arm -> its refused runs' curves


def extrapolation(pool: Pool) -> tuple[dict, Fit | None]:
    """Fit on the first half of the compute (C <= max / 2), predict the rest: RMSE and signed mean error."""
    c, _, _ = pool.points(half=True)
    if len(c) < MIN_POINTS:
        return {"extrap_note": f"{len(c)} eval(s) in the first half of the compute, {MIN_POINTS} needed"}, None
    half = pool.fit(half=True)
    call, y, _ = pool.points()
    late = call > call.max() / 2
    if not late.any():
        return {"extrap_note": "no eval in the second half of the compute"}, None
    err = half(call[late]) - y[late]
    row = {
        "extrap_points": int(late.sum()),
        "extrap_rmse": float(np.sqrt(np.mean(err**2))),
        "extrap_mean_error": float(np.mean(err)),
        "extrap_a": half.a,
    }
    return row, half


def at_bound(fit: Fit, pool: Pool) -> str:
    """The parameters the fit left on the edge of its box (docs/fit.md): the data do not pin them down."""
    b = pool.bounds()
    edges = {
        "A": (fit.a, b.a_lo, b.a_hi),
        "C_mid": (np.log(fit.c_mid), b.logc_lo, b.logc_hi),
        "B": (np.log(fit.b), b.logb_lo, b.logb_hi),
    }
    return ",".join(k for k, (v, lo, hi) in edges.items() if min(v - lo, hi - v) <= 1e-6 * max(1.0, hi - lo))


def fit_row(pool: Pool, opts: Options, rng) -> tuple[dict, Fit, Fit | None]:
    """One fitted row (a run or an arm): the parameters, their intervals, the extrapolation check."""
    fit = pool.fit()
    ci = intervals(pool, fit, opts.n_boot, opts.level, rng)
    row = {"status": "fit", "reason": "", "points": fit.n, "R0": fit.r0, "A": fit.a, "B": fit.b, "C_mid": fit.c_mid}
    for k, name in (("a", "A"), ("b", "B"), ("c_mid", "C_mid")):
        row[f"{name}_lo"], row[f"{name}_hi"] = ci[k]
    row.update({"rmse": fit.rmse, "resampled": resampling(pool), "at_bound": at_bound(fit, pool)})
    ex, half = extrapolation(pool)
    row.update(ex)
    return row, fit, half


def _curves(study_dir: Path, opts: Options) -> tuple[dict, list[dict]]:
    """arm -> {seed: (cell, RunCurve or None, the refusal or None)}, and the cells."""
    _, cells = load_index(study_dir)
    arms: dict[str, dict] = {}
    for cell in cells:
        arm = cell.get("variant") or cell["id"]
        c: RunCurve | None = None
        try:
            c = read_curve(cell["run_dir"], opts.metric, opts.compute, opts.params)
            reason = refusal(c)
        except NoCompute as err:
            reason = str(err)
        except (OSError, ValueError) as err:  # a missing or unreadable run folder
            reason = f"no records: {err}"
        arms.setdefault(arm, {})[cell.get("seed")] = (cell["id"], c, reason)
    return arms, cells


def _base(arm: str, seed, cell: str, opts: Options) -> dict:
    return {"level": "run" if cell else "arm", "arm": arm, "seed": seed, "cell": cell, "metric": opts.metric}


def fit_arm(arm: str, runs: dict, opts: Options, out: StudyFit, rng) -> None:
    """The rows of one arm: each seed's, then the pooled one."""
    bounded = opts.metric.startswith("eval/pass_at")
    ok = {}
    for seed, (cell, c, reason) in runs.items():
        base = {**_base(arm, seed, cell, opts), "compute": opts.compute}
        if reason:
            out.rows.append({**base, "status": "refused", "reason": f"{arm}, seed {seed}: {reason}"})
            if c is not None:
                out.refused.setdefault(arm, []).append(c)
            continue
        ok[seed] = c
        out.rows.append({**base, **fit_row(Pool([seed], [c], bounded), opts, rng)[0]})
    base = {**_base(arm, "all", "", opts), "compute": opts.compute, "seeds": len(ok)}
    if not ok:
        out.rows.append({**base, "status": "refused", "reason": f"{arm}: every seed refused"})
        return
    pool = Pool(list(ok), list(ok.values()), bounded)
    row, fit, half = fit_row(pool, opts, rng)
    out.rows.append({**base, **row})
    out.pools[arm], out.fits[arm] = pool, (fit, half)


def fit_study(study_dir: str | Path, opts: Options) -> StudyFit:
    """Every run's and arm's fit, and every arm against the reference (default: the first arm fitted)."""
    rng = np.random.default_rng(opts.seed)
    arms, cells = _curves(Path(study_dir), opts)
    check_metric(opts.metric, [c["run_dir"] for c in cells if c.get("run_dir")])
    if opts.reference is not None and opts.reference not in arms:
        raise StudyError(f"--reference {opts.reference!r} is not an arm of the study (arms: {sorted(arms)})")
    out = StudyFit()
    for arm, runs in arms.items():
        fit_arm(arm, runs, opts, out, rng)
    ref = opts.reference or next(iter(out.pools), None)
    if ref is not None and ref not in out.pools:
        out.compare.append({"arm": "", "reference": ref, "note": f"reference arm {ref!r} has no fit"})
        return out
    for arm, pool in out.pools.items():
        if arm != ref:
            row = paired(pool, out.pools[ref], opts.n_boot, opts.level, rng)
            out.compare.append({"arm": arm, "reference": ref, "metric": opts.metric, "compute": opts.compute, **row})
    return out


def check_metric(metric: str, runs: list) -> None:
    """StudyError when runs whose records can be read log evals, but none of `metric` (a misspelt --metric
    would otherwise fit nothing and exit 0, every run refused for want of points)."""
    logged = logged_eval_metrics(runs)
    if logged and metric not in logged:
        raise StudyError(f"--metric {metric!r}: no run of the study logs it; allowed: {sorted(logged)}")


def finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _interval(row: dict, k: str, fmt: str) -> str:
    lo, hi = row.get(f"{k}_lo"), row.get(f"{k}_hi")
    ci = f" [{lo:{fmt}}, {hi:{fmt}}]" if finite(lo) and finite(hi) else ""
    return f"{row[k]:{fmt}}{ci}"


def format_fits(sf: StudyFit) -> str:
    """The arms' fits and the comparison, as printed by `harness fit` (every row is in fit.csv)."""
    lines = []
    for r in sf.rows:
        if r["level"] != "arm":
            continue
        if r["status"] != "fit":
            lines.append(f"{r['arm']}: refused -- {r['reason']}")
            continue
        ex = f"{r['extrap_rmse']:.4f} over {r['extrap_points']}" if finite(r.get("extrap_rmse")) else r["extrap_note"]
        edge = f"; at the bound of its range, not pinned down by the data: {r['at_bound']}" if r["at_bound"] else ""
        lines.append(
            f"{r['arm']} ({r['seeds']} seeds, resampled {r['resampled']}): A {_interval(r, 'A', '.4f')}, "
            f"B {_interval(r, 'B', '.3f')}, C_mid {_interval(r, 'C_mid', '.3g')}; extrapolation RMSE {ex}{edge}"
        )
    refused = [r["reason"] for r in sf.rows if r["level"] == "run" and r["status"] != "fit"]
    lines += [f"  refused: {x}" for x in refused]
    for c in sf.compare:
        if "d_a" not in c:
            lines.append(f"{c.get('arm')} vs {c.get('reference')}: {c.get('note')}")
            continue
        lines.append(
            f"{c['arm']} - {c['reference']} ({c['seeds']} paired seeds, resampled {c['resampled']}): "
            f"dA {_interval(c, 'd_a', '+.4f')}, dB {_interval(c, 'd_b', '+.3f')}, "
            f"dlog10 C_mid {_interval(c, 'd_log10_c_mid', '+.3f')}"
        )
    return "\n".join(lines)
