"""One GRPO step in plain tensors, read top to bottom -- start here (docs/architecture.md).

GRPO (DeepSeekMath, Shao et al., arXiv 2402.03300, Eq. 3) maximises, per prompt q with G sampled
responses o_1..o_G and rewards r_1..r_G,

    J(theta) = 1/G sum_i 1/|o_i| sum_t [ min(rho_it A_i, clip(rho_it, 1 - eps, 1 + eps) A_i) - beta D_it ]

    A_i    = (r_i - mean(r)) / (std(r) + adv_eps)          group advantage (outcome supervision, 2402.03300 §4.1.2)
    rho_it = pi_theta(o_it) / pi_old(o_it)                  importance ratio of token t of response i
    D_it   = pi_ref/pi_theta - log(pi_ref/pi_theta) - 1     the k3 estimate of KL(pi_theta || pi_ref) (Eq. 4)

This file computes exactly that, and nothing else, with no config object and no registry: the
composable objective (harness/objective/policy.py with the `grpo` preset) gives the same loss and
gradients (tests/objective/test_objective_reference_grpo.py, 1e-6). Two of GRPO's descendants are
GRPO with a switch flipped, so the step takes them as arguments:

    Dr.GRPO (arXiv 2503.20783): no std division (`scale_by_std=False`), and the sum over each
        response's tokens divided by a constant C instead of 1/|o_i| (`length_norm="constant"`)
    DAPO (arXiv 2503.14476, Eq. 8): clip-higher (eps_high > eps_low) and one mean over all the
        batch's tokens (`length_norm="token"`); both drop the KL term (beta = 0)

Every other knob of the harness is a difference from these lines (docs/architecture.md).

Glossary: N prompts, G responses per prompt, B = N*G rows with each prompt's group contiguous,
T the padded response length, M the response mask (B, T), |o_i| = sum_t M[i, t].
"""

from __future__ import annotations

import torch


def group_advantage(
    rewards: torch.Tensor, group_size: int, scale_by_std: bool = True, adv_eps: float = 1e-6
) -> torch.Tensor:
    """A (B,) from rewards (B,): each reward minus its group's mean, over the group's std.

    The std is torch's default, the sample one (N - 1), as TRL and verl take it; adv_eps is added
    outside the sqrt. A group whose rewards are all equal gets 0 (0 / adv_eps)."""
    r = rewards.to(torch.float64).view(-1, group_size)  # (N, G)
    a = r - r.mean(dim=-1, keepdim=True)  # r_i - mean(r)
    if scale_by_std:
        a = a / (r.std(dim=-1, keepdim=True) + adv_eps)  # / (std(r) + eps)      GRPO; Dr.GRPO drops it
    return a.reshape(-1)  # (B,)


def clipped_surrogate(ratio: torch.Tensor, adv: torch.Tensor, eps_low: float, eps_high: float) -> torch.Tensor:
    """Per-token loss (B, T) to minimise: -min(rho A, clip(rho, 1 - eps_low, 1 + eps_high) A)   (PPO, Eq. 7).
    Where the clip binds in the direction of A, the token's gradient is 0."""
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high)
    return -torch.minimum(ratio * adv, clipped * adv)


def k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """KL(pi_theta || pi_ref) per token (B, T), Schulman's k3: e^d - d - 1 with d = log pi_ref - log pi_theta.
    Unbiased for samples of pi_theta and never negative; its gradient flows through logp."""
    d = ref_logp.detach() - logp
    return torch.expm1(d) - d


def aggregate(
    loss_tok: torch.Tensor, mask: torch.Tensor, length_norm: str, norm_constant: float | None
) -> torch.Tensor:
    """Scalar loss from the per-token loss (B, T), padding left out:
    "response"  1/B sum_i 1/|o_i| sum_t M l     GRPO: a long response's tokens weigh less (the length bias)
    "constant"  1/B sum_i sum_t M l / C         Dr.GRPO: C = the generation budget
    "token"     sum_i sum_t M l / sum_i |o_i|   DAPO: every token weighs the same
    """
    m = mask.to(loss_tok.dtype)
    per_response = (loss_tok * m).sum(dim=-1)  # sum_t M l_it, (B,)
    lengths = m.sum(dim=-1)  # |o_i|, (B,)
    B = loss_tok.shape[0]
    if length_norm == "response":
        return (per_response / lengths.clamp(min=1)).sum() / B
    if length_norm == "constant":
        return per_response.sum() / (B * norm_constant)
    if length_norm == "token":
        return per_response.sum() / lengths.sum().clamp(min=1)
    raise ValueError(f"length_norm={length_norm!r}; allowed: 'response', 'constant', 'token'")


def grpo_step(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    ref_logp: torch.Tensor | None,
    mask: torch.Tensor,
    rewards: torch.Tensor,
    group_size: int,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    beta: float = 0.04,
    scale_by_std: bool = True,
    length_norm: str = "response",
    norm_constant: float | None = None,
    adv_eps: float = 1e-6,
) -> torch.Tensor:
    """One GRPO loss and its backward pass; returns the loss (its gradient is now in logp's leaves).

    logp      (B, T) log pi_theta of the sampled tokens, with the graph to the policy's weights
    old_logp  (B, T) log pi_old: the policy that sampled (= logp's values on the first inner step)
    ref_logp  (B, T) log pi_ref, the frozen reference (None when beta = 0)
    mask      (B, T) 1 on response tokens, 0 on padding
    rewards   (B,)   one scalar per response (the verifier's), groups of `group_size` contiguous
    Defaults are GRPO's (eps 0.2, beta 0.04, std scaling, per-response length normalisation).
    """
    m = mask > 0
    zero = torch.zeros_like(logp)
    lp = torch.where(m, logp, zero)  # padding may hold -inf: keep it out of exp() and of the gradient
    old = torch.where(m, old_logp.detach(), zero)

    # 1. rewards -> group advantage, broadcast to every token of its response          A_i      (B,) -> (B, T)
    adv = group_advantage(rewards, group_size, scale_by_std, adv_eps).to(logp.dtype)
    A = adv.unsqueeze(-1).expand_as(lp)

    # 2. importance ratio per token                                                    rho_it   (B, T)
    ratio = torch.exp(lp - old)

    # 3. clipped surrogate                                                             l_it     (B, T)
    loss_tok = clipped_surrogate(ratio, A, eps_low, eps_high)

    # 4. + beta * k3 KL to the reference, in the loss                                  l_it + beta D_it
    if beta > 0:
        loss_tok = loss_tok + beta * k3(lp, torch.where(m, ref_logp.detach(), zero))

    # 5. aggregation over tokens and responses                                         scalar
    loss = aggregate(loss_tok, m, length_norm, norm_constant)

    # 6. backward: d loss / d theta lands in the policy's .grad (an optimizer step follows)
    loss.backward()
    return loss.detach()
