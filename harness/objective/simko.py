"""SimKO, Simple Pass@K Optimization (arXiv 2510.14807), docs/objective.md §13.

The loss reads, per response token, the top-K log-probs of the training forward (with gradient)
and of pi_old, and whether the sampled token is the argmax: the RL trainer computes them only when
`simko_top_k > 0` (inputs_needed(obj).topk_logp), the candidates being pi_old's K most likely
tokens; `policy_loss` then uses `simko_token_loss` as its surrogate (preset `simko`).

Glossary: B sequences, T padded response length, K = simko_top_k, M response mask (B, T).
At the tokens whose entropy is above the response's `simko_tau` quantile (w = 1):

  correct response (A > 0): the ratio becomes
      rho_mix = (1 - mix w) rho + (mix w / K) sum_k sg(rho / rho_k) rho_k,   rho_k = exp(topk_k - old_topk_k)
    -- the same VALUE as rho, but a share `mix` of the sampled token's gradient is spread evenly
    over the top-K candidates (it raises their probabilities: less concentration);
  wrong response (A < 0) at a token where the sampled token is the argmax: A <- neg_scale * A
    (a stronger push away from the top-1 candidate).
Then PPO's clipped surrogate -min(rho_mix A, clip(rho_mix, 1 - eps_low, 1 + eps_high) A).

Paper and reference code: the reference code (verl-based) gates BOTH branches on the high-entropy
tokens and takes the quantile per response over its response tokens with torch.quantile's linear
interpolation -- followed here. It marks a response correct by its reward == 1; here by A > 0
(with binary rewards and a group baseline the same responses, except in all-correct groups, where
A = 0 and nothing changes). The reference clips symmetrically; here eps_low / eps_high.
"""
from __future__ import annotations

import torch


def entropy_gate(entropy: torch.Tensor, mask: torch.Tensor, tau: float) -> torch.Tensor:
    """w (B, T) bool: the response tokens whose entropy exceeds the row's `tau` quantile over its own
    response tokens (linear interpolation, as torch.quantile). E.g. [0.1, 0.5, 2.0, 0.3, 1.2] at
    tau 0.8: quantile 1.36, only the third token."""
    m = mask > 0
    ent = entropy.detach()
    q = ent.masked_fill(~m, float("nan")).nanquantile(tau, dim=-1, keepdim=True)  # (B, 1); NaN for an empty row
    return m & (ent > q)


def simko_token_loss(logp: torch.Tensor, old_logp: torch.Tensor, topk_logp: torch.Tensor,
                     old_topk_logp: torch.Tensor, is_argmax: torch.Tensor, entropy: torch.Tensor,
                     adv: torch.Tensor, mask: torch.Tensor, *, simko_top_k: int = 3, simko_tau: float = 0.8,
                     simko_mix: float = 0.01, simko_neg_scale: float = 1.1, eps_low: float = 0.2,
                     eps_high: float = 0.2) -> torch.Tensor:
    """Per-token loss l (B, T) (aggregate it with §5's `aggregate`), 0 on padding.

    logp, old_logp (B, T): the sampled token under pi_theta (grad) and pi_old; topk_logp,
    old_topk_logp (B, T, K): the K most likely candidates of the training forward (grad) and their
    pi_old log-probs; is_argmax (B, T) bool: the sampled token is the argmax; entropy (B, T);
    adv (B,) or (B, T), no grad. See the module docstring for the formula."""
    if topk_logp.shape != (*logp.shape, simko_top_k) or old_topk_logp.shape != topk_logp.shape:
        raise ValueError(f"topk_logp and old_topk_logp must be (B, T, simko_top_k) = {(*logp.shape, simko_top_k)}, "
                         f"got {tuple(topk_logp.shape)} and {tuple(old_topk_logp.shape)}: SimKO needs the top-K "
                         "log-probs of the training forward")
    m = mask > 0
    A = adv.detach().to(logp.dtype)
    A = A.unsqueeze(-1).expand_as(logp) if A.dim() == 1 else A
    w = entropy_gate(entropy, m, simko_tau).to(logp.dtype)
    rho = torch.exp(torch.where(m, logp - old_logp.detach(), torch.zeros_like(logp)))
    rho_k = torch.exp(torch.where(m.unsqueeze(-1), topk_logp - old_topk_logp.detach(), torch.zeros_like(topk_logp)))
    spread = (rho.detach().unsqueeze(-1) / rho_k.detach() * rho_k).sum(-1)  # value K rho, gradient on the top-K
    mix = simko_mix * w
    rho_mix = torch.where(A > 0, (1.0 - mix) * rho + mix / simko_top_k * spread, rho)
    neg = (A < 0) & is_argmax & (w > 0)
    A = torch.where(neg, simko_neg_scale * A, A)
    clipped = torch.clamp(rho_mix, 1.0 - eps_low, 1.0 + eps_high)
    loss = -torch.minimum(rho_mix * A, clipped * A)
    return torch.where(m, loss, torch.zeros_like(loss))
