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
# # (f) pass@k against k: the warm start vs the RL policy trained from it
#
# **What the paper showed** (Yue et al., arXiv 2504.13837, Fig. 1). RL-trained models beat
# their base model at pass@1 but the base catches up as k grows and overtakes it at large k:
# RL sharpens the distribution toward answers the base already samples; it does not add
# answers the base never finds.
#
# **Design** (experiments/passk.yaml). One grpo policy per seed (the smoke regime, 20 steps).
# After training, the final policy and the warm start are sampled on the same held-out prompts
# with the same sampling seed, 64 samples per prompt (`harness eval --vs-initial`), and
# pass@k for k = 1, 2, ..., 64 is the unbiased estimator 1 − C(n−c, k)/C(n, k) (Chen et al.
# 2107.03374) averaged over prompts. The difference RL − warm start per prompt has a
# percentile-bootstrap 95% interval over prompts at every k, per seed.
#
# **Reading the figures.** x = k on a log2 axis; pass@k is a fraction of prompts in [0, 1].
# The warm start is dashed, the RL policy solid; each seed is a thin line and the mean of the
# seeds a bold one.

# %%
import matplotlib.pyplot as plt

from harness.experiment import figures as F

F.setup()
data = F.StudyData.from_env("passk")
CELLS = [c for c in data.cells if data.final_eval(c).get("initial")]
BUCKETS = ("easy", "medium", "hard")
print(f"study {data.name} ({data.scale}): {len(data.cells)} cells, {len(CELLS)} with a paired final eval")


def ks_of(ev):
    return sorted(int(k.split("_")[-1]) for k in ev if k.startswith("eval/pass_at_") and k.count("/") == 1)


KS = sorted(set.intersection(*(set(ks_of(data.final_eval(c))) for c in CELLS))) if CELLS else []


def passk(cell, which, bucket=None):
    """{k: pass@k} of the final policy ('rl') or the warm start ('init'), all prompts or one bucket."""
    ev = data.final_eval(cell)
    src = ev["initial"] if which == "init" else ev
    suffix = f"/{bucket}" if bucket else ""
    return {k: src[f"eval/pass_at_{k}{suffix}"] for k in KS if f"eval/pass_at_{k}{suffix}" in src}


def seed_of(cell):
    return cell.get("seed", cell["axes"].get("seed"))


# %% [markdown]
# ## Regime: does RL sharpen, and are there prompts with rare right answers?
# The paired rise of held-out pass@1 from the in-loop evals (step 0 vs the end, 512 prompts x
# 8), and per difficulty bucket the warm start's pass@1 and pass@64: a bucket where pass@64
# is far above pass@1 is where right answers are rare but present, the only place RL can lose.

# %%
regime = F.rise_lines(data, "grpo", data.cells)
for b in BUCKETS:
    if CELLS and KS:
        p1 = F.final([passk(c, "init", b).get(1, float("nan")) for c in CELLS])
        pk = F.final([passk(c, "init", b).get(KS[-1], float("nan")) for c in CELLS])
        regime.append(f"- warm start, {b} prompts: pass@1 {p1.fmt()}, pass@{KS[-1]} {pk.fmt()}")
print("\n".join(regime))


# %% [markdown]
# ## pass@k against k, all prompts and per difficulty bucket


# %%
def draw_passk(ax, bucket, title):
    if not CELLS or not KS:
        F.note(ax, "no eval.json with the starting policy's eval (needs final_eval: {vs_initial: true})")
        ax.set_title(title)
        return
    for which, style, color, label in (("init", "--", "0.35", "warm start"), ("rl", "-", "C0", "grpo policy")):
        series = [passk(c, which, bucket) for c in CELLS]
        F.plot_curve(
            ax, F.combine([s for s in series if s]), label, color, style=style, marker="s" if which == "init" else "o"
        )
    ax.set_xscale("log", base=2)
    ax.set_xticks(KS, [str(k) for k in KS])
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("k (samples per prompt; log scale)")
    ax.set_ylabel("pass@k (fraction of prompts solved)")
    ax.set_title(title)


fig, axs = plt.subplots(1, 4, figsize=(19, 4.5), layout="constrained")
draw_passk(axs[0], None, "all held-out prompts")
for ax, b in zip(axs[1:], BUCKETS):
    draw_passk(ax, b, f"{b} prompts")
F.legend(axs[0], loc="lower right")
n_p = data.final_eval(CELLS[0]).get("num_prompts") if CELLS else "?"
F.suptitle(fig, data, f"pass@k vs k: warm start vs the grpo policy ({n_p} held-out prompts, same sampling seed)")
F.save(fig, data, "passk")

# %% [markdown]
# ## RL minus warm start at every k, paired (per seed, bootstrap 95% interval over prompts)
# Above 0: RL solves more prompts with k samples; below 0: the warm start does.

# %%
fig, ax = plt.subplots(figsize=(8, 4.5), layout="constrained")
if CELLS and KS:
    for j, c in enumerate(CELLS):
        ev = data.final_eval(c)
        ks = [k for k in KS if f"delta/pass_at_{k}" in ev]
        xs = [k * 2 ** ((j - (len(CELLS) - 1) / 2) * 0.06) for k in ks]  # seeds side by side
        d = [ev[f"delta/pass_at_{k}"] for k in ks]
        lo = [ev[f"delta/pass_at_{k}"] - ev[f"delta/pass_at_{k}/ci95"][0] for k in ks]
        hi = [ev[f"delta/pass_at_{k}/ci95"][1] - ev[f"delta/pass_at_{k}"] for k in ks]
        ax.errorbar(
            xs, d, yerr=[lo, hi], fmt="-o", color=f"C{j}", capsize=3, ms=4, mfc="none", lw=1, label=f"seed {seed_of(c)}"
        )
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xticks(KS, [str(k) for k in KS])
    ax.legend()
else:
    F.note(ax, "no paired final eval")
ax.set_xlabel("k (samples per prompt; log scale)")
ax.set_ylabel("pass@k, grpo policy minus warm start\n(same prompts and sampling seed)")
ax.set_title("where RL wins (> 0) and where it loses (< 0)")
F.suptitle(
    fig,
    data,
    "pass@k difference, RL − warm start, per seed with bootstrap 95% intervals over prompts",
    note=f"n={len(CELLS)} seed{'s' if len(CELLS) != 1 else ''}, each drawn",
)
F.save(fig, data, "passk_delta")

# %% [markdown]
# ## Numbers

# %%
rows = []
for k in KS:
    init = F.final([passk(c, "init").get(k, float("nan")) for c in CELLS])
    rl = F.final([passk(c, "rl").get(k, float("nan")) for c in CELLS])
    per_seed = []
    for c in CELLS:
        ev = data.final_eval(c)
        if f"delta/pass_at_{k}" in ev:
            lo, hi = ev[f"delta/pass_at_{k}/ci95"]
            per_seed.append(f"{ev[f'delta/pass_at_{k}']:+.3f} [{lo:+.3f}, {hi:+.3f}]")
    rows.append([str(k), init.fmt(), rl.fmt(), "; ".join(per_seed)])
table = F.markdown_table(["k", "warm start pass@k", "grpo pass@k", "RL − warm start per seed (bootstrap 95% CI)"], rows)
lines = [
    f"# {data.name} ({data.scale}): pass@k vs k, warm start vs RL",
    "",
    "## Regime (reference arm alone)",
    "",
    *regime,
    "",
    "## pass@k",
    "",
    f"{len(CELLS)} policies (one per seed); ± = 95% t-interval over seeds.",
    "",
    table,
    "",
    "The paper's effect: RL above the warm start at k = 1, at or below it at large k:",
    "",
]
if CELLS and KS:
    for k in (KS[0], KS[-1]):
        d = F.final([data.final_eval(c).get(f"delta/pass_at_{k}", float("nan")) for c in CELLS])
        lines.append(
            "- " + F.verdict(d, f"pass@{k}, grpo − warm start (mean over seeds of the per-seed paired difference)")
        )
        sig = [c for c in CELLS if data.final_eval(c).get(f"delta/pass_at_{k}/ci95")]
        above = sum(data.final_eval(c)[f"delta/pass_at_{k}/ci95"][0] > 0 for c in sig)
        below = sum(data.final_eval(c)[f"delta/pass_at_{k}/ci95"][1] < 0 for c in sig)
        lines.append(f"  - per seed (bootstrap over prompts): {above} of {len(sig)} intervals above 0, {below} below 0")
    for b in BUCKETS:
        d = F.final(
            [passk(c, "rl", b).get(KS[-1], float("nan")) - passk(c, "init", b).get(KS[-1], float("nan")) for c in CELLS]
        )
        lines.append("- " + F.verdict(d, f"{b} prompts, pass@{KS[-1]}, grpo − warm start"))
    cross = [
        k for k in KS if F.final([data.final_eval(c).get(f"delta/pass_at_{k}", float("nan")) for c in CELLS]).mean <= 0
    ]
    lines.append(
        f"- smallest k where the mean difference is <= 0: {cross[0] if cross else 'none up to ' + str(KS[-1])}"
    )
if data.scale == "smoke":
    lines += ["", "Smoke scale: 2 steps and 1 seed check the wiring only; no effect can be read from it."]
F.write_summary(data, "\n".join(lines))
