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
# # (b) Difficulty bias of dividing advantages by the group std
#
# **What the papers showed** (Dr.GRPO, arXiv 2503.20783, §3; docs/studies.md (b)). With binary
# rewards, k of G answers correct and p = k/G, the group-mean baseline gives
# u_i = r_i − p, and a prompt's total advantage mass is
#
# * Σ|A_i| = 2G·p(1−p) with no scaling (`scale: none`, Dr.GRPO),
# * Σ|A_i| = 2G·√(p(1−p)) when divided by the group's population std (`scale: group_std`, GRPO).
#
# Relative to a p = 1/2 prompt, group-std scaling therefore up-weights prompts that are
# almost always solved or almost never solved: at G = 16 a prompt solved once gets about
# 2× the relative weight it gets without the std. Dr.GRPO argues this tilts the update
# towards too-easy and too-hard questions; Lite PPO (arXiv 2508.08221) divides by the
# BATCH std instead (`scale: batch_std`), which keeps the no-std shape up to one constant
# per step.
#
# **Regime** (experiments/difficulty_bias.yaml). The task mixes difficulty on purpose
# (arithmetic with 2 / 3 / 4 operands in equal shares) and the smoke regime's warm start,
# sampled at T = 1.4 with G = 16, puts groups across the whole range of p, so that easy
# prompts (p > 0.8) and hard ones (p < 0.2) share every batch; the "Regime" section checks
# this, and that the reference arm learns, on `group_std` alone before the arms are compared.
# **The probe** (`harness probe difficulty_bias`, probe.json) measures the mechanism at one
# policy and the same batches for every arm: Σ|A| against the closed forms, the gradient-norm
# share of the extreme groups, and the change of held-out pass@1 per bucket after one update. The closed forms are exact algebra and must match to rounding; what is an
# empirical question is whether the re-weighting changes (i) the share of the update's
# gradient norm that comes from the extreme groups and (ii) accuracy per difficulty bucket.
# At tiny scale (a char-level model, tens of steps) an accuracy difference may well not
# appear; if so, it is reported as not appearing, with the numbers. The smoke scale
# (2 steps, 1 seed, G = 8) only checks the wiring.
#
# **Data.** Per-group records come from `runs/<cell>/groups.jsonl` (step, difficulty, G,
# k, p, reward std, Σ|A| of the group's advantages as the objective used them;
# harness/train/diagnostics/group_stats.py). `grad/share_extreme` = ‖g_E‖ / (‖g_E‖ + ‖g_R‖), with g_E
# the policy-loss gradient of the extreme groups' rows (p < 0.2 or p > 0.8) and g_R that
# of the other rows, both at the rollout policy with the whole batch's denominators, every
# `train.grad_share_every` steps. Every seed is used; lines are means over seeds with a
# shaded 95% t-interval (one seed: the line alone, "n=1 seed").

# %%
import math
import random

import matplotlib.pyplot as plt

from harness.experiment import figures as F

F.setup()
data = F.StudyData.from_env("difficulty_bias")
ARMS = data.by("objective.scale")  # group_std / none / batch_std -> cells (seeds)
print(f"study {data.name} ({data.scale}): {len(data.cells)} cells, arms {list(ARMS)}, {F.seeds_label(data.n_seeds)}")
P_LOW, P_HIGH = 0.2, 0.8  # as harness/train/diagnostics/group_stats.py
REF = "group_std"
PROBE = F.load_probe(data)

# %% [markdown]
# ## Regime: groups across the range of p, and a reference arm that learns
# Left: the share of the reference arm's training groups at each p = k/G (all steps, all
# seeds). Right: the paired rise of held-out pass@1 of every arm and seed.

# %%
regime = []
if REF in ARMS:
    ps = [g["p"] for c in ARMS[REF] for g in data.groups(c)]
    n = max(len(ps), 1)
    ext = sum(1 for p in ps if p < P_LOW or p > P_HIGH) / n
    mid = sum(1 for p in ps if 0 < p < 1) / n
    regime += [
        f"- training groups of the reference arm: {len(ps)}; with mixed rewards (0 < p < 1): {mid:.3f}; "
        f"extreme (p < {P_LOW} or p > {P_HIGH}): {ext:.3f}; p = 0: {sum(1 for p in ps if p == 0) / n:.3f}; "
        f"p = 1: {sum(1 for p in ps if p == 1) / n:.3f}"
    ]
    regime += F.rise_lines(data, REF, ARMS[REF])
    fig, axs = plt.subplots(1, 2, figsize=(12, 4.3), layout="constrained")
    G = max((g["G"] for c in ARMS[REF] for g in data.groups(c)), default=1)
    levels = [k / G for k in range(G + 1)]
    axs[0].bar(levels, [sum(1 for p in ps if abs(p - lv) < 1e-9) / n for lv in levels], width=0.8 / G, color="0.4")
    axs[0].axvspan(-0.05, P_LOW, color="tab:red", alpha=0.08, lw=0)
    axs[0].axvspan(P_HIGH, 1.05, color="tab:red", alpha=0.08, lw=0, label="extreme groups")
    axs[0].set_xlabel(f"p = k/G of a training group (G = {G})")
    axs[0].set_ylabel("share of the reference arm's groups")
    axs[0].set_title(f"{REF}: groups across the whole range of p")
    axs[0].legend()
    F.rise_panel(axs[1], data, ARMS)
    F.suptitle(fig, data, "regime: difficulty spread of the training groups, and does each arm learn")
    F.save(fig, data, "regime")
print("\n".join(regime))

# %% [markdown]
# ## The probe: the same policy and batches under each advantage scale
# Left: the gradient-norm share of the extreme groups at the batch, per arm. Middle: the
# paired differences (group_std minus each other arm, same batch) of the gradient-norm share
# and of the advantage-mass share. Right: the change
# of held-out pass@1 per difficulty bucket after one update from that policy (same prompts,
# same sampling seed), per arm; 95% t-intervals over the probe's batches.

# %%
if PROBE:
    F.save(F.difficulty_probe_figure(data, PROBE), data, "probe")


def objective_of(cells):
    return data.config(cells[0]).get("objective", {}) if cells else {}


def groups_of(cells):
    """All group records of these cells, each with its cell's seed."""
    return [dict(g, seed=c.get("seed")) for c in cells for g in data.groups(c)]


def batch_spread(groups, std, of):
    """(seed, step) -> the batch std that scale=batch_std divided by, rebuilt from that step's groups
    (equal group sizes): population variance = mean within-group variance (+ variance of the group
    means when batch_std_of='reward'); the sample std multiplies the variance by B/(B-1)."""
    out = {}
    for key in {(g["seed"], g["step"]) for g in groups}:
        gs = [g for g in groups if (g["seed"], g["step"]) == key]
        B = sum(g["G"] for g in gs)
        within = sum(g["reward_std"] ** 2 for g in gs) / len(gs)
        mu = sum(g["reward_mean"] for g in gs) / len(gs)
        var = within + (sum((g["reward_mean"] - mu) ** 2 for g in gs) / len(gs) if of == "reward" else 0.0)
        if std == "sample" and B > 1:
            var *= B / (B - 1)
        out[key] = math.sqrt(var)
    return out


def closed_form(g, obj, spread=None):
    """Σ|A| of a binary-reward group under the arm's objective; None where no closed form applies."""
    G, p = g["G"], g["p"]
    if obj.get("baseline", "group_mean") != "group_mean" or abs(g["reward_mean"] - p) > 1e-9:
        return None  # another baseline, or non-binary rewards (shaping): the algebra does not hold
    scale = obj.get("scale")
    if scale == "none":
        return 2 * G * p * (1 - p)
    if scale == "group_std":
        c = 2 * G * math.sqrt(p * (1 - p))
        return c * math.sqrt((G - 1) / G) if obj.get("std") == "sample" else c  # sample std = pop * sqrt(G/(G-1))
    if scale == "batch_std" and spread:
        s = spread.get((g["seed"], g["step"]), 0.0)
        return 2 * G * p * (1 - p) / s if s > 0 else 0.0
    return None


GROUPS = {arm: groups_of(cells) for arm, cells in ARMS.items()}
SPREAD = {
    arm: batch_spread(
        GROUPS[arm], objective_of(ARMS[arm]).get("std", "sample"), objective_of(ARMS[arm]).get("batch_std_of", "reward")
    )
    for arm in ARMS
    if objective_of(ARMS[arm]).get("scale") == "batch_std"
}
if not any(GROUPS.values()):
    print(
        "note: no groups.jsonl in these runs (trained before harness/train/diagnostics/group_stats.py): "
        "the per-group figures are left empty"
    )

# %% [markdown]
# ## Measured Σ|A| per prompt vs p, against the closed forms
# One dot per prompt group and step (all seeds; p jittered a little so that dots do not
# hide each other), the mean per p as a black ×, the closed forms as lines. The right panel
# puts the arms on one scale: Σ|A| relative to what a p = 1/2 prompt gets in the same step.

# %%
ncol = len(ARMS) + 1
fig, axs = plt.subplots(1, ncol, figsize=(4.3 * ncol, 4.2), layout="constrained")
rng = random.Random(0)
ps = [i / 200 for i in range(201)]
G_all = sorted({g["G"] for gs in GROUPS.values() for g in gs})
for ax, (arm, gs) in zip(axs, GROUPS.items()):
    obj = objective_of(ARMS[arm])
    if not gs:
        F.note(ax, "no groups.jsonl")
        ax.set_title(f"scale = {arm}")
        continue
    G = gs[0]["G"]
    ax.scatter(
        [g["p"] + rng.uniform(-0.015, 0.015) for g in gs],
        [g["abs_adv_sum"] for g in gs],
        s=12,
        alpha=0.35,
        color=data.color(arm),
        lw=0,
        label=f"measured: a dot per group and step ({len(gs)})",
    )
    by_p = {}
    for g in gs:
        by_p.setdefault(g["p"], []).append(g["abs_adv_sum"])
    xs = sorted(by_p)
    ax.plot(xs, [sum(by_p[x]) / len(by_p[x]) for x in xs], "x", color="k", ms=7, label="measured mean per p")
    ax.plot(
        ps,
        [2 * G * math.sqrt(p * (1 - p)) for p in ps],
        "-",
        color="C3",
        lw=1.2,
        label="2G√(p(1−p)) (group std, population)",
    )
    ax.plot(ps, [2 * G * p * (1 - p) for p in ps], "--", color="C0", lw=1.2, label="2G·p(1−p) (no std)")
    if arm in SPREAD:  # batch std: the closed form depends on the step's batch, so one + per group
        cf = [(g["p"], closed_form(g, obj, SPREAD[arm])) for g in gs]
        cf = [(p, c) for p, c in cf if c is not None]
        ax.plot(
            [p for p, _ in cf],
            [c for _, c in cf],
            "+",
            color="C2",
            ms=11,
            mew=1.5,
            label="2G·p(1−p)/σ_batch, σ_batch of the group's step",
        )
    if obj.get("scale") == "group_std" and obj.get("std") == "sample":
        ax.plot(
            ps,
            [2 * G * math.sqrt(p * (1 - p) * (G - 1) / G) for p in ps],
            "-.",
            color="C3",
            lw=1,
            label="2G√(p(1−p)(G−1)/G) (group std, sample)",
        )
    ax.set_xlim(-0.04, 1.04)
    ax.set_xlabel("p = k/G (fraction of the prompt's G answers correct)")
    ax.set_ylabel(f"Σ|A_i| over the group's G = {G} answers")
    ax.set_title(f"scale = {arm} (std: {obj.get('std', '?')})")
    F.legend(ax, loc="lower center", fontsize=6.5)

ax = axs[-1]
for arm, gs in GROUPS.items():
    obj = objective_of(ARMS[arm])
    rel = {}
    for g in gs:
        half = closed_form(dict(g, p=0.5, reward_mean=0.5), obj, SPREAD.get(arm))  # a p = 1/2 prompt, same step
        if half:
            rel.setdefault(g["p"], []).append(g["abs_adv_sum"] / half)
    xs = sorted(rel)
    if xs:
        ax.plot(
            xs,
            [sum(rel[x]) / len(rel[x]) for x in xs],
            data.marker(arm),
            color=data.color(arm),
            mfc="none",
            mew=1.5,
            ms=5 + 2.5 * list(GROUPS).index(arm),
            label=f"{arm} (measured mean per p)",
        )  # nested rings when equal
ax.plot(ps, [2 * math.sqrt(p * (1 - p)) for p in ps], "-", color="C3", lw=1.2, label="2√(p(1−p)) (group std)")
ax.plot(ps, [4 * p * (1 - p) for p in ps], "--", color="C0", lw=1.2, label="4p(1−p) (no std; batch std)")
if G_all:
    G = G_all[-1]
    p1 = 1 / G
    ratio = (2 * math.sqrt(p1 * (1 - p1))) / (4 * p1 * (1 - p1))
    ax.axvline(p1, color="0.6", lw=0.8)
    ax.annotate(
        f"p = 1/{G}: group std gives {ratio:.2f}×\nthe relative weight of no std",
        (p1, 2 * math.sqrt(p1 * (1 - p1))),
        xytext=(0.22, 0.12),
        fontsize=7,
        arrowprops={"arrowstyle": "->", "color": "0.5"},
    )
ax.set_xlim(-0.04, 1.04)
ax.set_xlabel("p = k/G")
ax.set_ylabel("Σ|A| relative to a p = 1/2 prompt (same step)")
ax.set_title("relative weight of a prompt by its p")
ax.set_ylim(-0.03, 1.3)
F.legend(ax, loc="upper center", fontsize=6.5, ncol=2)
fig.suptitle(
    f"{data.name} ({data.scale}): advantage mass per prompt group vs its solve rate p, measured vs closed "
    f"form\n{F.seeds_label(data.n_seeds)} per arm, all steps"
)
F.save(fig, data, "abs_adv_vs_p")

# %% [markdown]
# ## Share of the update that comes from the extreme groups (p < 0.2 or p > 0.8)
# Left: the gradient-norm share (measured every `train.grad_share_every` steps). Middle: the
# share of the batch's advantage mass Σ|A| (every step), the cause. Right: how many of the
# groups are extreme AND carry signal (0 < p < 0.2 or 0.8 < p < 1), for scale. All-equal
# groups (p = 0 or 1) have A = 0 and give no gradient.


# %%
def extreme_frac_series(cells):
    out = []
    for c in cells:
        per = {}
        for g in data.groups(c):
            per.setdefault(g["step"], []).append(0 < g["p"] < P_LOW or P_HIGH < g["p"] < 1)
        if per:
            out.append({st: sum(v) / len(v) for st, v in per.items()})
    return out


fig, axs = plt.subplots(1, 3, figsize=(15, 4.3), layout="constrained")
F.panel(
    axs[0],
    data,
    ARMS,
    "grad/share_extreme",
    "‖g_extreme‖ / (‖g_extreme‖ + ‖g_rest‖)",
    "gradient-norm share of the extreme groups",
)
F.panel(
    axs[1],
    data,
    ARMS,
    "adv/share_extreme",
    "Σ|A| of extreme groups / Σ|A| of the batch",
    "advantage-mass share of the extreme groups",
)
drawn = False
for arm, cells in ARMS.items():
    cur = F.combine(extreme_frac_series(cells))
    F.plot_curve(axs[2], cur, arm, data.color(arm), marker=data.marker(arm))
    drawn |= bool(cur)
if not drawn:
    F.note(axs[2], "no groups.jsonl")
axs[2].set_xlabel(F.X_STEP)
axs[2].set_ylabel("fraction of the step's groups")
axs[2].set_title("groups with 0 < p < 0.2 or 0.8 < p < 1")
F.integer_steps(axs[2])
for ax in axs:
    ax.set_ylim(-0.02, 1.02)
F.legend(list(axs))
F.suptitle(
    fig, data, "how much of each update comes from nearly-always / nearly-never solved prompts, by advantage scale"
)
F.save(fig, data, "grad_share_extreme")

# %% [markdown]
# ## Group reward std over training
# Distribution of the within-group reward std (population; binary rewards: √(p(1−p)), 0 for
# an all-equal group) in the first, middle and last third of the training steps, pooled over
# seeds (runs shorter than 3 steps: one part per step). With binary rewards the std takes one
# value per pair k, G−k: one bar per value.

# %%
fig, axs = plt.subplots(1, len(ARMS), figsize=(5.2 * len(ARMS), 4.2), layout="constrained", squeeze=False)
SHADES = ("0.75", "0.45")
for ax, (arm, gs) in zip(axs[0], GROUPS.items()):
    if not gs:
        F.note(ax, "no groups.jsonl")
        ax.set_title(f"scale = {arm}")
        continue
    steps = sorted({g["step"] for g in gs})
    thirds = [steps[i * len(steps) // 3 : (i + 1) * len(steps) // 3] for i in range(3)]
    thirds = [t for t in thirds if t]
    values = sorted({round(g["reward_std"], 3) for g in gs})
    discrete = len(values) <= 20
    width = 0.8 / len(thirds)
    top = 0.0
    for i, part in enumerate(thirds):
        name = f"{('first', 'middle', 'last')[i]} third: " if len(thirds) == 3 else ""
        span = f"step {part[0]}" if part[0] == part[-1] else f"steps {part[0]}–{part[-1]}"
        color = data.color(arm) if i == len(thirds) - 1 else SHADES[i % 2]
        vals = [g["reward_std"] for g in gs if g["step"] in set(part)]
        label = f"{name}{span} ({len(vals)} groups)"
        if discrete:  # one bar per possible value
            frac = [sum(round(v, 3) == x for v in vals) / len(vals) for x in values]
            ax.bar(
                [j + (i - (len(thirds) - 1) / 2) * width for j in range(len(values))],
                frac,
                width,
                color=color,
                label=label,
            )
            top = max(top, max(frac))
        else:
            hist = ax.hist(
                vals,
                bins=20,
                range=(0, max(values) or 1),
                weights=[1 / len(vals)] * len(vals),
                histtype="step",
                lw=1.6,
                color=color,
                label=label,
            )
            top = max(top, max(hist[0]))
    if discrete:
        G = gs[0]["G"]
        ks = {round(math.sqrt(k / G * (1 - k / G)), 3): k for k in range(G // 2 + 1)}
        ax.set_xticks(range(len(values)))
        ax.set_xticklabels([f"{x:.2f}" + (f"\nk={ks[x]},{G - ks[x]}" if x in ks else "") for x in values], fontsize=7)
    ax.set_ylim(0, top * 1.3 + 0.01)
    ax.set_xlabel(f"within-group reward std (population){'; k = correct of G' if discrete else ''}")
    ax.set_ylabel("fraction of the groups in that third")
    ax.set_title(f"scale = {arm}")
    F.legend(ax, fontsize=6.5, loc="upper center")
fig.suptitle(
    f"{data.name} ({data.scale}): distribution of the group reward std over training "
    f"(std 0 = all-equal group, no signal)\n{F.seeds_label(data.n_seeds)} per arm, pooled"
)
F.save(fig, data, "group_std_hist")

# %% [markdown]
# ## Held-out accuracy per difficulty bucket

# %%
buckets = sorted(
    {k.rsplit("/", 1)[1] for c in data.cells for r in data.metrics(c) for k in r if k.startswith("eval/pass_at_1/")},
    key=lambda b: (["easy", "medium", "hard"] + [b]).index(b),
)
fig, axs = plt.subplots(
    1, max(1, len(buckets)), figsize=(4.6 * max(1, len(buckets)), 4.2), layout="constrained", squeeze=False
)
for ax, b in zip(axs[0], buckets):
    F.panel(ax, data, ARMS, f"eval/pass_at_1/{b}", "held-out pass@1 (fraction of prompts, unbiased)", f"bucket: {b}")
    ax.set_ylim(-0.02, 1.02)
if buckets:
    F.legend(list(axs[0]))
else:
    F.note(axs[0][0], "no eval/pass_at_1/<bucket> metrics logged")
F.suptitle(fig, data, "held-out pass@1 per difficulty bucket (operands: easy 2, medium 3, hard 4), by advantage scale")
F.save(fig, data, "accuracy_by_difficulty")

# %% [markdown]
# ## Zero-variance groups
# Groups whose G answers are all right or all wrong carry no advantage under a group
# baseline. Left: their share per step (`groups/zero_var_frac`); right: split into all-wrong
# (p = 0, solid) and all-correct (p = 1, dashed), from groups.jsonl.


# %%
def share_series(cells, pval):
    out = []
    for c in cells:
        per = {}
        for g in data.groups(c):
            per.setdefault(g["step"], []).append(g["p"] == pval)
        if per:
            out.append({st: sum(v) / len(v) for st, v in per.items()})
    return out


fig, axs = plt.subplots(1, 2, figsize=(12, 4.3), layout="constrained")
F.panel(axs[0], data, ARMS, "groups/zero_var_frac", "fraction of the step's groups", "all-equal groups (zero variance)")
drawn = False
for arm, cells in ARMS.items():
    for pval, style, what in ((0.0, "-", "all wrong"), (1.0, "--", "all correct")):
        cur = F.combine(share_series(cells, pval))
        F.plot_curve(axs[1], cur, f"{arm}: {what}", data.color(arm), style=style, marker=data.marker(arm), band=False)
        drawn |= bool(cur)
if not drawn:
    F.note(axs[1], "no groups.jsonl")
axs[1].set_xlabel(F.X_STEP)
axs[1].set_ylabel("fraction of the step's groups")
axs[1].set_title("all wrong (p = 0) vs all correct (p = 1); means only, no band")
F.integer_steps(axs[1])
for ax in axs:
    ax.set_ylim(-0.02, 1.02)
F.legend(axs[0])
F.legend(axs[1], fontsize=6.5)
F.suptitle(fig, data, "zero-variance group fraction by advantage scale")
F.save(fig, data, "zero_variance")

# %% [markdown]
# ## Numbers: per arm, with 95% t-intervals over seeds
# Shares and the zero-variance fraction: each seed's mean over all its measured steps.
# pass@1: the final checkpoint's held-out eval (`eval.json`).


# %%
def mean_over_steps(cells, key):
    return F.tail_of(F.seed_series(data, cells, key), frac=1.0)


def closed_form_error(arm):
    """Largest |measured − closed form| / max(closed form, 1) over the arm's groups, and how many had one."""
    obj, errs = objective_of(ARMS[arm]), []
    for g in GROUPS[arm]:
        c = closed_form(g, obj, SPREAD.get(arm))
        if c is not None:
            errs.append(abs(g["abs_adv_sum"] - c) / max(c, 1.0))
    return (max(errs), len(errs)) if errs else (None, 0)


rows = []
for arm, cells in ARMS.items():
    err, n_cf = closed_form_error(arm)
    rows.append(
        [
            arm,
            mean_over_steps(cells, "grad/share_extreme").fmt(),
            mean_over_steps(cells, "adv/share_extreme").fmt(),
            mean_over_steps(cells, "groups/zero_var_frac").fmt(),
            F.eval_json_value(data, cells, "eval/pass_at_1").fmt(),
        ]
        + [F.eval_json_value(data, cells, f"eval/pass_at_1/{b}").fmt() for b in buckets]
        + [f"{err:.1e} ({n_cf} groups)" if err is not None else "n/a"]
    )
table = F.markdown_table(
    ["arm", "grad-norm share extreme", "Σ|A| share extreme", "zero-var frac", "final pass@1"]
    + [f"pass@1 {b}" for b in buckets]
    + ["max rel. error vs closed form"],
    rows,
)
lines = [
    f"# {data.name} ({data.scale}): difficulty bias of the group std",
    "",
    "## Regime (reference arm alone)",
    "",
    *regime,
    "",
    "## Training",
    "",
    f"{len(data.cells)} cells; {F.seeds_label(data.n_seeds)} per arm; ± = 95% t-interval half-width.",
    "",
    table,
    "",
    "Closed forms (exact algebra, a check of the implementation, not an effect): the last column should be "
    "~1e-6 (adv_eps) for every arm.",
    "",
    "Effects (paired by seed):",
    "",
]
if "group_std" in ARMS and "none" in ARMS:
    for key, what in (
        ("grad/share_extreme", "gradient-norm share of extreme groups"),
        ("adv/share_extreme", "advantage-mass share of extreme groups"),
    ):
        d = F.tail_of(F.paired_series(data, ARMS["group_std"], ARMS["none"], key), frac=1.0)
        lines.append("- " + F.verdict(d, f"{what}, group_std − none (mean over steps)"))
    for b in ["", *buckets]:
        key = f"eval/pass_at_1/{b}" if b else "eval/pass_at_1"
        per_seed = []
        none_by_seed = {c.get("seed"): c for c in ARMS["none"]}
        for c in ARMS["group_std"]:
            if c.get("seed") in none_by_seed:
                a = F.eval_json_value(data, [c], key)
                z = F.eval_json_value(data, [none_by_seed[c.get("seed")]], key)
                if a.n and z.n:
                    per_seed.append(a.mean - z.mean)
        lines.append(
            "- " + F.verdict(F.final(per_seed), f"final pass@1{' (' + b + ')' if b else ''}, group_std − none")
        )
else:
    lines.append("- arms 'group_std' and 'none' are both needed for the paired comparison.")
lines += F.no_signal_lines(data, ARMS)
if PROBE:
    lines += ["", *F.difficulty_probe_lines(PROBE)]
if data.scale == "smoke":
    lines += ["", "Smoke scale: 2 steps, 1 seed and G = 8 check the wiring only; no effect can be read from it."]
F.write_summary(data, "\n".join(lines))
