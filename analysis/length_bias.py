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
# # (a) Length bias of GRPO's 1/|o_i| — response length of correct and incorrect answers
#
# **What the paper showed** (Dr.GRPO, Liu et al., arXiv 2503.20783, Fig. 6; SCIENCE.md (a)).
# GRPO divides each response's token losses by its own length |o_i|. A wrong answer's
# tokens are then penalised less the longer it is, and a right answer's tokens are rewarded
# more the shorter it is. In the paper (Qwen2.5-1.5B, G = 8, lr 1e-6, beta = 0,
# temperature 1, up to 3000 tokens) the length of INCORRECT responses kept growing under
# GRPO, while Dr.GRPO (a constant normaliser, the generation budget, and no std division)
# kept it lower at similar reward. DAPO's token-mean (one normaliser for the whole batch)
# removes the per-response 1/|o_i| too.
#
# **Arms** (`objective.preset`): `grpo` (seq_mean_token_mean + group std), `dr_grpo`
# (sum / max_new_tokens, no std), `dapo` (token_mean, clip-higher, dynamic sampling,
# overlong shaping). All with beta = 0.
#
# **Regime at tiny scale.** If correctness does not depend on length, no aggregator drifts
# length in expectation. The effect needs long failure modes and a high failure rate: the
# study uses countdown, whose failures are long search traces that run to truncation
# (truncated = reward 0). So expect a GAP in the length of incorrect responses between
# grpo and dr_grpo, not runaway growth. The smoke scale (2 steps, 1 seed) only checks the
# wiring; the cpu scale (60 steps, 3 seeds) is the smallest run that can show a gap.
#
# **Reading the figures.** Lengths are in tokens (the tiny models' tokens are characters).
# Accuracy sits beside the lengths so that lengths are compared at matched accuracy. Every
# seed of every arm is used; a line is the mean over seeds with a shaded 95% t-interval
# (one seed: the line alone, "n=1 seed"). The summary at the end reports the incorrect-length
# gap with its interval and says whether it appears; a gap that does not appear is reported
# as not appearing.

# %%
import matplotlib.pyplot as plt

from harness import figures as F

F.setup()
data = F.StudyData.from_env("length_bias")
ARMS = data.by("objective.preset")  # preset -> cells (its seeds)
print(f"study {data.name} ({data.scale}): {len(data.cells)} cells, arms {list(ARMS)}, {F.seeds_label(data.n_seeds)}")

# %% [markdown]
# ## Training rollouts: length of correct and incorrect responses, accuracy beside them

# %%
fig, axs = plt.subplots(1, 3, figsize=(15, 4.3), layout="constrained")
F.panel(axs[0], data, ARMS, "length/correct", "mean length of correct responses (tokens)",
        "train rollouts: CORRECT responses", empty="no correct training rollout at any logged step")
F.panel(axs[1], data, ARMS, "length/incorrect", "mean length of incorrect responses (tokens)",
        "train rollouts: INCORRECT responses", empty="no incorrect training rollout at any logged step")
F.panel(axs[2], data, ARMS, "reward/accuracy", "train accuracy (fraction of rollouts correct)",
        "train accuracy (compare lengths at matched accuracy)", fraction=True)
F.legend(list(axs))
fig.suptitle(data.title("response length by correctness on the training rollouts, grpo vs dr_grpo vs dapo"))
F.save(fig, data, "lengths_train")

# %% [markdown]
# ## Held-out eval: the same, on the eval prompts (every `eval.every` steps)

# %%
fig, axs = plt.subplots(1, 3, figsize=(15, 4.3), layout="constrained")
F.panel(axs[0], data, ARMS, "eval/length/correct", "mean length of correct responses (tokens)",
        "held-out eval: CORRECT responses", empty="no correct eval response at any eval step")
F.panel(axs[1], data, ARMS, "eval/length/incorrect", "mean length of incorrect responses (tokens)",
        "held-out eval: INCORRECT responses", empty="no incorrect eval response at any eval step")
F.panel(axs[2], data, ARMS, "eval/pass_at_1", "held-out pass@1 (fraction of prompts, unbiased)",
        "held-out pass@1 (compare lengths at matched accuracy)", fraction=True)
F.legend(list(axs))
fig.suptitle(data.title("response length by correctness on held-out prompts, grpo vs dr_grpo vs dapo"))
F.save(fig, data, "lengths_eval")

# %% [markdown]
# ## Truncation rate and entropy
# Truncated responses hit `rollout.max_new_tokens` without an end token and score 0: the
# long failure mode the effect feeds on. Entropy is the policy's mean per-token entropy on the
# training rollouts, measured during the update.

# %%
fig, axs = plt.subplots(1, 3, figsize=(15, 4.3), layout="constrained")
F.panel(axs[0], data, ARMS, "length/truncated_frac", "fraction of rollouts truncated",
        "train rollouts: truncation rate", fraction=True)
F.panel(axs[1], data, ARMS, "eval/length/truncated_frac", "fraction of responses truncated",
        "held-out eval: truncation rate", fraction=True)
F.panel(axs[2], data, ARMS, "entropy", "policy entropy (nats per token)", "policy entropy on the rollout tokens")
F.legend(list(axs))
fig.suptitle(data.title("truncation rate and entropy, grpo vs dr_grpo vs dapo"))
F.save(fig, data, "truncation_entropy")

# %% [markdown]
# ## The gap: incorrect-response length of grpo minus the other arms, paired by seed
# Cells with the same seed share the warm start, the training prompts of step 0 and the eval
# set, so the per-seed difference removes those offsets (the held-out gap starts at 0). The
# paper's effect is a positive gap (grpo's incorrect answers longer than dr_grpo's). DAPO's
# dynamic sampling drops all-equal groups and samples more prompts, so its TRAINING rollouts
# differ from the others' already at step 0.

# %%
BASE = "grpo"
others = [a for a in ARMS if a != BASE]
fig, axs = plt.subplots(1, 2, figsize=(12, 4.3), layout="constrained")
drawn = False
for ax, key, where in ((axs[0], "length/incorrect", "train rollouts"),
                       (axs[1], "eval/length/incorrect", "held-out eval")):
    for arm in others if BASE in ARMS else []:
        cur = F.paired_difference(data, ARMS[BASE], ARMS[arm], key)
        F.plot_curve(ax, cur, f"{BASE} − {arm}", data.color(arm), marker=data.marker(arm))
        drawn |= bool(cur)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlabel(F.X_STEP)
    ax.set_ylabel("difference in mean incorrect length (tokens)")
    ax.set_title(f"{where}: incorrect-response length, {BASE} minus each arm (same seed)")
    F.integer_steps(ax)
if drawn:
    F.legend(list(axs))
else:
    F.note(axs[0], f"needs arm '{BASE}' and another arm with a common seed")
fig.suptitle(data.title(f"length gap of INCORRECT responses, {BASE} minus the others (paired by seed)"))
F.save(fig, data, "incorrect_length_gap")

# %% [markdown]
# ## Numbers: per arm, with 95% t-intervals over seeds
# Train metrics: each seed's mean over the last quarter of its steps. Eval: the final
# checkpoint's held-out eval (`eval.json`, more samples than the in-loop eval).

# %%
rows = []
for arm, cells in ARMS.items():
    rows.append([arm,
                 F.tail_mean(data, cells, "length/correct").fmt(),
                 F.tail_mean(data, cells, "length/incorrect").fmt(),
                 F.tail_mean(data, cells, "reward/accuracy").fmt(),
                 F.tail_mean(data, cells, "length/truncated_frac").fmt(),
                 F.tail_mean(data, cells, "entropy").fmt(),
                 F.tail_mean(data, cells, "groups/zero_var_frac", frac=1.0).fmt(),
                 F.eval_json_value(data, cells, "eval/pass_at_1").fmt(),
                 F.eval_json_value(data, cells, "eval/length/correct").fmt(),
                 F.eval_json_value(data, cells, "eval/length/incorrect").fmt()])
table = F.markdown_table(
    ["arm", "train len correct (tok)", "train len incorrect (tok)", "train accuracy", "truncated frac", "entropy (nats)",
     "zero-var groups (all steps)", "final eval pass@1", "final eval len correct", "final eval len incorrect"], rows)

lines = [f"# {data.name} ({data.scale}): length of correct vs incorrect responses", "",
         f"{len(data.cells)} cells; {F.seeds_label(data.n_seeds)} per arm. Train columns: mean over the last quarter "
         "of each seed's steps; eval columns: the final checkpoint (eval.json); ± = 95% t-interval half-width.", "",
         table, "", "Incorrect-response length gap (the paper's effect is grpo > dr_grpo):", ""]
if BASE in ARMS:
    for arm in others:
        gap_train = F.tail_of(F.paired_series(data, ARMS[BASE], ARMS[arm], "length/incorrect"))
        lines.append("- " + F.verdict(gap_train, f"train, last quarter, {BASE} − {arm}", "tokens"))
        gap_eval = F.final([s[max(s)] for s in F.paired_series(data, ARMS[BASE], ARMS[arm], "eval/length/incorrect")])
        lines.append("- " + F.verdict(gap_eval, f"held-out eval at the last step, {BASE} − {arm}", "tokens"))
    acc = F.tail_of(F.paired_series(data, ARMS[BASE], ARMS["dr_grpo"], "reward/accuracy")) if "dr_grpo" in ARMS else None
    if acc is not None:
        lines.append("- " + F.verdict(acc, f"train accuracy, last quarter, {BASE} − dr_grpo (matched accuracy?)"))
else:
    lines.append(f"- arm '{BASE}' is not in this study: no gap computed.")
lines += F.no_signal_lines(data, ARMS)
if data.scale == "smoke":
    lines += ["", "Smoke scale: 2 steps and 1 seed check the wiring only; no effect can be read from it."]
F.write_summary(data, "\n".join(lines))
