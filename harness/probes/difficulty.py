"""Difficulty-bias probe (docs/studies.md (b)): what dividing by the group std does to ONE update.

At the same policy and batches (harness/probes/engine.py), per arm (objective.scale):
    adv/share_extreme    share of the batch's sum|A| from extreme groups (p < 0.2 or p > 0.8)
    grad/share_extreme   ||g_E|| / (||g_E|| + ||g_R||), the policy-gradient norm of the extreme
                         groups' rows against the rest (harness/train/diagnostics/group_stats.py)
    abs_adv_sum per group against the closed forms 2G sqrt(p(1-p)) (group_std, population std)
                         and 2G p(1-p) (none): max |measured - closed form| over the groups
and after the update, on held-out prompts with the same sampling seed for every arm, the
change of pass@1 per difficulty bucket (the consequence: which prompts the update serves).
"""

from __future__ import annotations

import math

from harness.probes.engine import Arm, ProbeResult, arm_mean, paired, run_one_update_probe
from harness.train.core.components import Trained
from harness.train.core.step_context import StepContext
from harness.train.diagnostics.group_stats import GROUP_RECORDS, extreme_grad_share, group_records


def closed_form(scale: str, G: int, p: float) -> float | None:
    """sum_i |A_i| of a binary-reward group with p = k/G under the group-mean baseline."""
    if scale == "group_std":
        return 2 * G * math.sqrt(p * (1 - p))
    if scale == "none":
        return 2 * G * p * (1 - p)
    return None  # batch_std: one batch-wide divisor, no per-group closed form


def _stats(arm: Arm, ep, batch, cfg, policy, pad_id) -> dict:
    """The trainer's own group records and gradient share (rl/step.py) on the arm's scored batch."""
    rec = group_records(ep, batch.adv, batch.mask, 0)
    groups = rec.pop(GROUP_RECORDS)
    out = {"adv/share_extreme": rec["adv/share_extreme"], "groups/zero_var_frac": rec["groups/zero_var_frac"]}
    errs = [
        abs(g["abs_adv_sum"] - cf)
        for g in groups
        if (cf := closed_form(cfg.objective.scale, g["G"], g["p"])) is not None
    ]
    if errs:
        out["adv/closed_form_max_abs_err"] = max(errs)
    out["groups"] = [(g["p"], g["abs_adv_sum"]) for g in groups]
    sc = StepContext.build(cfg, Trained("policy", policy, None), pad_id=pad_id)
    out.update({k: v for k, v in extreme_grad_share(sc, batch, ep).items() if k.startswith("grad/")})
    policy.eval()
    return out


def run(arms: list[Arm], settings: dict) -> ProbeResult:
    return run_one_update_probe(arms, stats=_stats, **settings)


BUCKETS = ("easy", "medium", "hard")
KEYS = ("eval/pass_at_1",) + tuple(f"eval/pass_at_1/{b}" for b in BUCKETS)
STAT_KEYS = ("adv/share_extreme", "grad/share_extreme", "adv/closed_form_max_abs_err", "groups/zero_var_frac")


def summarize(res: ProbeResult, arms: list[Arm]) -> dict:
    ref = arms[0].label
    out = {
        "reference": ref,
        "base": {k: res.base.get(k) for k in KEYS},
        "change": [],
        "pairs": [],
        "stats": [],
        "stat_pairs": [],
        "groups": {a.label: [pa for row in res.per_batch for pa in row[a.label].get("groups", [])] for a in arms},
    }
    for a in arms:
        out["change"] += [paired(res, k, a.label, None) for k in KEYS]
        out["stats"] += [arm_mean(res, k, a.label) for k in STAT_KEYS]
    for a in arms[1:]:
        out["pairs"] += [paired(res, k, ref, a.label) for k in KEYS]
        out["stat_pairs"] += [paired(res, k, ref, a.label) for k in ("adv/share_extreme", "grad/share_extreme")]
    return out
