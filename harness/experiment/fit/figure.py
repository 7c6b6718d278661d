"""The study's fit figure: each arm's measured evals (every seed), its fitted curve (solid), the
extrapolation check (the curve fitted on the first half of the compute, dashed over the second half)
and its asymptote A (dotted); log-x compute."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.atomic import atomic_write
from harness.experiment.fit.data import UNITS
from harness.experiment.fit.study_fit import StudyFit

METRIC_NAMES = {"eval/pass_at_1": "held-out pass@1"}


def _arm(ax, color, arm: str, sf: StudyFit) -> None:
    pool = sf.pools[arm]
    fit, half = sf.fits[arm]
    c, y, _ = pool.points()
    ax.scatter(c, y, s=12, color=color, alpha=0.6)
    xs = np.geomspace(c.min(), c.max(), 200)
    label = f"{arm}: A={fit.a:.3f}, B={fit.b:.2f}, C_mid={fit.c_mid:.3g}"
    ax.plot(xs, fit(xs), color=color, lw=2, label=label)
    ax.axhline(fit.a, color=color, lw=0.8, ls=":")
    if half is not None:
        late = np.geomspace(c.max() / 2, c.max(), 50)
        ax.plot(late, half(late), color=color, lw=1.5, ls="--")
        ax.axvline(c.max() / 2, color=color, lw=0.6, alpha=0.4)


def _refused(ax, arm: str, sf: StudyFit) -> None:
    pts = [(r.compute[r.compute > 0], r.y[r.compute > 0]) for r in sf.refused.get(arm, [])]
    if pts:
        ax.scatter(np.concatenate([p[0] for p in pts]), np.concatenate([p[1] for p in pts]), marker="x", color="grey")
    reasons = [r["reason"] for r in sf.rows if r["arm"] == arm and r["status"] != "fit"]
    reason = reasons[0].split(": ", 1)[-1] if reasons else ""
    ax.plot([], [], color="grey", marker="x", ls="", label=f"{arm}: no fit ({reason})"[:90])


def draw(sf: StudyFit, path: str | Path, title: str, metric: str, compute: str) -> Path:
    """The figure to `path` (PNG); refused arms' points drawn as grey crosses, their reason in the legend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.2))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, arm in enumerate(sf.pools):
        _arm(ax, colors[i % len(colors)], arm, sf)
    for arm in sorted({r["arm"] for r in sf.rows} - set(sf.pools)):
        _refused(ax, arm, sf)
    ax.plot(
        [], [], color="k", ls="--", label="fit on the first half of the compute (left of the thin line), extrapolated"
    )
    ax.plot([], [], color="k", ls=":", label="asymptote A")
    ax.set_xscale("log")
    ax.set_xlabel(f"cumulative training compute: {UNITS[compute]} (log scale)")
    ax.set_ylabel(f"{METRIC_NAMES.get(metric, metric)} ({metric})")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    path = Path(path)
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=120, format="png"))
    plt.close(fig)
    return path
