"""Reference TOPR losses of ROLL, for tests/objective/test_objective_topr.py.

    python benchmarks/reference/topr.py   # rewrites tests/objective/fixtures/topr.json

ROLL is not on PyPI as a release (and imports Ray, Megatron and more), so its code is copied below verbatim from
its repository's snapshot: ROLL 8eb27cc roll/pipeline/agentic/agentic_actor_pg_worker.py
`AgenticActorPGWorker._compute_topr_loss` (l. 260-349), a method, run with `self` a namespace of what it reads
(its two weights, a logger, its metrics cache); `get_episode_scores(data)` (agentic_pipeline.py l. 950) returns
each trajectory's score, here the fixture's rewards. The loss matrix is then averaged over the response tokens
(ROLL's `agg_loss` token-mean over the masked tokens) and differentiated with respect to the log-probs.

Inputs: 6 rows (rewards 1, 0, 1, 0, 0.5 and -1), per-token advantages of both signs on each kind of row, ratios
above and below 1 on the negative rows (so the taper binds), padding; weights (1, 1) and (0.7, 1.3).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace

import torch

OUT = Path(__file__).resolve().parents[2] / "tests" / "objective" / "fixtures" / "topr.json"
current_platform = SimpleNamespace(device_type="cpu")
DataProto = SimpleNamespace  # ROLL's batch type; the copy reads only what get_episode_scores returns


def get_episode_scores(data) -> torch.Tensor:
    return data.scores  # ROLL: each trajectory's episode_scores, float32


# ----------------------------------------------------------------------------- ROLL 8eb27cc (copied)
def _compute_topr_loss(
    self,
    ratio: torch.Tensor,
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    data: DataProto,
):
    """
    计算TOPR (Tapered off-policy REINFORCE) 损失. https://arxiv.org/abs/2503.14286

    根据论文公式(8):
    ∇J_TOPR(π) = Σ_{τ∈T^+} μ(τ)R(τ)∇log π(τ) + Σ_{τ∈T^-} μ(τ)[π(τ)/μ(τ)]_0^1 R(τ)∇log π(τ)

    - 正样本(T^+): SFT更新, 直接对log π(τ)求导, 不使用importance sampling
    - 负样本(T^-): TIS更新, 使用clipped importance sampling ratio [0,1]

    Args:
        ratio: 重要性采样比率 π(a|s) / π_old(a|s) [batch_size, seq_len]
        log_probs: 当前策略的log概率 [batch_size, seq_len]
        old_log_probs: 旧策略的log概率 [batch_size, seq_len]
        advantages: 优势函数值 [batch_size, seq_len]
        data: 数据，包含奖励/分数信息

    Returns:
        topr_loss: TOPR损失 [batch_size, seq_len]
    """
    # 缓存TOPR配置
    positive_weight = self._get_or_cache_config("topr_positive_weight", 1.0)
    negative_weight = self._get_or_cache_config("topr_negative_weight", 1.0)

    # scores = data.batch['scores']dim=@).to(current_platform.device_type)
    scores = get_episode_scores(data).to(current_platform.device_type)
    positive_mask = (scores > 0).float()
    negative_mask = (scores <= 0).float()

    if not self._topr_sample_logged:
        total_samples = len(scores)
        positive_count = positive_mask.sum().item()
        negative_count = negative_mask.sum().item()
        self.logger.info(
            f"TOPR样本分布 - 总样本: {total_samples}, 正样本: {positive_count} ({positive_count / total_samples * 100:.1f}%), 负样本: {negative_count} ({negative_count / total_samples * 100:.1f}%)"
        )
        self.logger.info(
            f"TOPR奖励统计 - 平均: {scores.mean().item():.4f}, 标准差: {scores.std().item():.4f}, 最大: {scores.max().item():.4f}, 最小: {scores.min().item():.4f}"
        )
        self.logger.info(f"TOPR权重配置 - 正样本权重: {positive_weight}, 负样本权重: {negative_weight}")
        self._topr_sample_logged = True

    # 计算损失组件
    positive_token_mask = positive_mask.unsqueeze(-1).expand_as(log_probs)
    negative_token_mask = negative_mask.unsqueeze(-1).expand_as(log_probs)

    positive_loss = -advantages * log_probs * positive_token_mask

    # 负样本: TIS更新，使用clipped importance sampling ratio
    # 梯度是: -[π(τ)/μ(τ)]_0^1 * R(τ) * ∇log π(τ)
    clipped_ratio = torch.clamp(ratio, min=0.0, max=1.0).detach()
    negative_loss = -clipped_ratio * advantages * log_probs * negative_token_mask

    weighted_positive_loss = positive_weight * positive_loss
    weighted_negative_loss = negative_weight * negative_loss

    topr_loss = weighted_positive_loss + weighted_negative_loss

    # 缓存TOPR相关指标
    negative_lower_clipped = ((ratio < 0.0) & (negative_token_mask > 0)).float()
    negative_upper_clipped = ((ratio > 1.0) & (negative_token_mask > 0)).float()
    negative_total_clipped = negative_lower_clipped + negative_upper_clipped
    self._cached_metrics.update(
        {
            "topr_positive_loss": positive_loss,
            "topr_negative_loss": negative_loss,
            "topr_weighted_positive_loss": weighted_positive_loss,
            "topr_weighted_negative_loss": weighted_negative_loss,
            "topr_positive_weight": positive_weight,
            "topr_negative_weight": negative_weight,
            "topr_positive_samples": positive_mask.sum().detach().item(),
            "topr_negative_samples": negative_mask.sum().detach().item(),
            "topr_positive_ratio": (positive_mask.sum() / (positive_mask.size(0) + 1e-8)).detach().item(),
            "topr_negative_ratio": (negative_mask.sum() / (negative_mask.size(0) + 1e-8)).detach().item(),
            "topr_negative_lower_clipfrac": negative_lower_clipped.mean().detach().item(),
            "topr_negative_upper_clipfrac": negative_upper_clipped.mean().detach().item(),
            "topr_negative_total_clipfrac": negative_total_clipped.mean().detach().item(),
            "topr_scores_mean": scores.mean().detach().item(),
            "topr_scores_std": scores.std().detach().item(),
        }
    )

    return topr_loss


# ----------------------------------------------------------------------------- the fixture
REWARDS = [1.0, 0.0, 1.0, 0.0, 0.5, -1.0]
WEIGHTS = [(1.0, 1.0), (0.7, 1.3)]
B, T = len(REWARDS), 5


def _inputs() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(7)
    logp = -torch.rand(B, T, generator=g, dtype=torch.float64) * 3 - 0.05
    old = logp + torch.randn(B, T, generator=g, dtype=torch.float64) * 0.4  # ratios on both sides of 1
    adv = torch.randn(B, T, generator=g, dtype=torch.float64)
    mask = torch.ones(B, T, dtype=torch.float64)
    mask[1, 3:] = 0
    mask[4, 2:] = 0
    return {"logp": logp, "old_logp": old, "adv": adv, "mask": mask}


def _roll(x: dict, w_pos: float, w_neg: float) -> dict:
    worker = SimpleNamespace(
        _get_or_cache_config=lambda key, default: {"topr_positive_weight": w_pos, "topr_negative_weight": w_neg}[key],
        _topr_sample_logged=False,
        logger=logging.getLogger("roll"),
        _cached_metrics={},
    )
    logp = x["logp"].clone().requires_grad_(True)
    ratio = torch.exp(logp - x["old_logp"])
    data = SimpleNamespace(scores=torch.tensor(REWARDS, dtype=torch.float32))
    loss_mat = _compute_topr_loss(worker, ratio, logp, x["old_logp"], x["adv"] * x["mask"], data)
    loss = (loss_mat * x["mask"]).sum() / x["mask"].sum()  # agg_loss token-mean over the response tokens
    (grad,) = torch.autograd.grad(loss, logp)
    return {"loss": loss.item(), "grad": grad.tolist(), "tokens": (loss_mat * x["mask"]).tolist()}


def build() -> dict:
    x = _inputs()
    return {
        "about": "written by benchmarks/reference/topr.py: ROLL 8eb27cc _compute_topr_loss, copied verbatim",
        "rewards": REWARDS,
        "inputs": {k: v.tolist() for k, v in x.items()},
        "roll": {f"{p},{n}": _roll(x, p, n) for p, n in WEIGHTS},
    }


if __name__ == "__main__":
    OUT.write_text(json.dumps(build(), indent=1) + "\n")
    print(OUT)
