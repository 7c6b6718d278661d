"""On-policy distillation (OPD), docs/objective.md, "On-policy distillation" -- `distill_coef > 0` (preset `opd`).

The student (the policy) samples; a frozen TEACHER pi_T (`model.teacher`, loaded by the trainer beside the
policy, harness/train/core/scoring.py frozen_teacher) scores the student's own tokens; the per-token reverse
KL of the student from the teacher on those samples is the (negative) per-token advantage:

    k_t   = log pi_old(y_t | x, y_<t) - log pi_T(y_t | x, y_<t)          (the reverse KL's one-sample estimate, k1)
    A_t   = [A_i] - distill_coef * k_t      on the response tokens, 0 elsewhere

A_i is the verifiable reward's advantage of the row (the objective's baseline and scale, the KL in the reward
where placed there): kept with `distill_task_advantage: true` (the mix), dropped with false (distillation
alone, the `opd` preset). This is Thinking Machines' form ("On-policy distillation", 2025; tinker-cookbook
tinker_cookbook/distillation/train_on_policy.py `incorporate_kl_penalty`: advantages + (-kl_penalty_coef *
mask * (sampled_logprobs - teacher_logprobs)), kl_discount_factor 0, the student's log-probs those of the
sampler). verl 0.9.1 (verl/trainer/distillation/losses.py `distillation_loss` with
distillation_loss.use_policy_gradient=true, loss_mode k1) takes the same advantages -k_t, detached, and adds
their policy loss to the task's (`distillation_ppo_loss`: L_pg(A_i) + distillation_loss_coef * L_pg(-k)): where
no clip binds (on-policy, ratio 1) the two are the same loss and gradient, as the fixture of
benchmarks/reference/distill.py shows (tests/objective/test_objective_distill.py).

Glossary: N prompts, G group size, B = N*G rows (groups contiguous), T response length, M the loss mask (B, T).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from harness.objective.advantages import BASELINE, group_advantages
from harness.objective.extensions import Hooks, Scored
from harness.objective.kl import kl_in_reward, reward_kl_on
from harness.objective.modes import Knob, Requires, register_extension

if TYPE_CHECKING:
    from harness.objective.config import ObjectiveConfig

TEACHER = "teacher_logp"  # the extras name of the teacher's log-probs of the sampled tokens (B, T)

KNOBS = (
    Knob(
        "distill_coef",
        0.0,
        "on-policy distillation (Thinking Machines 2025, GKD 2306.13649): weight alpha of the per-token advantage "
        "-alpha (log pi_old - log pi_T) from model.teacher's log-probs of the sampled tokens; 0 = off, no teacher "
        "loads",
        ge=0,
    ),
    Knob(
        "distill_task_advantage",
        True,
        "on-policy distillation: keep the verifiable reward's advantage A_i beside the teacher's term (verl "
        "use_task_rewards); false = distillation alone (the opd preset)",
    ),
)


def reverse_kl(logp: torch.Tensor, teacher_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """k_t = log pi_old(y_t) - log pi_T(y_t) on the response tokens, 0 elsewhere (B, T), no grad."""
    k = logp.detach() - teacher_logp.detach()  # the one-sample estimate of KL(pi_old || pi_T) at token t
    return torch.where(mask > 0, k, torch.zeros_like(k))


def distill_advantages(
    task_adv: torch.Tensor | None,
    logp: torch.Tensor,
    teacher_logp: torch.Tensor,
    mask: torch.Tensor,
    distill_coef: float,
) -> torch.Tensor:
    """Per-token advantages (B, T), no grad: A_t = A_i - distill_coef * k_t on the response tokens, 0 elsewhere
    (Thinking Machines' incorporate_kl_penalty). task_adv: the task's advantages, (B,) or (B, T); None: distillation
    alone (A_t = -distill_coef * k_t)."""
    if logp.shape != teacher_logp.shape or logp.shape != mask.shape:
        raise ValueError(
            f"logp {tuple(logp.shape)}, {TEACHER} {tuple(teacher_logp.shape)} and mask {tuple(mask.shape)} "
            "must all be (B, T)"
        )
    adv = -distill_coef * reverse_kl(logp, teacher_logp, mask)  # A_t = -alpha (log pi_old - log pi_T)
    if task_adv is not None:
        task = task_adv.detach().to(adv.dtype)
        adv = adv + (task.unsqueeze(-1) if task.dim() == 1 else task)  # + A_i (Thinking Machines: advantages + ...)
    return torch.where(mask > 0, adv, torch.zeros_like(adv))


def teacher_kl_mean(logp: torch.Tensor, teacher_logp: torch.Tensor, mask: torch.Tensor) -> float:
    """`distill/reverse_kl`: the mean of k_t over the batch's response tokens (Thinking Machines' `teacher_kl`:
    sum_{i,t} M k / sum M); 0 without a response token."""
    m = mask > 0
    n = int(m.sum())
    return float(reverse_kl(logp, teacher_logp, mask).double().sum() / n) if n else 0.0


def _group_baseline(v: str, cfg: Any) -> bool:
    return v in BASELINE and BASELINE[v] is not None


WHY = "the teacher's term is added to a group baseline's sequence advantages"


def opd_scored(
    cfg: ObjectiveConfig, rewards: torch.Tensor, mask: torch.Tensor, group_size: int, inputs: dict
) -> Scored:
    """The `advantages` hook of OPD: the task's advantages (the KL in the reward off its rewards, where placed
    there) when kept, the teacher's per-token term added; metrics distill/reverse_kl (the mean k_t) and
    distill/teacher_logp_mean."""
    teacher, logp = inputs.get(TEACHER), inputs.get("logp")
    if teacher is None or logp is None:
        raise ValueError(
            f"objective.distill_coef > 0 needs {TEACHER} (the teacher's log-probs of the sampled tokens) and logp "
            "(pi_old's), both (B, T): inputs_needed(obj).teacher_logp / .current_logp_for_kl"
        )
    if reward_kl_on(cfg):
        rewards = kl_in_reward(cfg, rewards, logp, inputs["ref_logp"], mask)
    task = group_advantages(cfg, rewards, group_size) if cfg.distill_task_advantage else None
    adv = distill_advantages(task, logp, teacher.to(logp.device), mask, cfg.distill_coef)
    m = mask > 0
    metrics = {
        "distill/reverse_kl": teacher_kl_mean(logp, teacher, mask),
        "distill/teacher_logp_mean": float(teacher[m].double().mean()) if m.any() else 0.0,
    }
    return Scored(adv=adv, returns=None, rewards=rewards, metrics=metrics)


@register_extension(
    "opd",
    doc="on-policy distillation (Thinking Machines 2025; verl distillation, use_policy_gradient): the teacher "
    "model.teacher scores the student's samples, A_t = [A_i] - distill_coef (log pi_old - log pi_T); loads the "
    "teacher",
    knobs=KNOBS,
    switch="distill_coef",
    when="objective.distill_coef > 0",
    requires=(
        Requires(
            "baseline",
            why=WHY,
            accepts=_group_baseline,
            allowed_text="a baseline with sequence advantages (not critic, prime, remax or opo: those compute their own advantages)",
        ),
    ),
    hooks=Hooks(teacher=True, advantages=opd_scored),
)
def _opd_on(cfg: Any) -> bool:
    return cfg.distill_coef > 0


__all__ = ["KNOBS", "TEACHER", "reverse_kl", "distill_advantages", "teacher_kl_mean", "opd_scored"]
