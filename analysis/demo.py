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
# # Demo: GRPO learns, and the difficulty-bias mechanism in miniature
#
# **1. Does RL work here?** One GRPO run of the smoke regime (a 1000-step SFT warm start of the
# tiny model on arithmetic, sampled at T = 1.4; 96 prompts x 8 samples a step, 4 mini-batches,
# 20 steps). Its held-out pass@1 is measured on 512 prompts x 8 samples at step 0 and at the
# end, with the same prompts and sampling seed, so the rise is paired; its 95% interval is a
# bootstrap over prompts. What the rise is: RL removes the hot sampler's wrong tails
# (sharpening), not new arithmetic.
#
# **2. A comparison in miniature: GRPO's difficulty bias** (Dr.GRPO, arXiv 2503.20783 §3).
# Dividing a group's advantages by its std gives a prompt with p = k/G correct a total
# advantage mass 2G·sqrt(p(1-p)) instead of 2G·p(1-p): prompts solved nearly always or nearly
# never weigh relatively more. The probe takes the warm start and a few training batches of
# G = 16, makes ONE update per advantage scale (group_std as GRPO, none as Dr.GRPO, batch_std
# as Lite PPO) from the same policy and batch, and measures the share of the update's gradient
# norm that comes from the extreme groups (p < 0.2 or p > 0.8), paired by batch, and the
# change of held-out pass@1 per difficulty bucket (same sampling seed for every arm). The full
# study, with training runs and 3 seeds per arm: `experiments/difficulty_bias.yaml`, report in
# `analysis/reports/difficulty_bias.md`.

# %%
import matplotlib.pyplot as plt

from harness.experiment import figures as F

F.setup()
data = F.StudyData.from_env("demo")
ARMS = data.by("objective.preset")
PROBE = F.load_probe(data)
print(f"study {data.name} ({data.scale}): {len(data.cells)} cells, arms {list(ARMS)}")

# %% [markdown]
# ## 1. GRPO learns: held-out pass@1 and training accuracy
# Left: the paired rise (end − step 0) with its bootstrap 95% interval over prompts, on an axis
# fitted to it and 0. Middle: the two evals themselves, as points (two evals
# are two measurements, not a curve). Right: the training rollouts' accuracy at every step.

# %%
fig, axs = plt.subplots(1, 3, figsize=(16, 4.6), layout="constrained")
F.rise_panel(axs[0], data, ARMS)
F.panel(
    axs[1],
    data,
    ARMS,
    "eval/pass_at_1",
    "held-out pass@1 (512 prompts x 8 samples)",
    "held-out pass@1 at each eval (same prompts and seed)",
    fraction=True,
)
F.panel(
    axs[2],
    data,
    ARMS,
    "reward/accuracy",
    "train accuracy (fraction of rollouts correct)",
    "training rollouts (96 prompts x 8 a step)",
    fraction=True,
)
F.legend(list(axs[1:]), loc="lower right")
F.suptitle(
    fig,
    data,
    f"GRPO on arithmetic (tiny model): held-out pass@1 at step 0 vs the end, {F.seeds_label(data.n_seeds)}",
)
F.save(fig, data, "learning")

# %% [markdown]
# ## 2. The difficulty-bias probe

# %%
if PROBE:
    F.save(F.difficulty_probe_figure(data, PROBE), data, "difficulty_probe")

# %%
lines = [f"# {data.name} ({data.scale}): GRPO learns; the difficulty-bias probe", "", "## GRPO learns", ""]
for arm, cells in ARMS.items():
    lines += F.rise_lines(data, arm, cells)
if PROBE:
    lines += ["", *F.difficulty_probe_lines(PROBE)]
else:
    lines += ["", "No probe.json: the difficulty-bias probe did not run."]
if data.scale == "smoke":
    lines += ["", "Smoke scale: 2 steps check the wiring only; no effect can be read from it."]
F.write_summary(data, "\n".join(lines))
