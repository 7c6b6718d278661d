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
# # (g) Entropy controls against entropy collapse
#
# **What the papers claim.** During RL the policy's entropy collapses, and with it exploration:
# pass@k at large k stops rising. Each control below says it keeps the entropy up, and pass@k with it:
# Clip-Cov and KL-Cov (Cui et al. 2505.22617), the 80/20 rule's training on the high-entropy tokens
# only (Wang et al. 2506.01939), Skywork-OR1's adaptive entropy bonus (2505.22312), and DAPO's
# clip-higher (2503.14476), the reference arm here.
#
# **Mechanism** (2505.22617 Eq. 9). Under a softmax policy a step's entropy change is about −lr times
# the covariance, over the batch's tokens, of a token's log-prob and its advantage. Clip-Cov detaches the
# gradient of a few tokens of high covariance, KL-Cov holds them near π_old; the 80/20 rule trains only
# the high-entropy ("forking") tokens; the adaptive bonus adds −α H while the entropy is at or below its
# target (α moved by δ every optimizer step); clip-higher leaves unlikely tokens room to rise.
#
# **Arms** (`arm`, experiments/entropy.yaml): `clip_higher` (dapo), `clip_cov`, `kl_cov`, `top_entropy`
# (the presets of the same names) and `adaptive` (dapo with `use_adaptive_entropy`). Same seed = same
# warm start, step-0 prompts and eval set, so every arm is compared with `clip_higher` seed by seed.
#
# **What the mechanism needs** (the clip-higher report's regime): entropy that falls under
# `clip_higher` while it learns, and each control acting. The "Regime" section checks both before any
# arm is compared.
#
# **Reading the figures.** Entropy is the mean per-token entropy of the sampling distribution (logits /
# rollout temperature) on the training rollouts (nats per token), measured during the update. With up
# to 3 seeds each seed is a thin line and the mean a bold one; with more, the mean and its 95%
# t-interval (shaded). "Last quarter" = the mean over the last quarter of the steps each run logged.

# %%
import matplotlib.pyplot as plt

from harness.config import ConfigError
from harness.experiment import figures as F
from harness.train.eval.compare import compare_runs
from harness.train.eval.evaluate import saved_evals

F.setup()
data = F.StudyData.from_env("entropy")
# only the finished cells (summary.json, written last by the trainer): a run still training would put its step-0
# eval where the final one belongs; the unfinished are named in the summary
UNFINISHED = [c["id"] for c in data.drop_incomplete("summary.json")]
ARMS = data.by("arm")
REF = "clip_higher"
OTHERS = [a for a in ARMS if a != REF]
# each control's own metric (harness/objective/entropy_control.py; entropy/coef: harness/train/rl/update.py)
CONTROL = {
    "clip_cov": ("clip_cov/frac", "share of tokens whose gradient Clip-Cov detached"),
    "kl_cov": ("kl_cov/frac", "share of tokens KL-Cov penalised"),
    "top_entropy": ("entropy/kept_frac", "share of tokens the 80/20 mask trains on"),
    "adaptive": ("entropy/coef", "entropy bonus coefficient α (after the step)"),
}
print(f"study {data.name} ({data.scale}): {len(data.cells)} of {len(data.all_cells)} cells finished, arms {list(ARMS)}")
if UNFINISHED:
    print(f"unfinished (left out): {', '.join(UNFINISHED)}")


def eval_ks():
    """The eval's ks (eval.ks of the runs' config: [1, 8] at the cpu scale, [1, 2] at smoke)."""
    ks = sorted({int(k) for c in data.all_cells for k in (data.config(c).get("eval") or {}).get("ks") or [1]})
    return ks or [1]


KS = eval_ks()
KBIG = KS[-1]


def first_value(cells, key):
    return F.final([s[min(s)] for s in F.seed_series(data, cells, key)])


def drop(cells, key):
    """Per seed: (mean over the last quarter of steps) - (value at the first step)."""
    series = F.seed_series(data, cells, key)
    tail = F.tail_of(series)
    return F.final([t - s[min(s)] for t, s in zip(tail.per_seed, series)])


def tail_steps(cells, key):
    """The steps the last quarter covers (of the first seed's series): 'steps 15-19', or 'step 1'."""
    series = F.seed_series(data, cells, key)
    if not series:
        return "no steps"
    steps = sorted(max(series, key=len))
    tail = steps[-max(1, int(round(len(steps) * 0.25))) :]
    return f"steps {tail[0]}-{tail[-1]}" if len(tail) > 1 else f"step {tail[0]}"


def seeds_of(cells):
    return [c.get("seed", c["axes"].get("seed")) for c in cells]


def seeds_text(cells):
    return ", ".join(str(s) for s in seeds_of(cells))


def per_seed_text(cells, value):
    """'seed: value' for each cell (seed) with a finite value(cell) (a Final of that one cell)."""
    got = [(s, value(c)) for s, c in zip(seeds_of(cells), cells)]
    return ", ".join(f"{s}: {f.mean:+.3f}" for s, f in got if f.n) or "—"


# %% [markdown]
# ## Regime: does entropy fall under clip_higher, does it learn, and does each control act?
# On `clip_higher` alone: its entropy at step 0 and over the last quarter, the change per seed, and the
# paired rise of held-out pass@1 per seed. Then each control's own metric over all steps (Clip-Cov's
# and KL-Cov's shares of tokens, the 80/20 mask's kept share, the adaptive coefficient's range), and for
# the adaptive arm how many steps its entropy spent at or below its target (the bonus acts only there).


# %%
def entropy_regime_lines():
    if REF not in ARMS:
        return [f"- no '{REF}' arm: the regime cannot be checked"]
    ref = ARMS[REF]
    fall = drop(ref, "entropy")
    return [
        f"- {REF}: entropy at step 0 / last quarter ({tail_steps(ref, 'entropy')}) (nats per token): "
        f"{first_value(ref, 'entropy').fmt()} / {F.tail_mean(data, ref, 'entropy').fmt()}",
        "- " + F.verdict(fall, f"{REF}: entropy change, step 0 → last quarter (< 0: it falls)", "nats"),
        "  - per seed: " + per_seed_text(ref, lambda c: drop([c], "entropy")),
        f"- {REF}: groups kept by dynamic sampling per step: {F.tail_mean(data, ref, 'groups/kept', 1.0).fmt()}",
        *F.rise_lines(data, REF, ref),
    ]


def target_of(cells):
    """The adaptive arm's entropy target (objective.entropy_target of its runs' config)."""
    vals = {(data.config(c).get("objective") or {}).get("entropy_target") for c in cells}
    vals.discard(None)
    return float(vals.pop()) if len(vals) == 1 else float("nan")


def adaptive_lines(cells):
    """The coefficient's range and the steps the entropy spent at or below the target."""
    coef = F.seed_series(data, cells, "entropy/coef")
    if not coef:
        return ["- adaptive: 'entropy/coef' not logged (the controller did not run)"]
    target = target_of(cells)
    below = [sum(v <= target for v in s.values()) for s in F.seed_series(data, cells, "entropy")]
    moved = [max(s.values()) - min(s.values()) for s in coef]
    return [
        f"- adaptive: α at the first / last step {F.final([s[min(s)] for s in coef]).fmt()} / "
        f"{F.last_of(coef).fmt()}; its range (max − min) per seed: " + ", ".join(f"{m:.3g}" for m in moved),
        f"  - α moves in {sum(m > 0 for m in moved)} of {len(moved)} seeds; steps with entropy ≤ the target "
        f"{target:g} nats per seed: {below} (of {[len(s) for s in F.seed_series(data, cells, 'entropy')]})",
    ]


def control_lines():
    """Each control's metric over all steps, and in how many seeds it is > 0 at some step."""
    lines = []
    for arm, (key, what) in CONTROL.items():
        if arm not in ARMS:
            continue
        if key == "entropy/coef":
            lines += adaptive_lines(ARMS[arm])
            continue
        series = F.seed_series(data, ARMS[arm], key)
        acting = sum(any(v > 0 for v in s.values()) for s in series)
        lines.append(
            f"- {arm}: {what} (`{key}`), mean over all steps {F.tail_mean(data, ARMS[arm], key, 1.0).fmt()}; "
            f"> 0 at some step in {acting} of {len(series)} seeds"
        )
    return lines


regime = entropy_regime_lines() + control_lines()
print("\n".join(regime))

# %%
fig, axs = plt.subplots(1, 3, figsize=(16, 4.3), layout="constrained")
F.rise_panel(axs[0], data, ARMS)
F.panel(axs[1], data, ARMS, "length/mean", "mean rollout length (tokens)", "train rollout length per arm")
F.panel(
    axs[2],
    data,
    ARMS,
    "groups/kept",
    "groups kept by dynamic sampling (prompts per step)",
    "the batch each arm trains on",
)
F.legend(list(axs))
F.suptitle(fig, data, "regime: does each arm learn, and on what batch?")
F.save(fig, data, "regime")

# %% [markdown]
# ## Each control's own activity over training
# One panel per control, its arm alone: the metric the objective logs of itself. Then the adaptive arm's
# entropy against its target (dashed): the bonus acts only at steps at or below it. Last, the share of
# tokens the PPO upper clip zeroes in each arm (clip_cov's bound is 0.2, the others' 0.28).


# %%
def control_panel(ax, arm):
    key, what = CONTROL[arm]
    if arm not in ARMS:
        F.note(ax, f"no '{arm}' arm in this study")
        ax.set_title(f"{arm}: {key}")
        return
    F.panel(ax, data, {arm: ARMS[arm]}, key, what, f"{arm}: `{key}` (its control acting)")


def target_panel(ax):
    if "adaptive" not in ARMS:
        F.note(ax, "no 'adaptive' arm in this study")
        return
    groups = {a: ARMS[a] for a in ("adaptive", REF) if a in ARMS}
    F.panel(ax, data, groups, "entropy", "policy entropy on the rollout tokens (nats per token)", "")
    target = target_of(ARMS["adaptive"])
    ax.axhline(target, color="k", ls="--", lw=1, label=f"adaptive's target {target:g} nats")
    ax.set_title("adaptive: entropy vs its target (bonus on at or below it)")


fig, axs = plt.subplots(2, 3, figsize=(17, 8.6), layout="constrained")
axs = list(axs.flat)
for ax, arm in zip(axs[:4], CONTROL):
    control_panel(ax, arm)
target_panel(axs[4])
F.panel(
    axs[5],
    data,
    ARMS,
    "clip/frac_high",
    "share of tokens clipped at 1 + ε_high (A > 0)",
    "the PPO upper clip per arm (kl_cov has none)",
)
for ax in axs:
    F.legend(ax)
F.suptitle(fig, data, "each control's own metric over training (its arm alone)")
F.save(fig, data, "controls")

# %% [markdown]
# ## Entropy over training, and each arm against clip_higher
# Left: entropy per arm. Middle: arm minus clip_higher, same seed (the step-0 batch is the same, so the
# gap starts near 0; > 0: the control keeps more entropy). Right: the accuracy of the training batch;
# under dynamic sampling that batch holds only the groups it kept (some but not all answers right), so
# it is not the policy's accuracy: held-out pass@1 (next section) says whether arms are compared at
# matched accuracy.

# %%
fig, axs = plt.subplots(1, 3, figsize=(17, 4.5), layout="constrained")
F.panel(axs[0], data, ARMS, "entropy", "policy entropy on the rollout tokens (nats per token)", "entropy per arm")
axs[0].set_ylim(bottom=0)
F.paired_difference_panel(
    axs[1],
    data,
    ARMS,
    OTHERS,
    REF,
    "entropy",
    "entropy difference (nats per token, same seed)",
    f"entropy, each arm minus {REF} (> 0: keeps more)",
    missing=f"needs the arm '{REF}' and another",
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
F.suptitle(fig, data, "entropy per arm, and each control minus clip-higher (DAPO 0.2 / 0.28)")
F.save(fig, data, "entropy")

# %% [markdown]
# ## Held-out pass@1 and pass@k at the last eval
# Top: each arm's held-out pass@1 and pass@k (k = the largest of eval.ks: 8 at the cpu scale) at the
# last in-loop eval, one point per seed (the same prompts and sampling seed in every run), the mean as a
# bar. Bottom: each arm minus clip_higher per seed, prompt by prompt (`harness compare`, clip_higher as
# A): the difference and its paired bootstrap 95% interval over prompts.


# %%
def compare_seed(arm_cell, ref_cell):
    """harness compare (ref as A, arm as B) at the reference's last saved eval, or None when it is refused (an
    unfinished arm lacks that eval: never compared at an earlier step)."""
    steps = saved_evals(data.run_dir(ref_cell))
    try:
        return compare_runs(data.run_dir(ref_cell), data.run_dir(arm_cell), step=max(steps, default=None), ks=KS)
    except (ConfigError, FileNotFoundError, KeyError) as err:
        print(f"compare {arm_cell['id']} vs {ref_cell['id']}: {err}")
        return None


def comparisons():
    """arm -> [(seed, compare_runs result or None)] against the same seed of the reference arm."""
    if REF not in ARMS:
        return {}
    ref = {c.get("seed"): c for c in ARMS[REF]}
    return {
        arm: [(c.get("seed"), compare_seed(c, ref[c.get("seed")])) for c in ARMS[arm] if c.get("seed") in ref]
        for arm in OTHERS
    }


CMP = comparisons()


def final_points(ax, key, ylabel):
    """Per arm: each seed's value at the last eval (points) and their mean (a bar)."""
    for x, (arm, cells) in enumerate(ARMS.items()):
        vals = [s[max(s)] for s in F.seed_series(data, cells, key)]
        if vals:
            ax.bar(x, sum(vals) / len(vals), color=data.color(arm), alpha=0.3, width=0.6)
            ax.plot([x] * len(vals), vals, data.marker(arm), color=data.color(arm), mfc="none", ms=6)
    ax.set_xticks(range(len(ARMS)), list(ARMS), rotation=20)
    ax.set_ylim(bottom=0)  # a fraction of prompts
    F.record(ax, "points: per-seed values; bar: mean over seeds")
    ax.set_ylabel(ylabel)
    ax.set_title(f"held-out {key.split('/')[-1].replace('_at_', '@')} at the last eval (points: seeds; bar: mean)")


def compare_points(ax, k):
    """Per arm and seed: pass@k arm − clip_higher with its paired bootstrap interval over prompts."""
    ys = []
    for x, arm in enumerate(OTHERS):
        got = [(s, r["metrics"][f"pass_at_{k}"]) for s, r in CMP.get(arm, []) if r]
        for j, (_, m) in enumerate(got):
            xx = x + (j - (len(got) - 1) / 2) * 0.15
            yerr = F.clipped_yerr([m["delta"]], [m["lo"]], [m["hi"]], (-1.0, 1.0))  # a pass@k difference
            ax.errorbar([xx], [m["delta"]], yerr=yerr, fmt=data.marker(arm), color=data.color(arm), capsize=3)
            ys += [m["delta"] - yerr[0][0], m["delta"] + yerr[1][0]]
    if not ys:
        F.note(ax, f"no paired held-out comparison against '{REF}'")
    else:
        F.record(ax, "one point per seed, bar: paired bootstrap 95% interval over prompts")
    F.fit_gap(ax, ys)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(range(len(OTHERS)), OTHERS, rotation=20)
    ax.set_ylabel(f"held-out pass@{k}, arm − {REF}\n(same prompts; bootstrap 95% CI)")
    ax.set_title(f"pass@{k}, arm − {REF}: one point per seed (left to right: seeds {seeds_text(ARMS.get(REF, []))})")


fig, axs = plt.subplots(2, 2, figsize=(13, 8.6), layout="constrained")
axs = list(axs.flat)
final_points(axs[0], "eval/pass_at_1", "held-out pass@1 (fraction of prompts, unbiased)")
final_points(axs[1], f"eval/pass_at_{KBIG}", f"held-out pass@{KBIG} (fraction of prompts, unbiased)")
compare_points(axs[2], 1)
compare_points(axs[3], KBIG)
F.suptitle(fig, data, f"held-out pass@1 and pass@{KBIG} at the last eval, and each arm against {REF}")
F.save(fig, data, "pass_at_k")

# %% [markdown]
# ## Numbers: per arm, with 95% t-intervals over seeds

# %%
rows = []
for arm, cells in ARMS.items():
    key = CONTROL.get(arm, (None,))[0]
    rows.append(
        [
            arm,
            first_value(cells, "entropy").fmt(),
            F.tail_mean(data, cells, "entropy").fmt(),
            drop(cells, "entropy").fmt(),
            F.tail_mean(data, cells, key, 1.0).fmt() + f" (`{key}`)" if key else "—",
            F.tail_mean(data, cells, "reward/accuracy").fmt(),
            F.last_value(data, cells, "eval/pass_at_1").fmt(),
            F.last_value(data, cells, f"eval/pass_at_{KBIG}").fmt(),
        ]
    )
per_arm = F.markdown_table(
    [
        "arm",
        "entropy step 0 (nats)",
        "entropy last quarter",
        "change (last quarter − step 0)",
        "control's metric (all steps)",
        "kept groups' accuracy (last quarter)",
        "held-out pass@1, last eval",
        f"held-out pass@{KBIG}, last eval",
    ],
    rows,
)

# %% [markdown]
# ## Each arm against clip_higher, same seed
# Per metric: the arm's and clip_higher's means, the paired difference with its 95% t-interval over the
# seeds, each seed's difference, and the verdict (appears when the interval excludes 0).

# %%
PAIRED = [  # (metric, how a seed's value is read, unit, what it is)
    ("entropy", F.tail_of, "nats", "entropy, last quarter of steps"),
    ("eval/pass_at_1", F.last_of, "", "held-out pass@1 at the last eval"),
    (f"eval/pass_at_{KBIG}", F.last_of, "", f"held-out pass@{KBIG} at the last eval"),
    ("reward/accuracy", F.tail_of, "", "kept groups' accuracy, last quarter (not the policy's accuracy)"),
]


def paired_rows(key, read):
    rows, verdicts = [], []
    for arm in OTHERS:
        d = read(F.paired_series(data, ARMS[arm], ARMS[REF], key))
        a, r = read(F.seed_series(data, ARMS[arm], key)), read(F.seed_series(data, ARMS[REF], key))
        seeds = per_seed_text(ARMS[arm], lambda c: read(F.paired_series(data, [c], ARMS[REF], key)))
        ci = f"{d.mean:+.3f} [{d.mean - d.half:+.3f}, {d.mean + d.half:+.3f}]" if d.n > 1 else d.fmt()
        rows.append([arm, a.fmt(), r.fmt(), ci, seeds])
        verdicts.append(d)
    return rows, verdicts


def compare_rows():
    """Per arm and seed: harness compare's pass@1 and pass@k, arm − clip_higher, bootstrap over prompts."""
    rows = []
    for arm, got in CMP.items():
        for seed, r in got:
            if not r:
                rows.append([arm, str(seed), "refused", "refused", "—"])
                continue
            cells = [
                f"{m['delta']:+.3f} [{m['lo']:+.3f}, {m['hi']:+.3f}]"
                for m in (r["metrics"][f"pass_at_{k}"] for k in (1, KBIG))
            ]
            rows.append([arm, str(seed), *cells, f"step {r['step']}, {r['prompts']} prompts x {r['n_samples']}"])
    return rows


sections, verdict_lines = [], []
for key, read, unit, what in PAIRED if REF in ARMS else []:
    rows, ds = paired_rows(key, read)
    head = ["arm", "the arm", REF, f"arm − {REF} (same seed, 95% t-interval)", "per seed (seed: difference)"]
    sections += [f"### {what}", "", F.markdown_table(head, rows), ""]
    verdict_lines += ["- " + F.verdict(d, f"{what}, {arm} − {REF}", unit) for arm, d in zip(OTHERS, ds)]
cmp_table = F.markdown_table(
    ["arm", "seed", f"pass@1, arm − {REF} [bootstrap 95%]", f"pass@{KBIG}, arm − {REF}", "eval"], compare_rows()
)
print("\n".join(verdict_lines))

# %%
lines = [
    f"# {data.name} ({data.scale}): entropy controls against entropy collapse",
    "",
    "## Regime (reference arm alone)",
    "",
    *regime,
    "",
    "## Training",
    "",
    f"{len(data.cells)} of {len(data.all_cells)} cells finished"
    + (f" (left out, unfinished: {', '.join(UNFINISHED)})" if UNFINISHED else "")
    + f"; {F.seeds_label(data.n_seeds)} per arm. Last quarter = each seed's mean over the "
    f"last quarter of its steps (here {tail_steps(data.cells, 'entropy')}); ± = 95% t-interval half-width.",
    "",
    per_arm,
    "",
    "Does each arm learn? (paired rise of held-out pass@1, first → last eval, bootstrap 95% over prompts)",
    "",
    *[line for arm in OTHERS for line in F.rise_lines(data, arm, ARMS[arm])],
    "",
    f"## Each arm against {REF} (same seed)",
    "",
    *sections,
    f"### Held-out pass@k prompt by prompt (`harness compare`, {REF} as A)",
    "",
    cmp_table,
    "",
    "## Verdicts (the papers' effect: an arm − clip_higher > 0 in entropy and pass@k)",
    "",
    *verdict_lines,
]
lines += F.no_signal_lines(data, ARMS)
if data.scale == "smoke":
    lines += ["", "Smoke scale: 2 steps and 1 seed check the wiring only; no effect can be read from it."]
F.write_summary(data, "\n".join(lines))
