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
# **What the paper showed** (Dr.GRPO, Liu et al., arXiv 2503.20783, Fig. 6). GRPO divides
# each response's token losses by its own length |o_i|. A wrong answer's tokens (its end token
# included) are then pushed down less the longer it is, and a right answer's tokens are pushed
# up more the shorter it is. In the paper the length of INCORRECT responses kept growing under
# GRPO, while Dr.GRPO (a constant normaliser and no std division) kept it lower.
#
# **Arms** (`arm`): `grpo` (seq_mean_token_mean, group std), `grpo_token_mean` (token_mean,
# group std: the 1/|o_i| alone removed), `dr_grpo` (sum / max_new_tokens, no std). DAPO is left
# out on purpose: under Adam its token_mean and Dr.GRPO's sum / C differ only by a global
# scale per mini-batch, which Adam divides out.
#
# **What the mechanism needs, and the regime** (experiments/length_bias.yaml): mixed-reward
# groups (else A = 0), lengths that vary within a group, and a policy that controls its
# stopping. The smoke regime (1000-step arithmetic warm start sampled at T = 1.4, 96 prompts x
# 8, 4 mini-batches, lr 1e-4; beta = 0 here) has them; the "Regime" section checks it from the
# reference arm alone. The effect can only be a gap in the length of wrong answers, not runaway
# growth: arithmetic's right answers have a fixed length per problem.
#
# **Two measurements.** (1) The probe (`harness probe length_bias`, probe.json): from the same
# policy and the same batches, one update under each arm, then the length of right and wrong
# answers on held-out prompts with the same sampling seed: the mechanism, with power.
# (2) Training: 30 steps x 3 seeds per arm, lengths over steps; paired by seed.
#
# **Reading the figures.** Lengths are in tokens (characters for the tiny models). With 3
# seeds each seed is a thin line and the mean a bold one. Probe points are means over batches
# with 95% t-intervals.

# %%
import matplotlib.pyplot as plt

from harness.experiment import figures as F

F.setup()
data = F.StudyData.from_env("length_bias")
ARMS = data.by("arm") if "arm" in data.study.get("axes", []) else data.by("objective.preset")  # arm -> its seeds
BASE = "grpo"
PROBE = F.load_probe(data)
print(f"study {data.name} ({data.scale}): {len(data.cells)} cells, arms {list(ARMS)}, {F.seeds_label(data.n_seeds)}")

# %% [markdown]
# ## Regime: does the reference arm have what the mechanism needs?
# Checked on `grpo` alone, before the arms are compared: the share of training groups with
# mixed rewards (1 - zero-variance share), the spread of response lengths within a group, the
# truncation rate, and whether the arm learns (paired rise of held-out pass@1).

# %%
regime = []
if BASE in ARMS:
    ref = ARMS[BASE]
    mixed = F.tail_of([{k: 1 - v for k, v in s.items()} for s in F.seed_series(data, ref, "groups/zero_var_frac")], 1.0)
    regime += [
        f"- mixed-reward groups (share of training groups, all steps): {mixed.fmt()}",
        f"- within-group spread of response length (population std, tokens, all steps): "
        f"{F.tail_mean(data, ref, 'length/group_std_mean', 1.0).fmt()}",
        f"- train length of correct / incorrect answers (tokens, all steps): "
        f"{F.tail_mean(data, ref, 'length/correct', 1.0).fmt()} / {F.tail_mean(data, ref, 'length/incorrect', 1.0).fmt()}",
        f"- truncated rollouts (share, all steps): {F.tail_mean(data, ref, 'length/truncated_frac', 1.0).fmt()}",
        f"- end-token share of the gradient weight on wrong / right answers (all steps): "
        f"{F.tail_mean(data, ref, 'agg/eos_share_incorrect', 1.0).fmt()} / "
        f"{F.tail_mean(data, ref, 'agg/eos_share_correct', 1.0).fmt()}",
    ]
    regime += F.rise_lines(data, BASE, ref)
print("\n".join(regime))

# %%
fig, axs = plt.subplots(1, 2, figsize=(12, 4.3), layout="constrained")
F.rise_panel(axs[0], data, ARMS)
F.panel(
    axs[1],
    data,
    ARMS,
    "groups/zero_var_frac",
    "share of training groups with all-equal rewards",
    "groups with no signal (all right or all wrong)",
    fraction=True,
)
F.legend(list(axs))
F.suptitle(fig, data, "regime: every arm learns, and most groups carry a signal")
F.save(fig, data, "regime")

# %% [markdown]
# ## The probe: one update per arm from the same policy and batches
# Left: the change of the mean length of WRONG answers on held-out prompts after one update,
# relative to the policy before it (same prompts, same sampling seed). Middle: the same for RIGHT
# answers. Right: where each aggregation puts the gradient weight of the end token (share of
# the update's total weight on the end tokens of wrong / right answers, at the same batch).

# %%
if PROBE:
    F.save(F.length_probe_figure(data, PROBE), data, "probe")

# %% [markdown]
# ## Training rollouts: length of correct and incorrect responses, accuracy beside them

# %%
fig, axs = plt.subplots(1, 3, figsize=(15, 4.3), layout="constrained")
F.panel(
    axs[0],
    data,
    ARMS,
    "length/correct",
    "mean length of correct responses (tokens)",
    "train rollouts: CORRECT responses",
    empty="no correct training rollout at any logged step",
)
F.panel(
    axs[1],
    data,
    ARMS,
    "length/incorrect",
    "mean length of incorrect responses (tokens)",
    "train rollouts: INCORRECT responses",
    empty="no incorrect training rollout at any logged step",
)
F.panel(
    axs[2],
    data,
    ARMS,
    "reward/accuracy",
    "train accuracy (fraction of rollouts correct)",
    "train accuracy (compare lengths at matched accuracy)",
    fraction=True,
)
F.legend(list(axs))
F.suptitle(fig, data, "response length by correctness on the training rollouts, per aggregation")
F.save(fig, data, "lengths_train")

# %% [markdown]
# ## Held-out eval: the same, on the eval prompts (every `eval.every` steps)

# %%
fig, axs = plt.subplots(1, 3, figsize=(15, 4.3), layout="constrained")
F.panel(
    axs[0],
    data,
    ARMS,
    "eval/length/correct",
    "mean length of correct responses (tokens)",
    "held-out eval: CORRECT responses",
    empty="no correct eval response at any eval step",
)
F.panel(
    axs[1],
    data,
    ARMS,
    "eval/length/incorrect",
    "mean length of incorrect responses (tokens)",
    "held-out eval: INCORRECT responses",
    empty="no incorrect eval response at any eval step",
)
F.panel(
    axs[2],
    data,
    ARMS,
    "eval/pass_at_1",
    "held-out pass@1 (fraction of prompts, unbiased)",
    "held-out pass@1 (compare lengths at matched accuracy)",
    fraction=True,
)
F.legend(list(axs))
F.suptitle(fig, data, "response length by correctness on held-out prompts, per aggregation")
F.save(fig, data, "lengths_eval")

# %% [markdown]
# ## Truncation rate and entropy
# Truncated responses hit `rollout.max_new_tokens` without an end token and score 0: the
# long failure mode the effect feeds on. Entropy is the policy's mean per-token entropy on the
# training rollouts, measured during the update.

# %%
fig, axs = plt.subplots(1, 3, figsize=(15, 4.3), layout="constrained")
F.panel(
    axs[0],
    data,
    ARMS,
    "length/truncated_frac",
    "fraction of rollouts truncated",
    "train rollouts: truncation rate",
    fraction=True,
)
F.panel(
    axs[1],
    data,
    ARMS,
    "eval/length/truncated_frac",
    "fraction of responses truncated",
    "held-out eval: truncation rate",
    fraction=True,
)
F.panel(axs[2], data, ARMS, "entropy", "policy entropy (nats per token)", "policy entropy on the rollout tokens")
F.legend(list(axs))
F.suptitle(fig, data, "truncation rate and entropy, per aggregation")
F.save(fig, data, "truncation_entropy")

# %% [markdown]
# ## The gap: incorrect-response length of grpo minus the other arms, paired by seed
# Cells with the same seed share the warm start, the training prompts of step 0 and the eval
# set, so the per-seed difference removes those offsets (the held-out gap starts at 0). The
# paper's effect is a positive gap (grpo's incorrect answers longer than the others').

# %%
others = [a for a in ARMS if a != BASE]
fig, axs = plt.subplots(1, 2, figsize=(12, 4.3), layout="constrained")
drawn = False
for ax, key, where in (
    (axs[0], "length/incorrect", "train rollouts"),
    (axs[1], "eval/length/incorrect", "held-out eval"),
):
    for arm in others if BASE in ARMS else []:
        cur = F.paired_difference(data, ARMS[BASE], ARMS[arm], key)
        F.plot_curve(ax, cur, f"{BASE} − {arm}", data.color(arm), marker=data.marker(arm))  # seeds thin, mean bold
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
F.suptitle(fig, data, f"length gap of INCORRECT responses, {BASE} minus the others (paired by seed)")
F.save(fig, data, "incorrect_length_gap")

# %% [markdown]
# ## Numbers: per arm, with 95% t-intervals over seeds
# Train metrics: each seed's mean over the last quarter of its steps. Eval: the final
# checkpoint's held-out eval (`eval.json`, more samples than the in-loop eval).

# %%
rows = []
for arm, cells in ARMS.items():
    rows.append(
        [
            arm,
            F.tail_mean(data, cells, "length/correct").fmt(),
            F.tail_mean(data, cells, "length/incorrect").fmt(),
            F.tail_mean(data, cells, "reward/accuracy").fmt(),
            F.tail_mean(data, cells, "length/truncated_frac").fmt(),
            F.tail_mean(data, cells, "entropy").fmt(),
            F.tail_mean(data, cells, "groups/zero_var_frac", frac=1.0).fmt(),
            F.eval_json_value(data, cells, "eval/pass_at_1").fmt(),
            F.eval_json_value(data, cells, "eval/length/correct").fmt(),
            F.eval_json_value(data, cells, "eval/length/incorrect").fmt(),
        ]
    )
table = F.markdown_table(
    [
        "arm",
        "train len correct (tok)",
        "train len incorrect (tok)",
        "train accuracy",
        "truncated frac",
        "entropy (nats)",
        "zero-var groups (all steps)",
        "final eval pass@1",
        "final eval len correct",
        "final eval len incorrect",
    ],
    rows,
)

lines = [
    f"# {data.name} ({data.scale}): length of correct vs incorrect responses",
    "",
    "## Regime (reference arm alone)",
    "",
    *regime,
    "",
    "## Training",
    "",
    f"{len(data.cells)} cells; {F.seeds_label(data.n_seeds)} per arm. Train columns: mean over the last quarter "
    "of each seed's steps; eval columns: the final checkpoint (eval.json); ± = 95% t-interval half-width.",
    "",
    table,
    "",
    "Incorrect-response length gap (the paper's effect is grpo > dr_grpo):",
    "",
]
if BASE in ARMS:
    for arm in others:
        gap_train = F.tail_of(F.paired_series(data, ARMS[BASE], ARMS[arm], "length/incorrect"))
        lines.append("- " + F.verdict(gap_train, f"train, last quarter, {BASE} − {arm}", "tokens"))
        gap_eval = F.last_of(F.paired_series(data, ARMS[BASE], ARMS[arm], "eval/length/incorrect"))
        lines.append("- " + F.verdict(gap_eval, f"held-out eval at the last step, {BASE} − {arm}", "tokens"))
        acc = F.tail_of(F.paired_series(data, ARMS[BASE], ARMS[arm], "reward/accuracy"))
        lines.append("- " + F.verdict(acc, f"train accuracy, last quarter, {BASE} − {arm} (matched accuracy?)"))
else:
    lines.append(f"- arm '{BASE}' is not in this study: no gap computed.")
lines += F.no_signal_lines(data, ARMS)
if PROBE:
    lines += ["", *F.length_probe_lines(PROBE)]
if data.scale == "smoke":
    lines += ["", "Smoke scale: 2 steps and 1 seed check the wiring only; no effect can be read from it."]
F.write_summary(data, "\n".join(lines))
