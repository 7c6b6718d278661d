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
# # (e) Clip-higher vs a symmetric clip, and entropy collapse
#
# **What the paper showed** (DAPO, Yu et al. 2503.14476, Fig. 2 and §3.1). With PPO's
# symmetric clip (ε = 0.2) the policy's entropy fell fast during RL; raising only the upper
# bound (ε_low 0.2, ε_high 0.28, "clip-higher") kept it higher. Mechanism: a token with A > 0
# stops receiving gradient once π/π_old > 1 + ε_high, which caps an unlikely token's rise in
# one batch at p(1 + ε_high): likely tokens keep rising, unlikely (exploratory) ones cannot.
#
# **Arms** (`arm`): `clip_higher` (DAPO, 0.2 / 0.28) and `symmetric` (DAPO with ε_high 0.2).
# Nothing else differs. Same seed = same warm start, step-0 prompts and eval set.
#
# **What the mechanism needs** (experiments/clip_higher.yaml): an upper clip that binds, i.e.
# the policy moving > 20% in ratio within one batch on some A > 0 tokens (4 epochs x 4
# mini-batches per batch here), entropy that falls under the symmetric clip, and a symmetric
# arm that learns (countdown sampled at T = 1.4 at the cpu scale). The "Regime" section checks
# all three on the symmetric arm before the arms are compared.
#
# **Reading the figures.** Entropy is the mean per-token entropy of the sampling distribution
# (logits / rollout temperature) on the training rollouts (nats per token), measured during the
# update. With up to 3 seeds each seed is a thin line and the mean a bold one; with more, the
# mean and its 95% t-interval (shaded).

# %%
import matplotlib.pyplot as plt

from harness.experiment import figures as F

F.setup()
data = F.StudyData.from_env("clip_higher")
ARMS = data.by("arm") if "arm" in data.study.get("axes", []) else data.by("objective.eps_high")
BASE, HIGH = "symmetric", "clip_higher"
print(f"study {data.name} ({data.scale}): {len(data.cells)} cells, arms {list(ARMS)}, {F.seeds_label(data.n_seeds)}")


def first_value(cells, key):
    return F.final([s[min(s)] for s in F.seed_series(data, cells, key)])


def drop(cells, key):
    """Per seed: (mean over the last quarter of steps) - (value at the first step)."""
    series = F.seed_series(data, cells, key)
    tail = F.tail_of(series)
    return F.final([t - s[min(s)] for t, s in zip(tail.per_seed, series)])


# %% [markdown]
# ## Regime: does the upper clip bind, does entropy fall, does the reference arm learn?
# On `symmetric` alone: the share of tokens whose gradient the upper (A > 0, ratio > 1 + ε_high)
# and the lower (A < 0, ratio < 1 − ε_low) clip removed, over all steps; its entropy at step 0
# and over the last quarter; the paired rise of held-out pass@1.

# %%
regime = []
if BASE in ARMS:
    ref = ARMS[BASE]
    regime += [
        f"- tokens clipped at the UPPER bound (share, all steps): {F.tail_mean(data, ref, 'clip/frac_high', 1.0).fmt()}",
        f"- tokens clipped at the lower bound (share, all steps): {F.tail_mean(data, ref, 'clip/frac_low', 1.0).fmt()}",
        f"- entropy at step 0 / last quarter (nats per token): {first_value(ref, 'entropy').fmt()} / "
        f"{F.tail_mean(data, ref, 'entropy').fmt()}",
        f"- groups kept by dynamic sampling per step: {F.tail_mean(data, ref, 'groups/kept', 1.0).fmt()}",
    ]
    regime += F.rise_lines(data, BASE, ref)
print("\n".join(regime))

# %%
fig, axs = plt.subplots(1, 3, figsize=(16, 4.3), layout="constrained")
F.rise_panel(axs[0], data, ARMS)
F.panel(
    axs[1],
    data,
    ARMS,
    "clip/frac_high",
    "share of tokens clipped at 1 + ε_high (A > 0)",
    "upper clip: where clip-higher acts",
)
F.panel(
    axs[2],
    data,
    ARMS,
    "clip/frac_low",
    "share of tokens clipped at 1 − ε_low (A < 0)",
    "lower clip (the same bound in both arms)",
)
top = max(a.get_ylim()[1] for a in axs[1:])
for ax in axs[1:]:
    ax.set_ylim(0, top)  # shares in [0, 1]; both panels on one scale
F.legend(list(axs))
F.suptitle(fig, data, "regime: does each arm learn, and how often does each clip bound bind?")
F.save(fig, data, "regime")

# %% [markdown]
# ## Entropy over training, and the paired gap
# Left: entropy per arm. Middle: clip_higher minus symmetric, same seed (the step-0 batch is the
# same, so the gap starts near 0). Right: the accuracy of the training batch. Under DAPO's
# dynamic sampling that batch holds only the groups it kept (some but not all answers right),
# so this is not the policy's accuracy; whether the arms are compared at matched accuracy is
# read from held-out pass@1 (next section), since an arm that learns faster may also sharpen
# faster.

# %%
fig, axs = plt.subplots(1, 3, figsize=(16, 4.3), layout="constrained")
F.panel(axs[0], data, ARMS, "entropy", "policy entropy on the rollout tokens (nats per token)", "entropy per arm")
axs[0].set_ylim(bottom=0)
F.paired_difference_panel(
    axs[1],
    data,
    ARMS,
    [HIGH],
    BASE,
    "entropy",
    "entropy difference (nats per token, same seed)",
    f"entropy, {HIGH} minus {BASE} (> 0: clip-higher keeps more)",
    missing=f"needs arms '{HIGH}' and '{BASE}'",
)
F.panel(
    axs[2],
    data,
    ARMS,
    "reward/accuracy",
    "fraction of the batch's rollouts correct",
    "accuracy of the kept (mixed) groups",
    fraction=True,
)
F.legend(list(axs))
F.suptitle(fig, data, "clip-higher (ε 0.2 / 0.28) vs symmetric (0.2 / 0.2): policy entropy during RL")
F.save(fig, data, "entropy")

# %% [markdown]
# ## Held-out pass@1 and response length
# Held-out pass@1 (step 0 and the end; the same prompts and sampling seed in every run), and
# the mean length of the training rollouts (entropy per token times length is the sequence
# entropy).

# %%
fig, axs = plt.subplots(1, 2, figsize=(12, 4.3), layout="constrained")
F.panel(
    axs[0],
    data,
    ARMS,
    "eval/pass_at_1",
    "held-out pass@1 (fraction of prompts, unbiased)",
    "held-out pass@1",
    fraction=True,
)
F.panel(axs[1], data, ARMS, "length/mean", "mean rollout length (tokens)", "train rollout length")
F.legend(list(axs))
F.suptitle(fig, data, "held-out pass@1 and rollout length, per clip")
F.save(fig, data, "pass_at_1_length")

# %% [markdown]
# ## Numbers: per arm, with 95% t-intervals over seeds

# %%
rows = []
for arm, cells in ARMS.items():
    rows.append(
        [
            arm,
            first_value(cells, "entropy").fmt(),
            F.tail_mean(data, cells, "entropy").fmt(),
            drop(cells, "entropy").fmt(),
            F.tail_mean(data, cells, "clip/frac_high", 1.0).fmt(),
            F.tail_mean(data, cells, "clip/frac_low", 1.0).fmt(),
            F.tail_mean(data, cells, "reward/accuracy").fmt(),
            F.eval_json_value(data, cells, "eval/pass_at_1").fmt(),
        ]
    )
table = F.markdown_table(
    [
        "arm",
        "entropy step 0 (nats)",
        "entropy last quarter",
        "change (last quarter − step 0)",
        "upper-clip share (all steps)",
        "lower-clip share",
        "kept groups' accuracy (last quarter)",
        "final held-out pass@1",
    ],
    rows,
)
lines = [
    f"# {data.name} ({data.scale}): entropy under clip-higher vs a symmetric clip",
    "",
    "## Regime (reference arm alone)",
    "",
    *regime,
    "",
    "## Training",
    "",
    f"{len(data.cells)} cells; {F.seeds_label(data.n_seeds)} per arm. Last quarter = each seed's mean over the "
    "last quarter of its steps; ± = 95% t-interval half-width.",
    "",
    table,
    "",
    "Entropy collapse and clip-higher (the paper's effect: clip_higher − symmetric > 0):",
    "",
]
for arm, cells in ARMS.items():
    lines.append("- " + F.verdict(drop(cells, "entropy"), f"{arm}: entropy change, step 0 → last quarter", "nats"))
if BASE in ARMS and HIGH in ARMS:
    gap = F.tail_of(F.paired_series(data, ARMS[HIGH], ARMS[BASE], "entropy"))
    lines.append("- " + F.verdict(gap, f"entropy, last quarter, {HIGH} − {BASE}", "nats"))
    ev = F.last_of(F.paired_series(data, ARMS[HIGH], ARMS[BASE], "eval/pass_at_1"))
    lines.append("- " + F.verdict(ev, f"held-out pass@1 at the last eval, {HIGH} − {BASE} (matched accuracy?)"))
    ev8 = F.last_of(F.paired_series(data, ARMS[HIGH], ARMS[BASE], "eval/pass_at_8"))
    lines.append("- " + F.verdict(ev8, f"held-out pass@8 at the last eval, {HIGH} − {BASE} (exploration kept?)"))
    acc = F.tail_of(F.paired_series(data, ARMS[HIGH], ARMS[BASE], "reward/accuracy"))
    lines.append(
        "- "
        + F.verdict(
            acc,
            f"accuracy of the kept (mixed) groups, last quarter, {HIGH} − {BASE} "
            "(dynamic sampling: not the policy's accuracy)",
        )
    )
else:
    lines.append(f"- arms '{HIGH}' and '{BASE}' are not both in this study: no gap computed.")
lines += F.no_signal_lines(data, ARMS)
if data.scale == "smoke":
    lines += ["", "Smoke scale: 2 steps and 1 seed check the wiring only; no effect can be read from it."]
F.write_summary(data, "\n".join(lines))
