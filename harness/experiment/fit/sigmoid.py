"""The saturating sigmoid of compute and its least-squares fit (docs/fit.md).

    R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)

R0 is fixed at the first eval (compute 0, where R = R0 exactly); A, C_mid and B are fitted.
Method: ScaleRL's grid (arXiv 2510.13786) made three-dimensional and vectorised -- A x log C_mid x
log B, the least-squares point of the grid -- then refined by a bounded Levenberg-Marquardt on
(A, log C_mid, log B), so the answer does not carry the grid's resolution. The refinement is batched:
the bootstrap (bootstrap.py) fits hundreds of resampled curves at once from the point estimate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GRID = 24  # points per parameter of the starting grid
ITERATIONS = 60  # Levenberg-Marquardt steps (converged long before on curves of 4-40 points)


@dataclass(frozen=True)
class Bounds:
    """The box the fit stays in: A in [a_lo, a_hi], log C_mid and log B in theirs."""

    a_lo: float
    a_hi: float
    logc_lo: float
    logc_hi: float
    logb_lo: float = float(np.log(0.05))
    logb_hi: float = float(np.log(20.0))

    def clip(self, theta: np.ndarray) -> np.ndarray:
        lo = np.array([self.a_lo, self.logc_lo, self.logb_lo])
        hi = np.array([self.a_hi, self.logc_hi, self.logb_hi])
        return np.clip(theta, lo, hi)


def bounds_for(compute: np.ndarray, y: np.ndarray, r0: float, bounded01: bool) -> Bounds:
    """A between R0 and 1 for a rate (pass@k, a 0/1 reward), else up to R0 + 3 x the largest rise seen;
    C_mid from a tenth of the smallest compute to ten times the largest (beyond that A is not identified)."""
    c = compute[compute > 0]
    a_hi = 1.0 if bounded01 else r0 + 3.0 * max(float(np.max(y)) - r0, 1e-9)
    return Bounds(r0, max(a_hi, r0 + 1e-9), float(np.log(c.min() / 10)), float(np.log(c.max() * 10)))


def curve(compute, r0: float, a: float, b: float, c_mid: float) -> np.ndarray:
    """R(C); R(0) = R0."""
    c = np.asarray(compute, dtype=float)
    with np.errstate(divide="ignore", over="ignore"):
        s = 1.0 / (1.0 + np.exp(b * (np.log(c_mid) - np.log(np.where(c > 0, c, np.nan)))))
    return np.where(c > 0, r0 + (a - r0) * np.nan_to_num(s, nan=0.0), r0)


def _model(theta: np.ndarray, logc: np.ndarray, r0: np.ndarray):
    """theta (R, 3) = (A, log C_mid, log B); logc (n,); r0 (R,) -> f (R, n) and the Jacobian (R, n, 3)."""
    a, lc, lb = theta[:, 0:1], theta[:, 1:2], theta[:, 2:3]
    b = np.exp(lb)
    u = b * (lc - logc[None, :])
    s = 1.0 / (1.0 + np.exp(np.clip(u, -50, 50)))
    amp = a - r0[:, None]
    ds = -s * (1 - s)  # d s / d u
    jac = np.stack([s, amp * ds * b, amp * ds * u], axis=-1)
    return r0[:, None] + amp * s, jac


def refine(theta0: np.ndarray, logc: np.ndarray, y: np.ndarray, w: np.ndarray, r0: np.ndarray, bounds: Bounds):
    """Batched, bounded Levenberg-Marquardt: R curves at once. theta0 (R, 3), y and w (R, n) -> theta (R, 3)
    and the weighted sum of squared residuals (R,)."""
    theta = bounds.clip(theta0.copy())
    f, jac = _model(theta, logc, r0)
    sse = (w * (y - f) ** 2).sum(-1)
    lam = np.full(len(theta), 1e-2)
    for _ in range(ITERATIONS):
        r = y - f
        jtw = jac.transpose(0, 2, 1) * w[:, None, :]
        jtj = jtw @ jac
        g = (jtw @ r[..., None])[..., 0]
        damp = lam[:, None, None] * (np.eye(3) * (np.diagonal(jtj, axis1=1, axis2=2)[:, None, :] + 1e-12))
        step = np.linalg.solve(jtj + damp, g[..., None])[..., 0]
        cand = bounds.clip(theta + step)
        f2, jac2 = _model(cand, logc, r0)
        sse2 = (w * (y - f2) ** 2).sum(-1)
        ok = sse2 < sse
        theta = np.where(ok[:, None], cand, theta)
        f = np.where(ok[:, None], f2, f)
        jac = np.where(ok[:, None, None], jac2, jac)
        sse = np.where(ok, sse2, sse)
        lam = np.where(ok, lam / 3, lam * 4).clip(1e-9, 1e9)
    return theta, sse


def grid_start(logc: np.ndarray, y: np.ndarray, w: np.ndarray, r0: float, bounds: Bounds) -> np.ndarray:
    """The least-squares point of an A x log C_mid x log B grid (ScaleRL's grid, with B on it too)."""
    a = np.linspace(bounds.a_lo, bounds.a_hi, GRID)
    lc = np.linspace(bounds.logc_lo, bounds.logc_hi, GRID)
    lb = np.linspace(bounds.logb_lo, bounds.logb_hi, GRID)
    u = np.exp(lb)[None, :, None] * (lc[:, None, None] - logc[None, None, :])  # (C, B, n)
    s = 1.0 / (1.0 + np.exp(np.clip(u, -50, 50)))
    f = r0 + (a[:, None, None, None] - r0) * s[None]  # (A, C, B, n)
    sse = (w * (y - f) ** 2).sum(-1)
    i, j, k = np.unravel_index(np.argmin(sse), sse.shape)
    return np.array([a[i], lc[j], lb[k]])


@dataclass(frozen=True)
class Fit:
    r0: float
    a: float
    b: float
    c_mid: float
    rmse: float
    n: int

    def __call__(self, compute) -> np.ndarray:
        return curve(compute, self.r0, self.a, self.b, self.c_mid)


def fit_points(compute, y, r0: float, bounded01: bool, w=None) -> Fit:
    """Fit A, B, C_mid to the points with compute > 0 (weights w: a bootstrap's counts, else 1)."""
    compute, y = np.asarray(compute, float), np.asarray(y, float)
    w = np.ones_like(y) if w is None else np.asarray(w, float)
    pos = compute > 0
    logc, yp, wp = np.log(compute[pos]), y[pos], w[pos]
    bounds = bounds_for(compute, y, r0, bounded01)
    theta, sse = refine(grid_start(logc, yp, wp, r0, bounds)[None], logc, yp[None], wp[None], np.array([r0]), bounds)
    a, lc, lb = theta[0]
    return Fit(r0, float(a), float(np.exp(lb)), float(np.exp(lc)), float(np.sqrt(sse[0] / wp.sum())), int(pos.sum()))
