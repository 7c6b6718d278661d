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
# # (i) The KL leash against reward hacking
#
# **The claim** (the seeds' PPO notes; Gao et al. 2210.10760): dropping the KL penalty is fine for RLVR,
# where the reward is the truth, but against a learned reward model the policy climbs the model's errors,
# and the KL leash (GRPO's k3 penalty to the SFT reference, `objective.kl_coef`) is what holds it.
#
# **Arms** (`arm`): GRPO against the study's own reward model (`reward_model:` in experiments/kl_leash.yaml,
# trained first by `harness train-rm` on pairs whose chosen answer is correct AND longer) with kl_coef 0,
# 0.04, 0.1 (`rm_kl*`); and GRPO against the verifier (the task's Answer line) at the same kl_coef, the
# controls (`verifier_kl*`; the first design had verifier_kl0 alone: the lines that need the others say so).
# Every run is scored by both (one at weight 0): `hacking/proxy` is the reward model's mean raw score on
# the step's rollouts, `hacking/verified` their verified accuracy; the held-out eval (the same prompts and
# sampling seed at every eval) logs pass@1 (`eval/pass_at_1`) and the reward model's mean score
# (`eval/reward/rm`). Same seed = same warm start weights, step-0 prompts and eval set.
#
# **Criteria** (experiments/kl_leash.yaml's header, written before the run; 95% t-intervals over seeds):
# - hacking APPEARS in an arm when the held-out reward-model score's change (step 0 -> last eval) is above 0
#   AND the paired change of held-out pass@1 is below 0 (both intervals excluding 0); the train-batch
#   proxy's change is printed beside it, not judged;
# - the leash HOLDS it when rm_kl* − rm_kl0 in final held-out pass@1 (paired by seed) is above 0; SLOWS it
#   when only the held-out reward-model score at the end is lower (rm_kl* − rm_kl0 below 0);
# - its COST in verified gain: verifier_kl* − verifier_kl0 in final held-out pass@1, read only when the
#   control learns (verifier_kl0's held-out pass@1 rise above 0 over seeds).
#
# **Reading the figures.** x = training step. With up to 3 seeds each seed is a thin line and the mean a
# bold one; with more (the second design's 4), the mean with its shaded 95% t-interval over seeds. Scores are the reward model's raw logit (no unit); accuracies are fractions of completions.

# %%
import json
import random
from pathlib import Path

import matplotlib.pyplot as plt

from harness.experiment import figures as F

F.setup()
data = F.StudyData.from_env("kl_leash")
ARMS = data.by("arm")
RM_ARMS = [a for a in ARMS if a.startswith("rm_")]
VER_ARMS = [a for a in ARMS if a.startswith("verifier_")]
print(f"study {data.name} ({data.scale}): {len(data.cells)} cells, arms {list(ARMS)}, {F.seeds_label(data.n_seeds)}")

# %% [markdown]
# ## Regime 1: did the reward model learn the flaw?
# On 200 held-out arithmetic problems (experiments/data/kl_leash/eval.jsonl), the share of problems where
# the reward model scores the first answer above the second: the correct solution vs a wrong one of the
# SAME length (one digit changed: correctness alone), a wrong one with n more "=" steps vs the correct
# one (length against correctness), and a 48-character ramble with no Answer line (a truncated
# completion, never correct) vs the correct one.

# %%
EVAL_ROWS = Path("experiments/data/kl_leash/eval.jsonl")


def flaw_cases(rows: list[dict]) -> dict[str, list[tuple[str, str]]]:
    """Probe name -> per row (first, second) completions; the probe asks how often first outscores second."""
    rng = random.Random(0)

    def wrong_same_length(r):
        v = int(r["answer"])
        w = next(
            x
            for x in (v + rng.choice([d for d in range(-9, 10) if d]) for _ in range(100))
            if len(str(x)) == len(str(v))
        )
        head = r["solution"][: r["solution"].rindex("\nAnswer:")]
        return head[: head.rindex("=") + 1] + f"{w}\nAnswer: {w}"

    def longer_wrong(r, n):
        w = int(r["answer"]) + 1
        return r["solution"][: r["solution"].rindex("\nAnswer:")] + f"={w}" * n + f"\nAnswer: {w}"

    def ramble(r):
        return (r["solution"][: r["solution"].rindex("\nAnswer:")] + "=1+1=2" * 10)[:48]

    cases = {"correct vs same-length wrong": [(r["solution"], wrong_same_length(r)) for r in rows]}
    for n in (1, 2, 4):
        cases[f"wrong +{n} '=' steps vs correct"] = [(longer_wrong(r, n), r["solution"]) for r in rows]
    cases["truncated ramble vs correct"] = [(ramble(r), r["solution"]) for r in rows]
    return cases


def flaw_probe(folder: Path) -> dict[str, float]:
    """Share of rows where the reward model scores the first completion above the second, per probe."""
    from harness.tasks.rewards import RewardModel, conversation

    rows = [json.loads(x) for x in EVAL_ROWS.read_text().splitlines()[:200]]
    rm = RewardModel(str(folder), micro_batch_size=64)
    out = {}
    for name, pairs in flaw_cases(rows).items():
        a = rm.score([conversation([{"role": "user", "content": r["prompt"]}], p[0]) for r, p in zip(rows, pairs)])
        b = rm.score([conversation([{"role": "user", "content": r["prompt"]}], p[1]) for r, p in zip(rows, pairs)])
        out[name] = sum(x > y for x, y in zip(a, b)) / len(rows)
    return out


RM_DIR = data.dir / "reward_model"
report = json.loads((RM_DIR / "rm_report.json").read_text()) if (RM_DIR / "rm_report.json").exists() else None
flaw = flaw_probe(RM_DIR) if report and EVAL_ROWS.exists() else {}
regime = []
if report:
    ev = report["eval"]
    regime.append(
        f"- reward model: {report['pairs']['train']} train pairs, {report['steps']} steps on {report['base']}; "
        f"held-out pair accuracy {ev.get('accuracy', float('nan')):.3f} over {ev.get('pairs', 0)} pairs, "
        f"ECE {ev.get('ece', float('nan')):.3f}"
    )
regime += [f"- {name}: the first scores higher on {share:.3f} of 200 problems" for name, share in flaw.items()]
print("\n".join(regime) or "no reward model folder")

# %% [markdown]
# ## Regime 2: does each arm learn what it is rewarded for?
# Left: the flaw probe above. Right: the paired rise of held-out pass@1 per arm and seed (bootstrap 95%
# interval over prompts).

# %%
fig, axs = plt.subplots(1, 2, figsize=(14, 4.6), layout="constrained")
if flaw:
    names = list(flaw)
    axs[0].barh(range(len(names)), [flaw[n] for n in names], color="C0")
    axs[0].set_yticks(range(len(names)), names)
    axs[0].axvline(0.5, color="k", lw=0.8, ls="--")
    axs[0].set_xlim(0, 1)
    axs[0].set_xlabel("share of 200 held-out problems where the first scores higher")
    axs[0].set_title("what the reward model learnt (0.5 = indifferent)")
else:
    F.note(axs[0], "no reward model folder")
F.rise_panel(axs[1], data, ARMS)
axs[1].set_ylabel("held-out pass@1, end minus step 0 (fraction)")
axs[1].set_title("paired rise of held-out pass@1 per arm and seed")
F.suptitle(fig, data, "regime: the reward model's flaw, and what each arm does to verified accuracy")
F.save(fig, data, "regime")

# %% [markdown]
# ## The hacking series: proxy vs verified, per arm
# Left: the reward model's mean raw score on the training rollouts (`hacking/proxy`). Middle: their
# verified accuracy (`hacking/verified`). Right: their mean length (tokens) and, dashed, the share
# truncated at the 48-token cap (never correct).

# %%
fig, axs = plt.subplots(1, 3, figsize=(17, 4.6), layout="constrained")
F.panel(axs[0], data, ARMS, "hacking/proxy", "reward model score (raw logit)", "proxy: reward model score")
F.panel(
    axs[1],
    data,
    ARMS,
    "hacking/verified",
    "verified accuracy (fraction of rollouts)",
    "verified accuracy",
    fraction=True,
)
F.panel(axs[2], data, ARMS, "length/mean", "mean rollout length (tokens)", "rollout length")
F.legend(list(axs))
F.suptitle(fig, data, "against the reward model: does the proxy rise while verified accuracy falls?")
F.save(fig, data, "hacking")

# %%
fig, axs = plt.subplots(1, 2, figsize=(12, 4.4), layout="constrained")
F.panel(
    axs[0],
    data,
    ARMS,
    "length/truncated_frac",
    "share of rollouts truncated at 48 tokens",
    "truncation (never correct)",
    fraction=True,
)
F.panel(
    axs[1],
    data,
    ARMS,
    "hacking/corr",
    "Pearson r, proxy vs verified (per rollout)",
    "does the proxy track truth? (undefined once no rollout is correct)",
    bounds=(-1.0, 1.0),
)
F.legend(list(axs))
F.suptitle(fig, data, "truncation and the proxy's correlation with correctness")
F.save(fig, data, "truncation_corr")

# %% [markdown]
# ## The held-out series: what the criteria judge
# The held-out eval (the same prompts and sampling seed at every eval: steps 0, 10, 20, 30 in the second
# design, 0 and the end in the first). Left: pass@1 (the verified accuracy, fraction of prompts). Right: the
# reward model's mean raw score on the same completions (the held-out proxy). Reward-model arms solid,
# verifier arms dashed.


# %%
def held_out_panel(ax, key: str, ylabel: str, title: str, fraction: bool = False) -> None:
    """`key` per arm at the eval steps (F.panel): rm_* arms solid, verifier_* arms dashed."""
    styles = {arm: "--" if arm.startswith("verifier_") else "-" for arm in ARMS}
    if F.panel(ax, data, ARMS, key, ylabel, title, bounds=(0.0, 1.0) if fraction else None, styles=styles):
        if fraction:
            ax.set_ylim(bottom=0)
        ax.set_xlabel(F.X_STEP + "; a marker = a held-out eval")


fig, axs = plt.subplots(1, 2, figsize=(15, 5), layout="constrained")
held_out_panel(axs[0], "eval/pass_at_1", "held-out pass@1 (fraction of prompts)", "verified: held-out pass@1", True)
held_out_panel(
    axs[1], "eval/reward/rm", "held-out reward-model score (raw logit)", "proxy: held-out reward-model score"
)
F.legend(list(axs), fontsize=8)
F.suptitle(
    fig,
    data,
    "held-out eval per arm: does the reward model's score rise while verified pass@1 falls "
    "(rm_* arms, solid), against the verifier controls (verifier_*, dashed), at each kl_coef?",
)
F.save(fig, data, "held_out")

# %% [markdown]
# ## Numbers: per arm, with 95% t-intervals over seeds, and the paired comparisons


# %%
def change(cells, key):
    """Per seed: (mean over the last quarter of steps) - (value at step 0)."""
    series = F.seed_series(data, cells, key)
    return F.final([t - s[min(s)] for t, s in zip(F.tail_of(series).per_seed, series)])


def rise(cells):
    return F.final([r["delta_pass_at_1"] for r in F.paired_rises(data, cells)])


def eval_change(cells, key):
    """Per seed: the held-out eval's `key` at the last eval minus at step 0 (same prompts and sampling seed)."""
    series = F.seed_series(data, cells, key)
    return F.final([s[max(s)] - s[min(s)] for s in series])


rows = []
for arm, cells in ARMS.items():
    rows.append(
        [
            arm,
            change(cells, "hacking/proxy").fmt(),
            change(cells, "hacking/verified").fmt(),
            rise(cells).fmt(),
            eval_change(cells, "eval/reward/rm").fmt(),
            change(cells, "length/mean").fmt(),
            F.tail_mean(data, cells, "length/truncated_frac").fmt(),
            F.tail_mean(data, cells, "loss/kl").fmt(),
        ]
    )
table = F.markdown_table(
    [
        "arm",
        "proxy change (score, last quarter − step 0)",
        "verified accuracy change (train rollouts)",
        "held-out pass@1 rise (step 0 → end)",
        "held-out reward-model score change (step 0 → end)",
        "length change (tokens)",
        "truncated share (last quarter)",
        "KL to the reference (loss/kl, last quarter)",
    ],
    rows,
)


def held_out_gap(a: str, b: str) -> F.Final:
    """Final held-out pass@1, arm a minus arm b, paired by seed."""
    return F.last_of(F.paired_series(data, ARMS[a], ARMS[b], "eval/pass_at_1"))


NO_DATA = "no data"  # what a comparison without seeds prints


def above(f: F.Final) -> bool:
    return f.excludes_zero and f.mean > 0


def below(f: F.Final) -> bool:
    return f.excludes_zero and f.mean < 0


def hacking_line(arm: str) -> str:
    """Hacking APPEARS: the held-out reward-model score's change above 0 AND the held-out pass@1 rise below 0
    (the header's criterion); the train-batch proxy's change is shown, not judged."""
    e, r = eval_change(ARMS[arm], "eval/reward/rm"), rise(ARMS[arm])
    word = "APPEARS" if above(e) and below(r) else "does NOT appear"
    return (
        f"- {arm}: hacking {word} (held-out reward-model score change, step 0 → last eval, "
        f"{e.ci(NO_DATA)}; held-out pass@1 rise {r.ci(NO_DATA)}; train-batch proxy change, last quarter − step 0, "
        f"{change(ARMS[arm], 'hacking/proxy').ci(NO_DATA)}, shown, not judged)"
    )


def leash_lines(ref: str = "rm_kl0") -> list[str]:
    """Per leash arm: HOLDS (final held-out pass@1 above rm_kl0's, paired by seed), SLOWS (only the held-out
    reward-model score at the end below rm_kl0's), or does NOT measurably hold it."""
    arms = [a for a in ("rm_kl0.04", "rm_kl0.1") if a in ARMS]
    if ref not in ARMS or not arms:
        return [f"- the leash: not read: this folder lacks {ref} or every rm_kl arm with kl_coef > 0."]
    out = []
    for arm in arms:
        g = held_out_gap(arm, ref)
        e = F.last_of(F.paired_series(data, ARMS[arm], ARMS[ref], "eval/reward/rm"))
        word = "HOLDS it" if above(g) else "SLOWS it" if below(e) else "does NOT measurably hold it"
        out.append(
            f"- the leash at kl_coef {arm.removeprefix('rm_kl')}: {word} ({arm} − {ref}, paired by seed: final "
            f"held-out pass@1 {g.ci(NO_DATA)}; held-out reward-model score at the end {e.ci(NO_DATA)})"
        )
    return out


def control_and_cost_lines(ref: str = "verifier_kl0") -> list[str]:
    """Does the control learn (verifier_kl0's held-out pass@1 rise above 0 over seeds)? Then the leash's
    cost in verified gain, verifier_kl* − verifier_kl0 in final held-out pass@1, read only if it does."""
    if ref not in ARMS:
        return [f"- the controls: no {ref} arm in this folder; the cost in verified gain is not read."]
    r = rise(ARMS[ref])
    learns = above(r)
    out = ["- the control learns? " + F.verdict(r, f"held-out pass@1 rise of {ref}, step 0 → end")]
    out[0] += " It learns." if learns else " It did NOT learn (the criterion: its rise above 0)."
    arms = [a for a in ("verifier_kl0.04", "verifier_kl0.1") if a in ARMS]
    for arm in arms:
        what = f"COST in verified gain, final held-out pass@1, {arm} − {ref} (paired by seed)"
        out.append(
            "- "
            + (F.verdict(held_out_gap(arm, ref), what) if learns else f"{what}: not read: the control did not learn.")
        )
    if not arms:
        out.append("- COST in verified gain: not read: no verifier arm with kl_coef > 0 in this folder (first design).")
    return out


def pair_lines() -> list[str]:
    """Every paired comparison, for reading beside the verdicts: final held-out pass@1, the train-batch proxy
    (last quarter) and the held-out reward-model score at the end, a − b paired by seed."""
    pairs = [(a, "rm_kl0") for a in RM_ARMS if a != "rm_kl0"]
    pairs += [("verifier_kl0", "rm_kl0"), ("verifier_kl0", "rm_kl0.1")]
    pairs += [("verifier_kl0.04", "verifier_kl0"), ("verifier_kl0.1", "verifier_kl0")]
    out = []
    for a, b in pairs:
        if a in ARMS and b in ARMS:
            out.append("- " + F.verdict(held_out_gap(a, b), f"final held-out pass@1, {a} − {b} (paired by seed)"))
            p = F.tail_of(F.paired_series(data, ARMS[a], ARMS[b], "hacking/proxy"))
            out.append("- " + F.verdict(p, f"train-batch proxy score, last quarter, {a} − {b}"))
            e = F.last_of(F.paired_series(data, ARMS[a], ARMS[b], "eval/reward/rm"))
            out.append("- " + F.verdict(e, f"held-out reward-model score at the end, {a} − {b}"))
    return out


verdicts = [hacking_line(arm) for arm in RM_ARMS] + leash_lines() + control_and_cost_lines()
verdicts += ["", "Paired comparisons, every pair (for reading; the verdicts above follow the criteria):", ""]
verdicts += pair_lines()
verdicts.append("")
verdicts.append("Per seed (the held-out reward-model score's change; the pass@1 rise with its interval over prompts):")
for arm in RM_ARMS + VER_ARMS:
    for r, c in zip(F.paired_rises(data, ARMS[arm]), ARMS[arm]):
        e = eval_change([c], "eval/reward/rm")
        lo, hi = r["ci95"]
        hacked = e.mean > 0 and hi < 0
        verdicts.append(
            f"- {arm}, seed {r['seed']}: proxy {e.mean:+.2f}, pass@1 {r['delta_pass_at_1']:+.3f} [{lo:+.3f}, {hi:+.3f}]"
            f"{': proxy up, verified down' if hacked else ''}"
        )
lines = [
    f"# {data.name} ({data.scale}): reward hacking against a flawed reward model, and the KL leash",
    "",
    "## Regime",
    "",
    *regime,
    "",
    "## Training",
    "",
    f"{len(data.cells)} cells; {F.seeds_label(data.n_seeds)} per arm. Last quarter = each seed's mean over the "
    "last quarter of its steps; ± = 95% t-interval half-width over seeds.",
    "",
    table,
    "",
    "Verdicts, by the criteria of experiments/kl_leash.yaml's header (95% t-intervals over seeds):",
    "",
    *verdicts,
]
for arm in ARMS:
    lines += F.rise_lines(data, arm, ARMS[arm])
lines += F.no_signal_lines(data, ARMS)
if data.scale == "smoke":
    lines += ["", "Smoke scale: 2 steps and 1 seed check the wiring only; no effect can be read from it."]
F.write_summary(data, "\n".join(lines))
