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
# # (k) The compute curves over 100 steps: grpo and cispo
#
# **Question** (ScaleRL, Khatri et al., arXiv 2510.13786): does the loss (CISPO against PPO's clip) move the
# asymptote A of R(C) = R0 + (A − R0) / (1 + (C_mid / C)^B)? The 20-step study (j) could not say: its curves
# did not bend. **Design** (experiments/scaling_long.yaml): grpo and cispo, (j)'s cpu regime for 100 steps,
# evals at steps 0, 1, 2, 3, 5, 8, 13, 22, 36, 60, 100; the fit is `harness fit` (fit.csv, fit.png).
# **Prediction** (the file's header, before any cell ran): a bend shows as the 60 → 100 rise falling below
# ~0.015 (0.74 of a doubling of compute at the ~0.02 a doubling seen before step 30).
#
# **Reading the figures.** x = cumulative generated tokens of training (log scale), y = held-out pass@1 (a
# fraction of 256 prompts x 4 samples, the same prompts and sampling seed at every eval); each seed is a line.
# The mechanism figure: what each loss does with the tokens whose ratio left the clip range, per step.

# %%
import matplotlib.pyplot as plt
import numpy as np

from harness.experiment import figures as F
from harness.experiment.fit.data import pass_at_1_curves
from harness.experiment.fit.study_fit import refusal, rise_and_se

F.setup()
data = F.StudyData.from_env("scaling_long")
ARMS = data.by("arm")

CURVES = pass_at_1_curves(data)  # cell id -> its pass@1 against generated tokens (the fitter's reading)
print(
    f"study {data.name} ({data.scale}): {len(data.cells)} cells, {sum(v is not None for v in CURVES.values())} with evals"
)

# %%
fig, axes = plt.subplots(1, 2, figsize=(13, 4.6), sharey=True)
for arm, cells in ARMS.items():
    label = arm
    for cell in cells:
        c = CURVES[cell["id"]]
        if c is None:
            continue
        x = np.maximum(c.compute, c.compute[c.compute > 0].min() / 2)  # step 0 drawn at half the first eval's C
        axes[0].plot(x, c.y, "-o", ms=3, lw=1, color=data.color(arm), alpha=0.85, label=label)
        axes[1].plot(c.steps, c.y, "-o", ms=3, lw=1, color=data.color(arm), alpha=0.85, label=label)
        label = None
axes[0].set_xscale("log")
axes[0].set_xlabel("generated tokens of training, cumulative (log scale)")
axes[1].set_xlabel("training step (policy iterations of 64 prompts x 8)")
axes[0].set_ylabel("held-out pass@1 (fraction, T = 1.4)")
for ax in axes:
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
fig.suptitle(
    f"{data.name} ({data.scale}): held-out pass@1 of grpo and cispo over 100 steps, one line per seed "
    "(step 0 drawn at half the first eval's x)",
    y=1.02,
)
F.save(fig, data, "curves")

# %%
MECH = (  # (key, y label, y scale): the share and the KL estimate take 0 and below, so linear
    ("clip/frac", "share of response tokens clipped", "linear"),
    ("ratio/max", "largest pi / pi_old in the step (log)", "log"),
    ("kl/old", "mean log pi_old - log pi (nats/token)", "linear"),
)
fig, axes = plt.subplots(1, len(MECH), figsize=(16, 4))
for ax, (key, ylabel, yscale) in zip(axes, MECH):
    for arm, cells in ARMS.items():
        label = arm
        for cell in cells:
            rows = [r for r in data.metrics(cell) if key in r and "reward/mean" in r]
            ax.plot([r["step"] for r in rows], [r[key] for r in rows], lw=0.8, color=data.color(arm), alpha=0.8,
                    label=label)  # fmt: skip
            label = None
    ax.set_yscale(yscale)
    ax.set_xlabel("training step")
    ax.set_ylabel(ylabel)
    ax.set_title(key, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
fig.suptitle(
    f"{data.name} ({data.scale}): what each loss does with out-of-range ratios, per step, one line per seed", y=1.02
)
fig.tight_layout()
F.save(fig, data, "mechanism")

# %% [markdown]
# ## Summary: per run, the prediction's test (the 60 → 100 rise) and the fitter's rule

# %%


def at(c, step):
    hit = [y for s, y in zip(c.steps, c.y) if s == step]
    return hit[0] if hit else float("nan")


def mean_of(cell, key):
    v = [r[key] for r in data.metrics(cell) if key in r and "reward/mean" in r]
    return float(np.mean(v)) if v else float("nan")


rows = []
for arm, cells in ARMS.items():
    for cell in cells:
        c = CURVES[cell["id"]]
        if c is None:
            rows.append([arm, str(cell.get("seed")), "not run", "", "", "", "", ""])
            continue
        rise, se = rise_and_se(c)
        rows.append(
            [
                arm,
                str(cell.get("seed")),
                " / ".join(f"{at(c, s):.3f}" for s in (0, 22, 60, 100)),
                f"{at(c, 36) - at(c, 22):+.3f}",
                f"{at(c, 100) - at(c, 60):+.3f}",
                f"{rise:+.4f} +- {se:.4f}",
                f"{mean_of(cell, 'clip/frac'):.4f} / {mean_of(cell, 'ratio/max'):.1f} / {mean_of(cell, 'kl/old'):.4f}",
                refusal(c) or "fit",
            ]
        )
header = [
    "arm",
    "seed",
    "pass@1 at steps 0 / 22 / 60 / 100",
    "rise 22 -> 36",
    "rise 60 -> 100",
    "later evals - first (1 se)",
    "clip/frac / ratio/max / kl/old (run means)",
    "fitter's rule",
]
F.write_summary(data, "# scaling_long: per run\n\n" + F.markdown_table(header, rows))
