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
# # (c) MoE stability: token vs sequence importance ratios, routing replay, TIS
#
# **What the papers showed** (GSPO, arXiv 2507.18071; R3 routing replay, arXiv 2510.11370;
# docs/studies.md (c)). In a mixture-of-experts model the rollout engine and the training engine
# route tokens differently (precision, kernels), and the routing shifts after every update:
# per-token importance ratios spike, clipping fires erratically and training can collapse.
# GSPO's length-normalised sequence ratio averages the jitter out (it clips far MORE tokens
# than GRPO, with ε 3e-4 / 4e-4 against 0.2, and still trains better); routing replay (R3)
# reuses the rollout's expert choices in the training forward and removes the mismatch at
# its source (R3 reports a train–inference KL of 1.5e-3 for an MoE vs 6.4e-4 for a dense
# model); truncated importance sampling (TIS) caps the rollout-vs-train weights. About 10%
# of the experts change per update in a 30B-A3B MoE.
#
# **Arms** (the `arm` axis): `grpo` (token ratio, clip 0.2), `grpo_r3` (+ routing replay),
# `gspo` (sequence ratio), `cispo` (clipped, detached token IS weight), `grpo_tis`
# (+ TIS, cap 2). One panel row per `rollout.router_noise` value: Gaussian noise on the
# router logits at rollout only, a controlled knob for the mismatch strength.
#
# **Rollout-correction arms** (run at cpu scale, 3 seeds: the report's "Rollout-correction
# arms"): each weighs
# GRPO's token loss against the sampler's own log-probs π_rollout, kept apart from π_old.
# `grpo_tis` (token TIS, weight min(π_old/π_rollout, 2)), `grpo_mis` (sequence MIS: the
# product of the ratios on the whole response, 0 above 2), `icepop` (tokens with ratio
# outside [0.5, 5] masked) and `grpo_opsm` (DeepSeek-V3.2's off-policy sequence mask, δ 0.1:
# negative-advantage responses whose mean log(π_rollout/π_θ) exceeds δ dropped). None changes
# the sampler, so their k3 KL and router disagreement should be grpo's; what they can change is
# the clip fraction, the gradient-norm spikes and pass@1 (the study file argues each).
#
# **Regime at tiny scale.** A tiny top-k MoE on arithmetic, 4 mini-batches per rollout (the
# later ones off-policy: without off-policy steps GSPO equals GRPO), bf16 rollout vs fp32
# training (the gpu scale adds vLLM vs transformers). A model this small may not be unstable
# at all; collapse, if it does not happen, is reported as not happening. What should show
# even here: router noise raises the rollout/train mismatch and router disagreement, and
# routing replay brings the rollout-vs-train router disagreement to (about) zero. The smoke
# scale (2 steps, 1 seed) only checks the wiring.
#
# **Reading the figures.** Each line is the mean over seeds with a shaded 95% t-interval
# (one seed: the line alone, "n=1 seed"); every seed is used. Metrics a run did not log are
# left out with a note (printed and in the panel).

# %%
import matplotlib.pyplot as plt

from harness.experiment import figures as F
from harness.experiment.figures import paired as P

F.setup()
data = F.StudyData.from_env("moe_stability")
for a in data.values("arm"):  # one colour per arm, in the study's order, whichever cells ran here
    data.color(str(a))
MISSING = data.drop_incomplete()  # cells never run (or not finished) here: named, not drawn
if MISSING:
    print(
        f"note: {len(MISSING)} cells have no eval.json in this folder (not run, or not finished): {[c['id'] for c in MISSING]}"
    )
NOISE = "rollout.router_noise"
noises = [v for v in data.values(NOISE) if v is not None]
if not noises and data.cells:  # router noise fixed by the scale, not an axis: one row of panels
    noises = [data.config(data.cells[0]).get("rollout", {}).get("router_noise", 0.0)]
ROWS = {nz: data.by("arm", cells=[c for c in data.cells if c["axes"].get(NOISE, nz) == nz]) for nz in noises}
PROBE = F.load_probe(data)
arms = data.values("arm")
print(
    f"study {data.name} ({data.scale}): {len(data.cells)} cells, arms {arms}, router noise {noises}, "
    f"{F.seeds_label(data.n_seeds)}"
)
OPTIONAL = [
    "mismatch/k3_kl",
    "mismatch/max_abs_dp",
    "mismatch/ratio_gt2_frac",
    "router/disagree_rollout_train",
    "router/disagree_old_new",
    "clip/frac",
    "grad/norm_max",
    "entropy",
]
for key in OPTIONAL:
    if not data.has_metric(key):
        print(f"note: no run logged '{key}': its panels are left empty")


CORRECTION = [  # what the rollout-correction arms log (harness/objective/rollout_correction.py)
    ("rollout_is/frac_truncated", "tokens truncated", "TIS: tokens whose weight was capped"),
    ("rollout_is/frac_masked", "tokens masked", "IcePop / MIS: tokens given no gradient"),
    ("rollout_is/seq_frac_masked", "responses masked", "responses with a masked token (MIS: all of it)"),
    ("rollout_is/weight_mean", "mean IS weight", "mean weight against the sampler"),
    ("off_policy_mask/frac_masked", "responses masked", "off-policy mask: responses dropped"),
]
FRACTIONS = {
    *(key for key, _, _ in CORRECTION if key != "rollout_is/weight_mean"),
    "reward/mean",
    "eval/pass_at_1",
    "mismatch/ratio_gt2_frac",
    "router/disagree_rollout_train",
    "router/disagree_old_new",
}  # y from 0


def grid(cols, what, width=5.0, height=3.3):
    """A figure with one row per router-noise value and one column per (key, ylabel, title, logy)."""
    fig, axs = plt.subplots(
        len(noises),
        len(cols),
        figsize=(width * len(cols), height * len(noises) + 0.8),
        layout="constrained",
        squeeze=False,
    )
    for i, nz in enumerate(noises):
        for j, (key, ylabel, title, logy) in enumerate(cols):
            F.panel(
                axs[i][j],
                data,
                ROWS[nz],
                key,
                ylabel,
                f"{title} — router noise σ = {nz}",
                logy=logy,
                fraction=key in FRACTIONS,
            )
        F.legend(list(axs[i]), fontsize=6.5)
    F.suptitle(fig, data, what)
    return fig, axs


# %% [markdown]
# ## Regime: a real rollout/train mismatch, off-policy steps, and a reference arm that learns
# From `grpo` alone: the rollout/train k3 KL and router disagreement it logged, the share of
# tokens whose rollout/train ratio is beyond 2x, and the paired rise of held-out pass@1.

# %%
regime = []
for nz in noises:
    ref = ROWS[nz].get("grpo")
    if not ref:
        continue
    cfg0 = data.config(ref[0])
    regime += [
        f"- σ = {nz}: rollout dtype {cfg0.get('rollout', {}).get('dtype')}, training dtype "
        f"{cfg0.get('model', {}).get('dtype')}, {cfg0.get('train', {}).get('mini_batches')} mini-batches per rollout",
        f"- σ = {nz}: rollout–train k3 KL {F.tail_mean(data, ref, 'mismatch/k3_kl', 1.0).fmt()}, tokens with ratio "
        f"beyond 2x {F.tail_mean(data, ref, 'mismatch/ratio_gt2_frac', 1.0).fmt()}, router disagreement "
        f"rollout–train {F.tail_mean(data, ref, 'router/disagree_rollout_train', 1.0).fmt()}, old→new "
        f"{F.tail_mean(data, ref, 'router/disagree_old_new', 1.0).fmt()} (all steps)",
    ]
    regime += F.rise_lines(data, f"grpo (σ = {nz})", ref)
print("\n".join(regime))
fig, ax = plt.subplots(figsize=(8, 4.3), layout="constrained")
F.rise_panel(ax, data, {a: c for nz in noises for a, c in ROWS[nz].items()})
F.suptitle(fig, data, "does each arm learn? paired rise of held-out pass@1 per seed")
F.save(fig, data, "regime")

# %% [markdown]
# ## The probe: the same policy and batches at router noise 0, 0.5 and 1
# Left: rollout vs training forward of the same policy, per noise level: k3 KL with the
# trainer's own routing and with the rollout's routing replayed. Middle: the share of tokens
# (GRPO, clip 0.2) and of sequences (GSPO, clip 3e-4/4e-4) whose rollout/train ratio is
# outside the clip range. Right: change of held-out pass@1 after one off-policy update (4
# mini-batches) per arm; 95% t-intervals over the probe's batches.

# %%
if PROBE:
    LV = PROBE["summary"]["levels"]
    levels = list(LV)
    xs = [float(lv) for lv in levels]
    fig, axs = plt.subplots(1, 3, figsize=(17, 4.3), layout="constrained")

    def stat(lv, key):
        return next((e for e in LV[lv]["stats"] if e["key"] == key), {"mean": float("nan"), "half": float("nan")})

    for key, lab, c in (
        ("mismatch/k3_kl", "trainer's own routing", "tab:red"),
        ("replay/mismatch/k3_kl", "rollout routing replayed (R3)", "tab:green"),
    ):
        es = [stat(lv, key) for lv in levels]
        axs[0].errorbar(
            xs,
            [e["mean"] for e in es],
            yerr=[e["half"] for e in es],
            fmt="o-",
            color=c,
            capsize=4,
            label=lab,
            mfc="none",
        )
    axs[0].set_yscale("log")
    axs[0].set_xlabel("router-logit noise σ at rollout")
    axs[0].set_ylabel("k3 KL(rollout || train) per token (nats, log)")
    axs[0].set_title("rollout/train mismatch of the same policy")
    axs[0].legend()
    for key, lab, c in (
        ("tok_ratio/clip_frac", "tokens outside [0.8, 1.2] (GRPO)", "tab:blue"),
        ("seq_ratio/clip_frac", "sequences outside [1-3e-4, 1+4e-4] (GSPO)", "tab:orange"),
    ):
        es = [stat(lv, key) for lv in levels]
        axs[1].errorbar(
            xs,
            [e["mean"] for e in es],
            yerr=[e["half"] for e in es],
            fmt="s-",
            color=c,
            capsize=4,
            label=lab,
            mfc="none",
        )
    axs[1].set_ylim(0, 1.02)
    axs[1].set_xlabel("router-logit noise σ at rollout")
    axs[1].set_ylabel("share clipped by the mismatch alone (0-1)")
    axs[1].set_title("what the clip range removes before any update")
    axs[1].legend()
    pa = PROBE["arms"]
    for j, a in enumerate(pa):
        es = [next(e for e in LV[lv]["change"] if e["a"] == a) for lv in levels]
        axs[2].errorbar(
            [x + (j - (len(pa) - 1) / 2) * 0.03 for x in xs],
            [e["mean"] for e in es],
            yerr=[e["half"] for e in es],
            fmt=data.marker(a),
            color=data.color(a),
            capsize=3,
            label=a,
            mfc="none",
        )
    axs[2].axhline(0, color="k", lw=0.8)
    axs[2].set_xlabel("router-logit noise σ at rollout")
    axs[2].set_ylabel("change of held-out pass@1 after one update")
    axs[2].set_title("one off-policy update per arm (4 mini-batches)")
    axs[2].legend(fontsize=7)
    F.suptitle(
        fig,
        data,
        "MoE probe: the same policy and batches for every arm, per router-noise level",
        f"{PROBE['settings']['batches']} batches per level; error bars: 95% t-interval over batches",
    )
    F.save(fig, data, "probe")

# %% [markdown]
# ## Reward and held-out pass@1

# %%
fig, _ = grid(
    [
        ("reward/mean", "mean reward of the training rollouts", "train reward", False),
        ("eval/pass_at_1", "held-out pass@1 (fraction of prompts, unbiased)", "held-out pass@1", False),
    ],
    "training reward and held-out pass@1 per arm, one row per rollout router noise",
)
F.save(fig, data, "reward_eval")

# %% [markdown]
# ## Clip fraction (log scale)
# Share of tokens (sequences, for GSPO's sequence ratio) whose ratio was clipped, over the
# step's mini-batches. GSPO is expected to clip far more than GRPO. Steps with no clipped
# token cannot be drawn on a log axis and are left out.

# %%
fig, _ = grid(
    [("clip/frac", "clipped fraction (log scale)", "clip fraction", True)],
    "clip fraction per arm (log scale), one row per rollout router noise",
    width=7.5,
)
F.save(fig, data, "clip_fraction")

# %% [markdown]
# ## Rollout vs training mismatch
# Between the sampler's log-probs and the training engine's for the same tokens at the same
# weights: k3 KL per token, the largest |Δp| of a sampled token, and the share of tokens whose
# ratio p_train / p_rollout is above 2 or below 1/2.

# %%
fig, _ = grid(
    [
        ("mismatch/k3_kl", "k3 KL per token (log scale)", "rollout–train KL", True),
        ("mismatch/max_abs_dp", "max |p_train − p_rollout|", "largest probability gap", False),
        ("mismatch/ratio_gt2_frac", "share of tokens, ratio > 2 or < 1/2", "extreme ratios", False),
    ],
    "rollout vs training-engine mismatch per arm, one row per rollout router noise",
)
F.save(fig, data, "mismatch")

# %% [markdown]
# ## Router disagreement
# Rollout vs train: the share of the rollout's expert choices (layer, token, slot) that the
# training forward does not make (routing replay: ~0 by construction). Old vs new: the
# share of the old policy's choices that change after the step's update.

# %%
fig, _ = grid(
    [
        ("router/disagree_rollout_train", "share of expert choices that differ", "router: rollout vs train", False),
        ("router/disagree_old_new", "share of expert choices that change", "router: before vs after the update", False),
    ],
    "router disagreement per arm, one row per rollout router noise",
)
F.save(fig, data, "router_disagreement")

# %% [markdown]
# ## Gradient-norm spikes and entropy
# Left: every seed's largest pre-clip gradient norm over the step's mini-batches, drawn
# separately (a spike in one seed is not averaged away). Right: the policy's mean per-token
# entropy on the rollout tokens.

# %%
fig, axs = plt.subplots(len(noises), 2, figsize=(11, 3.3 * len(noises) + 0.8), layout="constrained", squeeze=False)
for i, nz in enumerate(noises):
    ax = axs[i][0]
    positive = any(
        v > 0
        for cells in ROWS[nz].values()
        for c in cells
        for s in F.seed_series(data, [c], "grad/norm_max")
        for v in s.values()
    )
    if positive:
        for arm, cells in ROWS[nz].items():
            F.plot_seeds(ax, data, cells, "grad/norm_max", arm, data.color(arm))
        ax.set_yscale("log")
        ax.set_xlabel(F.X_STEP)
        ax.set_ylabel("max gradient norm in the step (pre-clip, log)")
        F.integer_steps(ax)
    else:
        F.note(
            ax,
            "'grad/norm_max' is 0 at every step (no advantage, no gradient)"
            if data.has_metric("grad/norm_max")
            else "'grad/norm_max' not logged by these runs",
        )
    ax.set_title(f"gradient norm, every seed — router noise σ = {nz}")
    F.panel(axs[i][1], data, ROWS[nz], "entropy", "entropy (nats per token)", f"policy entropy — router noise σ = {nz}")
    F.legend(axs[i][0], fontsize=6.5)
    F.legend(axs[i][1], fontsize=6.5)
fig.suptitle(
    f"{data.name} ({data.scale}): gradient-norm spikes (each seed) and entropy (mean over seeds, "
    f"95% t-interval) per arm\n{F.seeds_label(data.n_seeds)} per arm"
)
F.save(fig, data, "grad_norm_entropy")

# %% [markdown]
# ## What the rollout corrections act on
# Per step, the share of tokens or responses each correction truncated or masked, and the mean
# importance weight against the sampler (1 = no correction); an arm appears only in the panels
# of the metrics it logs.

# %%
logged = [(k, y, t, False) for k, y, t in CORRECTION if data.has_metric(k)]
if logged:
    fig, axs = grid(logged, "what each rollout correction acts on, per step (mean over seeds, 95% t-interval)")
    for ax in axs.flat:  # each panel has its own arms (those that log the metric): a legend on each
        F.legend(ax, fontsize=6.5)
    F.save(fig, data, "correction")
else:
    print("note: no run logged a rollout-correction metric (no correction arm in these cells): no figure")

# %% [markdown]
# ## The rollout corrections against grpo, paired by seed
# Each correction arm minus grpo of the same seed (the same warm start, prompts and eval set): the
# final held-out pass@1 (eval.json) and its paired rise over training, the clip fraction, the
# rollout–train k3 KL and router disagreement (each seed's mean over its steps: the sampler is
# grpo's, so these two should not move), the peak gradient norm (log10 of the ratio: the spikes
# span decades) and the number of steps whose largest mini-batch gradient norm exceeds 2 (the
# report's spikes). Hollow markers: each seed; filled with caps: the mean and its 95% t-interval.

# %%
SPIKE = 2.0  # the report's threshold: steps whose largest mini-batch gradient norm exceeds it
COMPARE = [  # (label, value per cell, log10 ratio?, y label): the mechanism first, then what is learned
    ("rollout–train k3 KL", P.step_mean("mismatch/k3_kl"), False, "k3 KL per token, arm − grpo"),
    ("router disagreement rollout–train", P.step_mean("router/disagree_rollout_train"), False, "share, arm − grpo"),
    ("clip fraction", P.step_mean("clip/frac"), False, "clip fraction (mean over steps), arm − grpo"),
    ("peak grad norm", P.peak("grad/norm_max"), True, "log10(peak norm / grpo's peak)"),
    (f"steps with grad norm over {SPIKE:g}", P.count_over("grad/norm_max", SPIKE), False, "steps, arm − grpo"),
    ("final pass@1", P.eval_value("eval/pass_at_1"), False, "final held-out pass@1, arm − grpo"),
    ("paired rise of pass@1", P.rise, False, "rise of held-out pass@1, arm − grpo"),
]
# the range each difference can take (its error bars are clipped to it): shares and pass@1 differ by at most 1,
# a count of steps by at most the number of steps
TRAIN_STEPS = max((int(r["step"]) for c in data.cells for r in data.metrics(c)), default=0)
BOUNDS = {
    "router disagreement rollout–train": (-1.0, 1.0),
    "clip fraction": (-1.0, 1.0),
    f"steps with grad norm over {SPIKE:g}": (-float(TRAIN_STEPS), float(TRAIN_STEPS)),
    "final pass@1": (-1.0, 1.0),
    "paired rise of pass@1": (-2.0, 2.0),
}
OWN = [(key, title) for key, _, title in CORRECTION]  # each correction's own metrics, per arm


def fixes_of(nz):
    """The arms beside the reported three (the rollout corrections, and any added later)."""
    return [a for a in ROWS[nz] if a not in ("grpo", "grpo_r3", "gspo")] if "grpo" in ROWS[nz] else []


def compare(nz):
    """label -> {arm: Final of arm − grpo per seed}, at router noise nz."""
    row = ROWS[nz]
    return {
        lab: {a: P.paired(data, row[a], row["grpo"], fn, log10) for a in fixes_of(nz)} for lab, fn, log10, _ in COMPARE
    }


def own_metric(cells, key):
    """Mean over seeds ± 95% t-interval of each seed's mean over steps, then the seeds' values."""
    per_seed = P.by_seed(data, cells, P.step_mean(key))
    if not per_seed:
        return "–"
    return f"{F.final(list(per_seed.values())).fmt()}: " + " / ".join(f"{v:.3g}" for v in per_seed.values())


def correction_lines(nz):
    """Summary lines: each correction arm against grpo (mean, interval, per-seed values), its own metrics."""
    fixes = fixes_of(nz)
    if not fixes:
        return []
    row, out = ROWS[nz], ["", f"Rollout corrections at σ = {nz}, each minus grpo of the same seed:", ""]
    for (lab, _, log10, _), diffs in zip(COMPARE, compare(nz).values()):
        for a, d in diffs.items():
            what = f"log10({a} / grpo)" if log10 else f"{a} − grpo"
            out.append(f"- {F.verdict(d, f'σ = {nz}: {lab}, {what}')} Per seed: {P.per_seed_text(d)}.")
    peaks = [
        [
            a,
            " / ".join(f"{v:.3g}" for v in P.by_seed(data, row[a], P.peak("grad/norm_max")).values()) or "n/a",
            " / ".join(f"{v:.0f}" for v in P.by_seed(data, row[a], P.count_over("grad/norm_max", SPIKE)).values())
            or "n/a",
        ]
        for a in ["grpo", *fixes]
    ]
    out += ["", F.markdown_table(["arm", "peak grad norm per seed", f"steps over {SPIKE:g} per seed"], peaks), ""]
    own = [[a, *(own_metric(row[a], k) for k, _ in OWN)] for a in fixes]
    out += [F.markdown_table(["arm (each seed's mean over steps)", *(k for k, _ in OWN)], own)]
    return out


for nz in noises:
    if fixes_of(nz):
        diffs = compare(nz)
        fig, axs = plt.subplots(2, 4, figsize=(17, 8), layout="constrained")
        for ax, (lab, _, _, ylabel) in zip(axs.flat, COMPARE):
            P.paired_panel(ax, data, diffs[lab], lab, ylabel, bounds=BOUNDS.get(lab))
        axs.flat[-1].set_visible(False)
        F.suptitle(fig, data, f"rollout corrections minus grpo of the same seed, router noise σ = {nz}")
        F.save(fig, data, "corrections_paired" if len(noises) == 1 else f"corrections_paired_noise{nz}")

# %% [markdown]
# ## Numbers: per arm and router noise, with 95% t-intervals over seeds
# Reward: each seed's mean over the last quarter of its steps. pass@1: the final checkpoint
# (`eval.json`). Clip fraction, k3 KL and router disagreement: each seed's mean over all its
# steps. Largest gradient norm: each seed's maximum over its steps.


# %%
def mean_over_steps(cells, key):
    return F.tail_of(F.seed_series(data, cells, key), frac=1.0)


def max_over_steps(cells, key):
    return F.final([max(s.values()) for s in F.seed_series(data, cells, key)])


rows = []
for nz in noises:
    for arm, cells in ROWS[nz].items():
        rows.append(
            [
                arm,
                nz,
                F.tail_mean(data, cells, "reward/mean").fmt(),
                F.eval_json_value(data, cells, "eval/pass_at_1").fmt(),
                mean_over_steps(cells, "clip/frac").fmt(),
                mean_over_steps(cells, "mismatch/k3_kl").fmt(),
                mean_over_steps(cells, "router/disagree_rollout_train").fmt(),
                mean_over_steps(cells, "router/disagree_old_new").fmt(),
                max_over_steps(cells, "grad/norm_max").fmt(),
            ]
        )
table = F.markdown_table(
    [
        "arm",
        "router noise",
        "train reward (last quarter)",
        "final pass@1",
        "clip frac",
        "k3 KL rollout–train",
        "router disagree rollout–train",
        "router change old→new",
        "max grad norm",
    ],
    rows,
)
lines = [
    f"# {data.name} ({data.scale}): MoE stability",
    "",
    "## Regime (reference arm alone)",
    "",
    *regime,
    "",
    "## Training",
    "",
    f"{len(data.cells)} cells; {F.seeds_label(data.n_seeds)} per cell; ± = 95% t-interval half-width; "
    "n/a = not logged.",
    "",
    table,
    "",
    *(
        [
            f"Not run in this folder, or not finished (no eval.json; left out of every number and figure): {', '.join(c['id'] for c in MISSING)}.",
            "",
        ]
        if MISSING
        else []
    ),
    "Comparisons (paired by seed):",
    "",
]


def paired_final(a_cells, b_cells, key):
    by_seed = {c.get("seed"): c for c in b_cells}
    out = []
    for c in a_cells:
        if c.get("seed") in by_seed:
            a, b = F.eval_json_value(data, [c], key), F.eval_json_value(data, [by_seed[c.get("seed")]], key)
            if a.n and b.n:
                out.append(a.mean - b.mean)
    return F.final(out)


for nz in noises:
    row = ROWS[nz]
    if "grpo" not in row:
        continue
    for arm in [a for a in row if a in ("grpo_r3", "gspo")]:  # the corrections' pass@1: correction_lines
        lines.append(
            "- "
            + F.verdict(paired_final(row[arm], row["grpo"], "eval/pass_at_1"), f"σ = {nz}: final pass@1, {arm} − grpo")
        )
    if "gspo" in row:
        lines.append(
            "- "
            + F.verdict(
                F.tail_of(F.paired_series(data, row["gspo"], row["grpo"], "clip/frac"), 1.0),
                f"σ = {nz}: clip fraction, gspo − grpo (paper: GSPO clips more)",
            )
        )
    if "grpo_r3" in row:
        for key, what in (
            ("mismatch/k3_kl", "rollout–train k3 KL"),
            ("router/disagree_rollout_train", "router disagreement rollout–train"),
        ):
            if data.has_metric(key):
                lines.append(
                    "- "
                    + F.verdict(
                        F.tail_of(F.paired_series(data, row["grpo_r3"], row["grpo"], key), 1.0),
                        f"σ = {nz}: {what}, grpo_r3 − grpo (R3: lower)",
                    )
                )
REPORTED = ("grpo", "grpo_r3", "gspo")  # the arms analysis/reports/moe_stability.md reports
for nz in noises:
    lines += correction_lines(nz)
if len(noises) > 1 and data.has_metric("mismatch/k3_kl"):
    lo, hi = noises[0], noises[-1]
    for arm in ROWS[hi]:
        if arm in ROWS[lo]:
            d = F.tail_of(F.paired_series(data, ROWS[hi][arm], ROWS[lo][arm], "mismatch/k3_kl"), 1.0)
            lines.append("- " + F.verdict(d, f"{arm}: rollout–train k3 KL, router noise {hi} − {lo} (expected higher)"))
lines += F.no_signal_lines(data, {f"{arm} (σ = {nz})": cells for nz in noises for arm, cells in ROWS[nz].items()})
if PROBE:
    lines += [
        "",
        f"## Probe ({PROBE['settings']['batches']} batches per noise level, "
        f"{PROBE['settings']['probe_prompts']} held-out prompts x {PROBE['settings']['probe_samples']}, "
        f"{PROBE['wall_seconds']:.0f} s)",
        "",
    ]
    for lv, d in PROBE["summary"]["levels"].items():
        lines.append(f"- σ = {lv}: " + "; ".join(f"{e['key']} {e['mean']:.4g} ± {e['half']:.2g}" for e in d["stats"]))
        lines.append(
            f"- σ = {lv}, one update: " + "; ".join(f"{e['a']} {e['key']} {e['mean']:.4g}" for e in d["update"])
        )
        for e in d["pairs"]:
            lines.append("- " + F.probe_verdict(e, f"σ = {lv}: pass@1 after one update, {e['a']} − {e['b']}"))
missing = [k for k in OPTIONAL if not data.has_metric(k)]
if missing:
    lines += ["", "Not logged by these runs (panels left empty): " + ", ".join(missing) + "."]
if data.scale == "smoke":
    lines += ["", "Smoke scale: 2 steps and 1 seed check the wiring only; no effect can be read from it."]
F.write_summary(data, "\n".join(lines))
