"""MoE probe (docs/studies.md (c); GSPO arXiv 2507.18071, R3 arXiv 2510.11370).

At the same policy (the MoE warm start) and the same batches, for each router-noise level
(the rollout engine's routing jitter; bf16 rollout vs fp32 training on top):
  at pi_0, before any update (mechanism):
    mismatch/k3_kl, mismatch/max_abs_dp, mismatch/ratio_gt2_frac   rollout vs the training forward
    router/disagree_rollout_train                                   with the trainer's own routing
    replay/mismatch/k3_kl, replay/router/disagree_rollout_train     with the rollout's routing replayed
    tok_ratio/clip_frac   share of tokens with |pi_train/pi_rollout - 1| > 0.2 (GRPO's clip range)
    seq_ratio/clip_frac   share of responses with GSPO's s_i = exp(mean_t log r_t) outside
                          [1 - 3e-4, 1 + 4e-4]
    tok_ratio/p99_abs_log, seq_ratio/p99_abs_log   99th percentile of |log r| per token / sequence
  one update per arm (4 mini-batches: the later three off-policy; harness/probes/engine.py):
    clip/frac, grad/norm_max, router/disagree_old_new (no: see the study's runs), and the
    change of held-out pass@1 after the update, same sampling seed for every arm.
"""

from __future__ import annotations

import torch

from harness.models.moe import is_moe
from harness.probes.engine import Arm, ProbeResult, arm_mean, paired, run_one_update_probe, with_section
from harness.train.core.batch import Batch
from harness.train.core.components import Trained
from harness.train.core.forward import batch_logprobs
from harness.train.core.mismatch import MismatchStats
from harness.train.core.step_context import StepContext

GRPO_EPS = 0.2
GSPO_EPS_LOW, GSPO_EPS_HIGH = 3e-4, 4e-4


def _ratio_stats(train_logp: torch.Tensor, rollout_logp: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """Token ratios r = pi_train / pi_rollout and GSPO's sequence ratios on (B, T) log-probs."""
    m = mask > 0
    log_r = (train_logp.float() - rollout_logp.float()) * m
    tok = log_r[m]
    seq = log_r.sum(-1) / m.sum(-1).clamp(min=1)  # log s_i = mean_t log r_t  (GSPO Eq. 7)
    s = seq.exp()
    return {
        "tok_ratio/clip_frac": float(((tok.exp() - 1).abs() > GRPO_EPS).float().mean()),
        "seq_ratio/clip_frac": float(((s < 1 - GSPO_EPS_LOW) | (s > 1 + GSPO_EPS_HIGH)).float().mean()),
        "tok_ratio/p99_abs_log": float(torch.quantile(tok.abs(), 0.99)),
        "seq_ratio/p99_abs_log": float(torch.quantile(seq.abs(), 0.99)),
    }


def _batch_stats(ep, cfg, policy, pad_id) -> dict:
    """Rollout vs training forward of pi_0 on the batch, without and with routing replay."""
    r = ep.rollout
    out = {}
    batch = Batch.from_rollout(r, r.response_mask)
    sc = StepContext.build(cfg, Trained("policy", policy, None), pad_id=pad_id)
    for prefix, replay in (("", False), ("replay/", True)):
        if replay and (batch.routing is None or not is_moe(policy)):
            continue
        mm = MismatchStats()
        lp = batch_logprobs(policy, batch, sc, mismatch=mm, replay=replay)
        out.update({prefix + k: v for k, v in mm.result().items()})
        out.update({prefix + k: v for k, v in _ratio_stats(lp, r.sampler_logp, r.response_mask).items()})
    return out


KEYS = ("eval/pass_at_1",)
STAT_KEYS = (
    "mismatch/k3_kl",
    "mismatch/max_abs_dp",
    "mismatch/ratio_gt2_frac",
    "router/disagree_rollout_train",
    "replay/mismatch/k3_kl",
    "replay/router/disagree_rollout_train",
    "tok_ratio/clip_frac",
    "seq_ratio/clip_frac",
    "tok_ratio/p99_abs_log",
    "seq_ratio/p99_abs_log",
)
UPDATE_KEYS = ("clip/frac", "grad/norm_max", "grad/norm")


def run(arms: list[Arm], settings: dict) -> dict[str, ProbeResult]:
    """settings: router_noise (list of levels) and the engine's settings. -> level -> result."""
    s = dict(settings)
    levels = s.pop("router_noise", [0.0, 0.5, 1.0])
    out = {}
    for level in levels:
        noisy = [Arm(a.label, with_section(a.cfg, "rollout", router_noise=float(level))) for a in arms]
        out[str(level)] = run_one_update_probe(noisy, batch_stats=_batch_stats, **s)
    return out


def summarize(results: dict[str, ProbeResult], arms: list[Arm]) -> dict:
    ref = arms[0].label
    out = {"reference": ref, "levels": {}}
    for level, res in results.items():
        lv = {
            "base": {k: res.base.get(k) for k in KEYS},
            "stats": [arm_mean(res, k, None) for k in STAT_KEYS],
            "change": [],
            "update": [],
            "pairs": [],
        }
        for a in arms:
            lv["change"] += [paired(res, k, a.label, None) for k in KEYS]
            lv["update"] += [arm_mean(res, k, a.label) for k in UPDATE_KEYS]
        for a in arms[1:]:
            lv["pairs"] += [paired(res, k, a.label, ref) for k in KEYS]
        out["levels"][level] = lv
    return out
