# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     name: python3
# ---

# %% [markdown]
# # (j) Compute curves of four losses, and off-policy staleness
#
# **What the paper showed** (ScaleRL, Khatri et al., arXiv 2510.13786). Each ablation read from a
# fitted curve R(C) = R0 + (A − R0) / (1 + (C_mid / C)^B) of held-out pass rate against training compute:
# the loss (CISPO vs DAPO-style clipping) moves the asymptote A; aggregation, normalisation and the
# off-policy scheme mainly move the efficiency B.
#
# **Design** (experiments/scaling.yaml). grpo, dapo, cispo and scalerl at staleness 0, grpo and cispo at
# staleness 2 and 4, 3 seeds each, on the smoke regime; held-out pass@1 at step 0 and 8 steps evenly spaced in
# log compute. The fit itself is `harness fit` (fit.csv, fit_compare.csv, fit.png beside summary.csv).
#
# **Reading the figures.** x = cumulative generated tokens of training (log scale), y = held-out pass@1 (a
# fraction of 256 prompts x 4 samples, the same prompts and sampling seed at every eval); each seed is a line.
# The mechanism figure shows what the staleness does to the update: the share of tokens the clip acts on.

# %%
import matplotlib.pyplot as plt
import numpy as np

from harness.experiment import figures as F
from harness.experiment.fit.data import pass_at_1_curves
from harness.experiment.fit.study_fit import refusal, rise_and_se

F.setup()
data = F.StudyData.from_env("scaling")
ARMS = data.by("arm")
PANELS = {
    "the four losses (staleness 0)": ["grpo", "dapo", "cispo", "scalerl"],
    "grpo at staleness 0, 2, 4": ["grpo", "grpo_stale2", "grpo_stale4"],
    "cispo at staleness 0, 2, 4": ["cispo", "cispo_stale2", "cispo_stale4"],
}

CURVES = pass_at_1_curves(data)  # cell id -> its pass@1 against generated tokens (the fitter's reading)
print(
    f"study {data.name} ({data.scale}): {len(data.cells)} cells, {sum(v is not None for v in CURVES.values())} with evals"
)

# %%
fig, axes = plt.subplots(1, 3, figsize=(16, 4.6), sharex=True, sharey=True)
for ax, (title, arms) in zip(axes, PANELS.items()):
    for arm in arms:
        color, label = data.color(arm), arm
        for cell in ARMS.get(arm, []):
            c = CURVES[cell["id"]]
            if c is None:
                continue
            x = np.maximum(c.compute, c.compute[c.compute > 0].min() / 2)  # step 0 drawn at half the first eval's C
            ax.plot(x, c.y, "-o", ms=3, lw=1, color=color, alpha=0.85, label=label)
            label = None
    ax.set_xscale("log")
    ax.set_title(title)
    ax.set_xlabel("generated tokens of training, cumulative (log)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
axes[0].set_ylabel("held-out pass@1 (fraction, T = 1.4)")
fig.suptitle(
    "scaling (cpu): held-out pass@1 against training compute, one line per seed (step 0 drawn at half the first eval's x)",
    y=1.02,
)
F.save(fig, data, "curves")

# %%
MECH = ("clip/frac", "ratio/max", "mismatch/k3_kl")


def mean_of(cell, key):
    v = [r[key] for r in data.metrics(cell) if key in r and "reward/mean" in r]
    return float(np.mean(v)) if v else float("nan")


fig, axes = plt.subplots(1, len(MECH), figsize=(15, 4))
for ax, key in zip(axes, MECH):
    for j, base in enumerate(("grpo", "cispo")):
        label = base
        for k, arm in enumerate((base, f"{base}_stale2", f"{base}_stale4")):
            vals = [mean_of(c, key) for c in ARMS.get(arm, []) if CURVES[c["id"]] is not None]
            if vals:
                ax.plot([k + 0.2 * (j - 0.5)] * len(vals), vals, "o", color=data.color(base), label=label)
                label = None
    ax.set_xticks([0, 1, 2], ["staleness 0", "2", "4"])
    ax.set_title(f"{key}, mean over the run's steps (one dot a seed)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
axes[0].set_ylabel("share of response tokens")
axes[1].set_ylabel("largest ratio pi / pi_old in a step")
axes[2].set_ylabel("k3 KL, sampler vs policy (nats per token)")
F.save(fig, data, "mechanism")

# %% [markdown]
# ## Summary: per run, the rise the fitter's rule reads, and its verdict

# %%
rows = []
for arm, cells in ARMS.items():
    for cell in cells:
        c = CURVES[cell["id"]]
        if c is None:
            rows.append([arm, str(cell.get("seed")), "not run", "", "", ""])
            continue
        rise, se = rise_and_se(c) if len(c.y) > 2 else (float("nan"), float("nan"))
        why = refusal(c)
        rows.append(
            [
                arm,
                str(cell.get("seed")),
                f"{c.y[0]:.3f} -> {c.y[-1]:.3f} (step {c.steps[-1]})",
                f"{rise:+.4f} +- {se:.4f}",
                f"{mean_of(cell, 'clip/frac'):.4f}",
                why or "fit",
            ]
        )
header = ["arm", "seed", "pass@1, first -> last eval (its step)", "later half - first (1 se)", "clip/frac", "fitter"]
F.write_summary(data, "# scaling: per run\n\n" + F.markdown_table(header, rows))
