"""Fits of pooled runs and their bootstrap: the seeds resampled with replacement and, where every run
saved per-prompt scores, the held-out prompts too (the same prompt draw for every run and eval of a
replicate, and for both arms of a paired comparison: the eval set is shared, so the pairing is kept).

Each replicate is refitted from the point estimate by the batched refinement (sigmoid.refine): a
thousand replicates cost about as much as one grid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.experiment.fit.data import RunCurve
from harness.experiment.fit.sigmoid import Bounds, Fit, bounds_for, fit_points, refine


@dataclass
class Pool:
    """The runs of one arm (one per seed), kept apart so that they can be resampled."""

    seeds: list
    runs: list[RunCurve]
    bounded01: bool

    @property
    def prompts(self) -> bool:
        """Every run has per-prompt scores over the same number of prompts."""
        return all(r.prompts is not None for r in self.runs) and len({r.prompts.shape[1] for r in self.runs}) == 1

    def points(self, half: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(compute, y, run index) of every eval after the first; with half, only compute <= max / 2."""
        c = np.concatenate([r.compute[1:] for r in self.runs])
        y = np.concatenate([r.y[1:] for r in self.runs])
        idx = np.concatenate([np.full(len(r.y) - 1, i) for i, r in enumerate(self.runs)])
        keep = c <= c.max() / 2 if half else np.ones(len(c), bool)
        return c[keep], y[keep], idx[keep]

    def r0(self) -> float:
        return float(np.mean([r.y[0] for r in self.runs]))

    def fit(self, half: bool = False) -> Fit:
        c, y, _ = self.points(half)
        return fit_points(np.concatenate([[0.0], c]), np.concatenate([[self.r0()], y]), self.r0(), self.bounded01)

    def bounds(self) -> Bounds:
        c, y, _ = self.points()
        return bounds_for(c, y, self.r0(), self.bounded01)


def draws(n_runs: int, n_prompts: int | None, n_boot: int, rng: np.random.Generator):
    """(R, runs) seed counts and (R, P) prompt indices (None: seeds only)."""
    counts = rng.multinomial(n_runs, np.full(n_runs, 1.0 / n_runs), size=n_boot) if n_runs > 1 else None
    idx = rng.integers(0, n_prompts, size=(n_boot, n_prompts)) if n_prompts else None
    return counts, idx


def replicate_data(pool: Pool, counts, idx, n_boot: int):
    """The resampled data of every replicate: Y and W (R, n) over the pooled points, R0 (R,)."""
    ys, r0s = [], []
    for r in pool.runs:
        if idx is not None:  # (evals, R): each eval's mean over the drawn prompts
            ev = r.prompts[:, idx].mean(-1)
        else:
            ev = np.repeat(r.y[:, None], n_boot, axis=1)
        ys.append(ev[1:].T)
        r0s.append(ev[0])
    y = np.concatenate(ys, axis=1)
    run_of = np.concatenate([np.full(len(r.y) - 1, i) for i, r in enumerate(pool.runs)])
    cnt = counts if counts is not None else np.ones((n_boot, len(pool.runs)))
    w = cnt[:, run_of].astype(float)
    r0 = (cnt * np.stack(r0s, axis=1)).sum(1) / cnt.sum(1)
    return y, w, r0


def refit(pool: Pool, start: Fit, counts, idx, n_boot: int) -> np.ndarray:
    """(R, 3) = A, B, C_mid of every replicate, each refined from the point estimate."""
    c, _, _ = pool.points()
    y, w, r0 = replicate_data(pool, counts, idx, n_boot)
    b = pool.bounds()
    b = Bounds(min(b.a_lo, float(r0.min())), b.a_hi, b.logc_lo, b.logc_hi, b.logb_lo, b.logb_hi)
    theta0 = np.tile([start.a, np.log(start.c_mid), np.log(start.b)], (n_boot, 1))
    theta, _ = refine(theta0, np.log(c), y, w, r0, b)
    return np.stack([theta[:, 0], np.exp(theta[:, 2]), np.exp(theta[:, 1])], axis=1)


def percentiles(level: float, n_units: int) -> list[float]:
    """The expanded percentile interval (Hesterberg 2015): the plain percentile bootstrap of n units is as
    narrow as a z-interval with the n-divisor sd, so it under-covers with few seeds (about 85% for a 90%
    interval over 8 seeds); its tail is widened to alpha' = 2 Phi(-sqrt(n / (n - 1)) t_{n-1, alpha/2})."""
    from scipy.stats import norm, t

    alpha = 1 - level
    if n_units > 1:
        alpha = 2 * float(norm.cdf(-np.sqrt(n_units / (n_units - 1)) * t.ppf(1 - alpha / 2, n_units - 1)))
    return [alpha / 2 * 100, (1 - alpha / 2) * 100]


def resampling(pool: Pool) -> str:
    """What the bootstrap resamples, for the table."""
    units = (["seeds"] if len(pool.runs) > 1 else []) + (["prompts"] if pool.prompts else [])
    return "+".join(units) or "none"


def intervals(pool: Pool, start: Fit, n_boot: int, level: float, rng) -> dict[str, tuple[float, float]]:
    """Percentile intervals of A, B and C_mid (NaN when there is nothing to resample)."""
    n_prompts = pool.runs[0].prompts.shape[1] if pool.prompts else None
    if len(pool.runs) < 2 and not n_prompts:
        return {k: (float("nan"), float("nan")) for k in ("a", "b", "c_mid")}
    counts, idx = draws(len(pool.runs), n_prompts, n_boot, rng)
    reps = refit(pool, start, counts, idx, n_boot)
    q = percentiles(level, len(pool.runs) if len(pool.runs) > 1 else n_prompts)
    return {k: tuple(float(v) for v in np.percentile(reps[:, i], q)) for i, k in enumerate(("a", "b", "c_mid"))}


def paired(pool: Pool, ref: Pool, n_boot: int, level: float, rng) -> dict:
    """The arm minus the reference in A, B and log10 C_mid, both fitted on the seeds both ran, resampling
    those seeds (paired by seed) and the prompts (both arms' evals share them); intervals at `level`."""
    common = [s for s in pool.seeds if s in ref.seeds]
    if not common:
        return {"seeds": 0, "resampled": "none", "note": "no seed that both arms fitted"}
    a = Pool(common, [pool.runs[pool.seeds.index(s)] for s in common], pool.bounded01)
    r = Pool(common, [ref.runs[ref.seeds.index(s)] for s in common], ref.bounded01)
    fit, ref_fit = a.fit(), r.fit()
    same_p = a.prompts and r.prompts and a.runs[0].prompts.shape[1] == r.runs[0].prompts.shape[1]
    n_prompts = a.runs[0].prompts.shape[1] if same_p else None
    out = {
        "seeds": len(common),
        "resampled": "+".join((["seeds"] if len(common) > 1 else []) + (["prompts"] if n_prompts else [])) or "none",
        "d_a": fit.a - ref_fit.a,
        "d_b": fit.b - ref_fit.b,
        "d_log10_c_mid": float(np.log10(fit.c_mid / ref_fit.c_mid)),
    }
    if len(common) < 2 and not n_prompts:
        return {**out, **{f"{k}_{e}": float("nan") for k in ("d_a", "d_b", "d_log10_c_mid") for e in ("lo", "hi")}}
    counts, idx = draws(len(common), n_prompts, n_boot, rng)
    da = refit(a, fit, counts, idx, n_boot)
    dr = refit(r, ref_fit, counts, idx, n_boot)
    diffs = {"d_a": da[:, 0] - dr[:, 0], "d_b": da[:, 1] - dr[:, 1], "d_log10_c_mid": np.log10(da[:, 2] / dr[:, 2])}
    q = percentiles(level, len(common) if len(common) > 1 else n_prompts)
    for k, v in diffs.items():
        out[f"{k}_lo"], out[f"{k}_hi"] = (float(x) for x in np.percentile(v, q))
    return out
