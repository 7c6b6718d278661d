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
# # Demo: GRPO learns, and the length-bias mechanism in miniature
#
# **1. Does RL work here?** One GRPO run of the smoke regime (a 1000-step SFT warm start of the
# tiny model on arithmetic, sampled at T = 1.4; 96 prompts x 8 samples a step, 4 mini-batches,
# 20 steps). Its held-out pass@1 is measured on 512 prompts x 8 samples at step 0 and at the
# end, with the same prompts and sampling seed, so the rise is paired; its 95% interval is a
# bootstrap over prompts. What the rise is: RL removes the hot sampler's wrong tails
# (sharpening), not new arithmetic.
#
# **2. A comparison in miniature: GRPO's length bias** (Dr.GRPO, arXiv 2503.20783). GRPO's
# `seq_mean_token_mean` weights each token of response i by 1/|o_i|, so a long wrong answer's
# tokens (its end token included) are pushed down less. The probe takes the warm start and a
# few training batches, makes ONE update per aggregation (grpo; grpo with `token_mean`; dr_grpo)
# from the same policy and batch, and samples held-out prompts with the same seed for each:
# the change of the length of right and wrong answers, paired. The full study, with training
# runs and 3 seeds per arm: `experiments/length_bias.yaml`, report in
# `analysis/reports/length_bias.md`.

# %%
import matplotlib.pyplot as plt

from harness import figures as F

F.setup()
data = F.StudyData.from_env("demo")
ARMS = data.by("objective.preset")
PROBE = F.load_probe(data)
print(f"study {data.name} ({data.scale}): {len(data.cells)} cells, arms {list(ARMS)}")

# %% [markdown]
# ## 1. GRPO learns: held-out pass@1 and training accuracy

# %%
fig, axs = plt.subplots(1, 3, figsize=(16, 4.3), layout="constrained")
F.rise_panel(axs[0], data, ARMS)
F.panel(axs[1], data, ARMS, "eval/pass_at_1", "held-out pass@1 (512 prompts x 8 samples)",
        "held-out pass@1, same prompts and seed at every eval", fraction=True)
F.panel(axs[2], data, ARMS, "reward/accuracy", "train accuracy (fraction of rollouts correct)",
        "training rollouts (96 prompts x 8 a step)", fraction=True)
F.legend(list(axs[1:]))
fig.suptitle(data.title("GRPO on arithmetic (tiny model, 2 CPU cores): does held-out pass@1 rise?"))
F.save(fig, data, "learning")

# %% [markdown]
# ## 2. The length-bias probe

# %%
if PROBE:
    F.save(F.length_probe_figure(data, PROBE), data, "length_probe")

# %%
lines = [f"# {data.name} ({data.scale}): GRPO learns; the length-bias probe", "", "## GRPO learns", ""]
for arm, cells in ARMS.items():
    lines += F.rise_lines(data, arm, cells)
if PROBE:
    lines += ["", *F.length_probe_lines(PROBE)]
else:
    lines += ["", "No probe.json: the length-bias probe did not run."]
if data.scale == "smoke":
    lines += ["", "Smoke scale: 2 steps check the wiring only; no effect can be read from it."]
F.write_summary(data, "\n".join(lines))
