"""The generic figures of a study without an analysis notebook: eval pass@1 vs step and response
lengths vs step (and, for runs with a reward model and a verifier, the hacking/* probe), one curve per variant (cells that differ only by seed), mean over seeds with a
shaded 95% t-interval."""

from __future__ import annotations

import math
import os
from pathlib import Path

from harness.experiment.results import load_index, read_jsonl
from harness.experiment.stats import t_interval


def curves(cells: list[dict], key: str, relative: bool = False) -> dict[str, dict]:
    """variant -> {steps, mean, half, n}: a metric vs step, mean and 95% CI over the variant's seeds
    (only steps that every seed has). relative: each seed's curve minus its first value (a paired
    change, which removes per-seed offsets such as a seed-dependent eval set)."""
    by_variant: dict[str, list[dict[int, float]]] = {}
    for c in cells:
        series = {
            int(r["step"]): float(r[key])
            for r in read_jsonl(Path(c["run_dir"]) / "metrics.jsonl")
            if key in r and r[key] is not None and math.isfinite(float(r[key]))
        }
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


def _plot(ax, data: dict[str, dict]) -> None:
    import matplotlib

    many = len(data) > 10  # past 10 series the default cycle repeats: 20 colours, and a marker per ten
    for i, (variant, d) in enumerate(sorted(data.items())):
        color = matplotlib.colormaps["tab20"](i % 20) if many else f"C{i % 10}"
        marker = "osD^v"[(i // 10) % 5] if many else "o"
        lo = [m - h for m, h in zip(d["mean"], d["half"])]
        hi = [m + h for m, h in zip(d["mean"], d["half"])]
        ax.plot(
            d["steps"],
            d["mean"],
            "-",
            color=color,
            marker=marker if len(d["steps"]) < 30 else None,
            ms=3,
            label=f"{variant} (n={d['n']})",
        )
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
    hacking = [_hacking_figure(plt, cells, out_dir, name, axes)] if curves(cells, "hacking/proxy") else []
    return [
        _pass_at_1_figure(plt, cells, out_dir, name, axes, n_seeds),
        _lengths_figure(plt, cells, out_dir, name, axes),
        *hacking,  # runs with a reward model and a verifier (docs/tasks.md, the reward-hacking probe)
    ]


def _hacking_figure(plt, cells, out_dir: Path, name: str, axes: str) -> Path:
    """hacking.png: the reward model's score (its change since step 0), the verified accuracy, and the trend
    of their gap: proxy up while verified down is reward hacking."""
    fig, axs = plt.subplots(1, 3, figsize=(14, 4.2))
    panels = (
        ("hacking/proxy", True, "reward model score minus step 0's", "proxy: the reward model's mean score"),
        ("hacking/verified", False, "verified accuracy (fraction correct)", "verified: the verifier's accuracy"),
        ("hacking/gap_trend", False, "slope of z(proxy) - z(verified) per step", "gap trend (> 0: proxy pulls away)"),
    )
    for ax, (key, relative, ylabel, title) in zip(axs, panels):
        _plot(ax, curves(cells, key, relative=relative))
        if relative or key == "hacking/gap_trend":
            ax.axhline(0, color="k", lw=0.8)
        ax.set_xlabel("training step (policy iterations)")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    axs[2].legend(fontsize=7)
    fig.suptitle(f"{name}: reward model vs verifier by {axes} (mean over seeds, 95% t-interval)", fontsize=11)
    fig.tight_layout()
    path = out_dir / "hacking.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _pass_at_1_figure(plt, cells, out_dir: Path, name: str, axes: str, n_seeds) -> Path:
    """eval_pass_at_1.png: held-out pass@1 per step, and its change since step 0 (paired per seed)."""
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
    fig.suptitle(
        f"{name}: held-out pass@1 vs training step by {axes}; mean over {n_seeds} seed(s), shaded = 95% t-interval",
        fontsize=11,
    )
    fig.tight_layout()
    path = out_dir / "eval_pass_at_1.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _lengths_figure(plt, cells, out_dir: Path, name: str, axes: str) -> Path:
    """lengths.png: response length of correct and incorrect train rollouts, and train accuracy."""
    fig, axs = plt.subplots(1, 3, figsize=(14, 4.2))
    for ax, key, title in (
        (axs[0], "length/correct", "correct responses"),
        (axs[1], "length/incorrect", "incorrect responses"),
    ):
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
    fig.suptitle(
        f"{name}: response length of correct vs incorrect rollouts by {axes} (mean over seeds, 95% t-interval)",
        fontsize=11,
    )
    fig.tight_layout()
    path = out_dir / "lengths.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
