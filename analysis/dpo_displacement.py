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
# # (d) Likelihood displacement under DPO, and RPO's NLL term against it
#
# **What the papers showed** (Pal et al. 2402.13228; Razin et al. 2410.08847; RPO: Pang et
# al. 2404.19733). DPO's loss depends on the policy only through the margin
# β·[(log π(y_w) − log π_ref(y_w)) − (log π(y_l) − log π_ref(y_l))]. The margin can grow while
# the log-probability of the CHOSEN answer y_w falls too, as long as the rejected one y_l falls
# faster: probability mass leaves both. This is most likely when y_w and y_l share most of
# their tokens. RPO adds the chosen answer's NLL (per token, `objective.dpo_sft_coef`), which
# holds log π(y_w) up.
#
# **Arms** (`arm`): `dpo` (dpo_sft_coef 0) and `rpo` (dpo_sft_coef 1); `dpo_shift` (DPO-Shift,
# Yang et al. 2502.07599: the rejected log-ratio times λ = 0.75 in the loss, `objective.dpo_shift_lambda`)
# weakens the push on the rejected answer instead of adding an NLL term. Every arm
# other than `dpo` is compared with `dpo`, paired by seed. An arm whose cells were not run in
# this folder (rpo in a rerun of dpo and dpo_shift alone) is named and left out. Offline DPO: one fixed
# set of pairs sampled from the warm start (the same per seed in both arms), 3 epochs; the
# log-probs of ALL pairs are measured at every eval (`eval/pairs/*`), so a curve follows the
# same answers over training.
#
# **Reading the figures.** Log-probabilities are sums over the answer's tokens (nats per
# answer); the curves show their change since step 0 (the warm start = the reference). With
# 3 seeds each seed is a thin line and the mean a bold one.

# %%
import difflib
import json

import matplotlib.pyplot as plt

from harness.experiment import figures as F

F.setup()
data = F.StudyData.from_env("dpo_displacement")
ARM_AXIS = "arm" if "arm" in data.study.get("axes", []) else "objective.dpo_sft_coef"
ALL_ARMS = data.by(ARM_AXIS)
for _arm in ALL_ARMS:
    data.color(_arm)  # colours by the study's arm order, the same whichever arms were run
NOT_RUN = sorted(c["id"] for c in data.drop_incomplete("metrics.jsonl"))  # cells.json lists them, no run folder
RAN = data.by(ARM_AXIS)
ARMS = {a: RAN[a] for a in ALL_ARMS if a in RAN}  # the arms run, in the study's order
MISSING = [a for a in ALL_ARMS if a not in ARMS]
BASE, RPO = "dpo", "rpo"
FIXES = [a for a in ARMS if a != BASE]  # each fix against plain DPO, paired by seed (rpo first: the reported one)
KEYS = {"chosen": "eval/pairs/logps_chosen", "rejected": "eval/pairs/logps_rejected"}
MARGIN, PASS1 = "eval/pairs/margin", "eval/pass_at_1"
print(
    f"study {data.name} ({data.scale}): {len(data.all_cells)} cells, arms {list(ARMS)}, {F.seeds_label(data.n_seeds)}"
)
not_run_line = (
    f"Not run in this folder ({len(NOT_RUN)} of {len(data.all_cells)} cells, left out): {', '.join(NOT_RUN)}"
    if NOT_RUN
    else ""
)
print(not_run_line)


def change_series(cells, key):
    """Per seed: {step: value - value at the first logged step} (the change since the warm start)."""
    out = []
    for s in F.seed_series(data, cells, key):
        s0 = s[min(s)]
        out.append({st: v - s0 for st, v in s.items()})
    return out


def common_steps(series):
    """The series cut to the steps every seed has: runs end at different steps (the pair count, and
    so the steps per epoch, differs by seed), and a mean over fewer seeds at the end would jump."""
    if not series:
        return series
    keep = set.intersection(*(set(s) for s in series))
    return [{st: v for st, v in s.items() if st in keep} for s in series]


def last_change(cells, key):
    """Per seed: the change of `key` from the first to the last logged step; mean and 95% t-interval."""
    return F.last_of(change_series(cells, key))


# %% [markdown]
# ## Regime: are the pairs alike, and does the margin grow?
# The mechanism needs chosen and rejected answers that share most of their tokens. Measured on
# each run's pairs (pairs.jsonl, sampled from the warm start): the similarity of y_w and y_l
# (difflib's ratio 2M / (|y_w| + |y_l|), M = characters in matching blocks; characters =
# tokens for the tiny models' character tokenizer), the common prefix as a share of y_w's
# length, and the pairs' count. Then, on `dpo` alone, whether DPO does what it is for: the
# margin grows on the pairs it trains on; and held-out pass@1 before and after.


# %%
def pair_stats(cell):
    path = data.run_dir(cell) / "pairs.jsonl"
    if not path.exists():
        return None
    shares, sims, n = [], [], 0
    for line in path.read_text().splitlines():
        p = json.loads(line)
        chosen, rejected = p["chosen"], p["rejected"]
        common = next((i for i, (a, b) in enumerate(zip(chosen, rejected)) if a != b), min(len(chosen), len(rejected)))
        shares.append(common / max(len(chosen), 1))
        sims.append(difflib.SequenceMatcher(None, chosen, rejected, autojunk=False).ratio())
        n += 1
    return {"n": n, "shares": shares, "sims": sims}


STATS = {c["id"]: pair_stats(c) for c in data.all_cells}
all_sims = [x for s in STATS.values() if s for x in s["sims"]]
regime = []
if all_sims:

    def per_run(what):
        return F.final([sum(s[what]) / len(s[what]) for s in STATS.values() if s and s[what]])

    regime.append(
        f"- similarity of chosen and rejected (difflib ratio, mean over pairs, per run): {per_run('sims').fmt()}"
    )
    regime.append(
        f"- common prefix, share of the chosen answer's length (mean over pairs, per run): {per_run('shares').fmt()}"
    )
    regime.append(f"- pairs per run: {F.final([s['n'] for s in STATS.values() if s]).fmt()}")
if BASE in ARMS:
    regime.append(
        f"- {BASE}: margin at the last eval (β × nats): {F.last_value(data, ARMS[BASE], 'eval/pairs/margin').fmt()}"
    )
    regime += F.rise_lines(data, BASE, ARMS[BASE])
print("\n".join(regime))

# %%
fig, axs = plt.subplots(1, 2, figsize=(12, 4.3), layout="constrained")
if all_sims:
    axs[0].hist(all_sims, bins=[i / 20 for i in range(21)], color="0.4")
    axs[0].set_xlim(0, 1)
    axs[0].set_xlabel("similarity of chosen and rejected answer (difflib ratio: 1 = identical, 0 = nothing shared)")
    axs[0].set_ylabel("pairs (all runs)")
    axs[0].set_title("how alike are the pairs?")
else:
    F.note(axs[0], "no pairs.jsonl in the run folders")
F.rise_panel(axs[1], data, ARMS)
F.suptitle(fig, data, "regime: alike pairs, and held-out pass@1 from the warm start to the end")
F.save(fig, data, "regime")

# %% [markdown]
# ## The displacement: log-probs of the chosen and rejected answers, and the margin
# Left and middle: the change since step 0 of the mean log-probability of the chosen (solid)
# and rejected (dashed) answers, per arm, on the SAME pairs throughout. Displacement = the
# chosen curve falls below 0 while the margin (right) grows. The curves stop at the last eval
# every seed has (the runs' lengths differ by a few steps: the pair count differs by seed); the
# numbers below use each seed's own last eval.

# %%
PANELS = [a for a in [BASE, RPO] + [a for a in FIXES if a != RPO] if a in ARMS] or [BASE]  # one per arm run
fig, axs = plt.subplots(1, len(PANELS) + 1, figsize=(16 * (len(PANELS) + 1) / 3, 4.5), layout="constrained")
for ax, arm in zip(axs[:-1], PANELS):
    if arm not in ARMS:
        F.note(ax, f"arm '{arm}' not run in this folder")
        continue
    for which, style in (("chosen", "-"), ("rejected", "--")):
        cur = F.combine(common_steps(change_series(ARMS[arm], KEYS[which])))
        F.plot_curve(
            ax,
            cur,
            f"{which} answers",
            "C2" if which == "chosen" else "C3",
            style=style,
            marker="o" if which == "chosen" else "s",
        )
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlabel(F.X_STEP + "; 3 epochs over the pairs")
    ax.set_ylabel("change of mean log π(answer) since step 0\n(nats per answer)")
    ax.set_title(f"{arm}: log-prob of chosen and rejected answers")
    F.integer_steps(ax)
    ax.legend(loc="lower left")
lo = min(ax.get_ylim()[0] for ax in axs[:-1])
hi = max(ax.get_ylim()[1] for ax in axs[:-1])
for ax in axs[:-1]:
    ax.set_ylim(lo, hi)  # the arms on one scale
for arm, cells in ARMS.items():
    F.plot_curve(
        axs[-1],
        F.combine(common_steps(F.seed_series(data, cells, "eval/pairs/margin"))),
        arm,
        data.color(arm),
        marker=data.marker(arm),
    )
axs[-1].axhline(0, color="k", lw=0.8)
axs[-1].set_xlabel(F.X_STEP)
axs[-1].set_ylabel("DPO margin β·[Δlog π(y_w) − Δlog π(y_l)]\n(mean over pairs; β × nats)")
axs[-1].set_title("the margin DPO maximises, per arm")
F.integer_steps(axs[-1])
F.legend(axs[-1])
absent = f" ({', '.join(MISSING)} not run here)" if MISSING else ""
F.suptitle(
    fig,
    data,
    f"{' vs '.join(PANELS)}{absent}: log-probs of the same chosen and rejected answers while the margin grows",
)
F.save(fig, data, "logps")

# %% [markdown]
# ## Each fix minus DPO, paired by seed
# Same seed = same pairs, same batches: the per-seed difference carries only what the fix
# changes (rpo: the NLL term; dpo_shift: λ on the rejected term). Left to right: the change of
# the chosen and of the rejected answers' log-prob, the margin (every arm's `eval/pairs/margin`
# is DPO's, at λ = 1), and held-out pass@1 of the in-loop evals (the same prompts per seed).

# %%
PAIRED = (
    (KEYS["chosen"], "log π(chosen answer)", "nats per answer"),
    (KEYS["rejected"], "log π(rejected answer)", "nats per answer"),
    (MARGIN, "DPO margin", "β × nats"),
    (PASS1, "held-out pass@1 (in-loop eval)", "share of samples"),
)
fig, axs = plt.subplots(1, len(PAIRED), figsize=(22, 4.3), layout="constrained")
drawn = False
fixes = FIXES if BASE in ARMS else []
who = " / ".join(fixes) if fixes else RPO
for ax, (key, what, unit) in zip(axs, PAIRED):
    for arm in fixes:
        cur = F.combine(common_steps(F.paired_series(data, ARMS[arm], ARMS[BASE], key)))  # equal at step 0 per seed
        rng = F.difference_range(F.metric_range(key))  # a pass@1 difference stays in [-1, 1]
        F.plot_curve(ax, cur, f"{arm} − {BASE}", data.color(arm), marker=data.marker(arm), bounds=rng)
        drawn |= bool(cur)
    if fixes:
        F.fit_gap(ax, F.drawn_y(ax))  # a difference: the axis fits the curves, their bands and 0
        ax.axhline(0, color="k", lw=0.8)
        ax.set_xlabel(F.X_STEP)
        ax.set_ylabel(f"{what}, {who} minus {BASE}\n({unit}, same seed)")
        ax.set_title(f"{what}: {who} − {BASE}")
        F.integer_steps(ax)
if drawn:
    F.legend(list(axs))
else:
    F.note(axs[0], f"needs arm '{BASE}' and a fix ('{RPO}', ...) run with a common seed")
absent = f" ({', '.join(MISSING)} not run here)" if MISSING else ""
F.suptitle(fig, data, f"what each fix changes: {who} minus {BASE}, paired by seed{absent}")
F.save(fig, data, "fixes_minus_dpo")


# %% [markdown]
# ## Numbers: per arm, with 95% t-intervals over seeds
# Then each fix minus `dpo` paired by seed, with the per-seed values, and for DPO-Shift the
# verdict by the criteria set in experiments/dpo_displacement.yaml before its cells ran.


# %%
def final_pass1_diff(cells_a, cells_b):
    """Per seed: final held-out pass@1 (eval.json) of a minus b; mean and 95% t-interval."""
    return F.final(
        [
            data.final_eval(a).get(PASS1, float("nan")) - data.final_eval(b).get(PASS1, float("nan"))
            for a in cells_a
            for b in cells_b
            if a.get("seed") == b.get("seed")
        ]
    )


def paired_end(arm):
    """{row name: Final of arm minus dpo per seed}: the chosen and rejected log-prob and the margin
    at each seed's last eval, and final held-out pass@1."""
    out = {
        f"log π({w}) at the end (nats)": F.last_of(F.paired_series(data, ARMS[arm], ARMS[BASE], KEYS[w])) for w in KEYS
    }
    out["margin at the end (β × nats)"] = F.last_of(F.paired_series(data, ARMS[arm], ARMS[BASE], MARGIN))
    out["final held-out pass@1 (eval.json)"] = final_pass1_diff(ARMS[arm], ARMS[BASE])
    return out


def keeps_chosen(own, paired):
    """The criterion set before the dpo_shift cells ran (experiments/dpo_displacement.yaml)."""
    if paired.n < 2 or own.n < 2:
        return "cannot tell (fewer than 2 seeds: no interval)"
    if paired.mean - paired.half <= 0:
        return "DOES NOT APPEAR (the paired interval reaches 0 or below: the chosen log-prob does not fall less than under dpo)"
    if own.mean + own.half < 0:
        return "PARTIAL: falls less than under dpo (paired interval above 0), but still falls (own interval below 0)"
    if own.mean >= 0:
        return "APPEARS (falls less than under dpo, and its own change has mean >= 0, interval not wholly below 0)"
    return "PARTIAL: falls less than under dpo; its own change has mean < 0 with an interval reaching 0"


rows = []
for arm, cells in ARMS.items():
    rows.append(
        [
            arm,
            last_change(cells, KEYS["chosen"]).fmt(),
            last_change(cells, KEYS["rejected"]).fmt(),
            F.last_value(data, cells, MARGIN).fmt(),
            F.eval_json_value(data, cells, PASS1).fmt(),
        ]
    )
table = F.markdown_table(
    [
        "arm",
        "Δ log π(chosen), step 0 → end (nats)",
        "Δ log π(rejected) (nats)",
        "margin at the end (β × nats)",
        "final held-out pass@1 (eval.json)",
    ],
    rows,
)
seeds = sorted({c.get("seed") for cells in ARMS.values() for c in cells})
paired_rows = []
for arm in FIXES if BASE in ARMS else []:
    for what, f in paired_end(arm).items():
        paired_rows.append([f"{arm} − {BASE}", what, " / ".join(f"{v:+.3g}" for v in f.per_seed), f.ci()])
paired_table = F.markdown_table(
    ["difference", "quantity", "per seed (seeds in order)", "mean [95% t-interval]"], paired_rows
)
lines = [
    f"# {data.name} ({data.scale}): log-probs of chosen and rejected answers, DPO and its fixes",
    "",
    *([not_run_line, ""] if NOT_RUN else []),
    "## Regime (reference arm alone)",
    "",
    *regime,
    "",
    "## Training",
    "",
    f"{sum(len(c) for c in ARMS.values())} cells run; {F.seeds_label(data.n_seeds)} per arm; ± = 95% t-interval half-width.",
    "",
    table,
    "",
    *[x for arm, cells in ARMS.items() if arm != BASE for x in F.rise_lines(data, arm, cells)],
    "",
    f"Each fix minus {BASE}, paired by seed (seeds {', '.join(str(x) for x in seeds)}; a seed without both arms is left out):",
    "",
    paired_table if paired_rows else f"(needs arm '{BASE}' and a fix run with a common seed)",
    "",
    "Displacement (the chosen answers' log-prob falls while the margin grows):",
    "",
]
for arm, cells in ARMS.items():
    lines.append(
        "- " + F.verdict(last_change(cells, KEYS["chosen"]), f"{arm}: change of log π(chosen), step 0 → end", "nats")
    )
    lines.append("- " + F.verdict(F.last_value(data, cells, MARGIN), f"{arm}: margin at the end", "β × nats"))
for arm in FIXES if BASE in ARMS else []:
    ends = paired_end(arm)
    for what in KEYS:
        lines.append(
            "- "
            + F.verdict(
                ends[f"log π({what}) at the end (nats)"],
                f"{arm} − {BASE}, log π({what}) at the end (same seed)",
                "nats",
            )
        )
    if arm != RPO:  # the margin's cost (DPO-Shift's trade-off); rpo's lines stay the report's
        lines.append(
            "- "
            + F.verdict(
                ends["margin at the end (β × nats)"], f"{arm} − {BASE}, margin at the end (same seed)", "β × nats"
            )
        )
    lines.append(
        "- "
        + F.verdict(ends["final held-out pass@1 (eval.json)"], f"{arm} − {BASE}, final held-out pass@1 (same seed)")
    )
    if arm != RPO:
        own = last_change(ARMS[arm], KEYS["chosen"])
        lines.append(
            f"- {arm}: keeps the chosen log-prob from falling: "
            + keeps_chosen(own, ends["log π(chosen) at the end (nats)"])
        )
if data.scale == "smoke":
    lines += ["", "Smoke scale: a few steps and 1 seed check the wiring only; no effect can be read from it."]
F.write_summary(data, "\n".join(lines))
