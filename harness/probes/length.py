"""Length-bias probe (docs/studies.md (a); Dr.GRPO arXiv 2503.20783 §3.1).

From the same policy and the same batch, one update under each arm's aggregation; then the
expected length of CORRECT and of INCORRECT answers on held-out prompts, sampled with the
same seed for every arm (harness/probes/engine.py). The mechanism says: under
seq_mean_token_mean (1/|o_i|) a long wrong answer is pushed down less per token, its end
token included, than under a batch-wide normaliser; so after the update wrong answers are
longer under grpo than under token_mean / dr_grpo, and right answers shorter.

Per batch and arm it also records, at pi_0 (harness.train.diagnostics.metrics.eos_weight_shares):
    agg/eos_share_incorrect, agg/eos_share_correct   the share of the update's gradient weight
                                                      on the end tokens of wrong / right answers
"""

from __future__ import annotations

from harness.probes.engine import Arm, ProbeResult, arm_mean, paired, run_one_update_probe
from harness.probes.regime import KEYS as REGIME_KEYS
from harness.probes.regime import regime_stats
from harness.train.diagnostics.metrics import eos_weight_shares

KEYS = ("eval/length/incorrect", "eval/length/correct", "eval/pass_at_1", "eval/length/truncated_frac")
STAT_KEYS = ("agg/eos_share_incorrect", "agg/eos_share_correct")


def _stats(arm: Arm, ep, batch, cfg, policy, pad_id) -> dict:
    """The trainer's own agg/eos_share_* (rl/step.py) on the arm's scored batch."""
    return eos_weight_shares(cfg.objective, batch.adv, batch.mask, ep.rollout.truncated, ep.correct)


def _batch_stats(ep, cfg, policy, pad_id) -> dict:
    return {f"regime/{k}": v for k, v in regime_stats(ep).items()}  # what the mechanism needs, per batch


def run(arms: list[Arm], settings: dict) -> ProbeResult:
    return run_one_update_probe(arms, stats=_stats, batch_stats=_batch_stats, **settings)


def summarize(res: ProbeResult, arms: list[Arm]) -> dict:
    """Per arm: the change from pi_0; per pair (reference arm vs each other): the paired
    difference, each with a 95% t-interval over batches."""
    ref = arms[0].label
    out = {"reference": ref, "base": {k: res.base.get(k) for k in KEYS}, "change": [], "pairs": [], "stats": []}
    for a in arms:
        out["change"] += [paired(res, k, a.label, None) for k in KEYS]
        out["stats"] += [arm_mean(res, k, a.label) for k in STAT_KEYS]
    for a in arms[1:]:
        out["pairs"] += [paired(res, k, ref, a.label) for k in KEYS]
    out["regime"] = [arm_mean(res, f"regime/{k}", None) for k in REGIME_KEYS] if res.batch and res.batch[0] else []
    return out
