"""SimKO, Simple Pass@K Optimization (arXiv 2510.14807), docs/objective.md, "Token statistics".

The loss reads, per response token, the top-K log-probs of the training forward (with gradient)
and of pi_old, and whether the sampled token is the argmax: the RL trainer computes them only when
`simko_top_k > 0` (inputs_needed(obj).old_forward / .train_forward), the candidates being pi_old's K most likely
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

from harness.objective.modes import Knob


def entropy_gate(entropy: torch.Tensor, mask: torch.Tensor, tau: float) -> torch.Tensor:
    """w (B, T) bool: the response tokens whose entropy exceeds the row's `tau` quantile over its own
    response tokens (linear interpolation, as torch.quantile). E.g. [0.1, 0.5, 2.0, 0.3, 1.2] at
    tau 0.8: quantile 1.36, only the third token."""
    m = mask > 0
    ent = entropy.detach()
    q = ent.masked_fill(~m, float("nan")).nanquantile(tau, dim=-1, keepdim=True)  # (B, 1); NaN for an empty row
    return m & (ent > q)


def simko_token_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    topk_logp: torch.Tensor,
    old_topk_logp: torch.Tensor,
    is_argmax: torch.Tensor,
    entropy: torch.Tensor,
    adv: torch.Tensor,
    mask: torch.Tensor,
    *,
    simko_top_k: int = 3,
    simko_tau: float = 0.8,
    simko_mix: float = 0.01,
    simko_neg_scale: float = 1.1,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
) -> torch.Tensor:
    """Per-token loss l (B, T) (aggregate it with `aggregate`), 0 on padding.

    logp, old_logp (B, T): the sampled token under pi_theta (grad) and pi_old; topk_logp,
    old_topk_logp (B, T, K): the K most likely candidates of the training forward (grad) and their
    pi_old log-probs; is_argmax (B, T) bool: the sampled token is the argmax; entropy (B, T);
    adv (B,) or (B, T), no grad. See the module docstring for the formula."""
    if topk_logp.shape != (*logp.shape, simko_top_k) or old_topk_logp.shape != topk_logp.shape:
        raise ValueError(
            f"topk_logp and old_topk_logp must be (B, T, simko_top_k) = {(*logp.shape, simko_top_k)}, "
            f"got {tuple(topk_logp.shape)} and {tuple(old_topk_logp.shape)}: SimKO needs the top-K "
            "log-probs of the training forward"
        )
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


# ----------------------------------------------------------------------------- its declaration
# (the `simko` extension, harness/objective/extensions.py: on when simko_top_k > 0)
KNOBS = (
    Knob(
        "simko_top_k",
        0,
        "SimKO (2510.14807): K top candidates per token that share the gradient of a correct "
        "response at high-entropy tokens; 0 = SimKO off (the trainer then computes no top-K log-probs)",
        ge=0,
    ),
    Knob(
        "simko_tau",
        0.8,
        "SimKO: a token is gated when its entropy exceeds this quantile of its response's token entropies",
        gt=0,
        lt=1,
    ),
    Knob(
        "simko_mix",
        0.01,
        "SimKO: share of a gated token's gradient spread over the top-K candidates (correct responses)",
        ge=0,
        le=1,
    ),
    Knob("simko_neg_scale", 1.1, "SimKO: A <- simko_neg_scale * A at gated argmax tokens of wrong responses", ge=0),
)
WHY = "SimKO's loss is the token-level PPO clip of its mixed ratio (docs/objective.md, 'Token statistics')"


def gather_logprobs(view, index: torch.Tensor) -> torch.Tensor:
    """(B, T, K) log-probs of the tokens `index` (B, T, K) under the forward `view`, 0 on padding."""
    return view.logprobs_at(index)


def old_topk(cfg, view) -> dict[str, torch.Tensor]:
    """From pi_old's forward: its K most likely tokens per response token (B, T, K) and their log-probs."""
    index = view.topk_index(cfg.simko_top_k)
    return {"topk_index": index, "old_topk_logp": gather_logprobs(view, index)}


def train_topk(cfg, view, extras) -> dict[str, torch.Tensor]:
    """From the training forward (with grad): the log-probs of pi_old's top-K tokens now (B, T, K), and
    whether the sampled token is pi_old's argmax (B, T)."""
    if "topk_index" not in extras:
        raise ValueError(
            f"simko_top_k={cfg.simko_top_k} needs pi_old's top-K tokens (extras['topk_index'], from "
            "the old policy's forward: needs.old_forward)"
        )
    index = extras["topk_index"].to(view.logz.device)
    return {"topk_logp": gather_logprobs(view, index), "is_argmax": view.response_ids.to(index.device) == index[..., 0]}


def token_loss(cfg, logp, old_logp, adv, mask, entropy, extras) -> torch.Tensor:
    """The surrogate replaced by `simko_token_loss` (l (B, T)), from the extras the forwards gave."""
    names = ("topk_logp", "old_topk_logp", "is_argmax")
    if any(extras.get(n) is None for n in names) or entropy is None:
        raise ValueError(
            f"simko_top_k={cfg.simko_top_k} needs the top-K log-probs of the training forward and of "
            "pi_old, the argmax flag and the entropy of every response token (LossInputs extras "
            "topk_logp, old_topk_logp, is_argmax and .entropy): inputs_needed(obj).train_forward"
        )
    topk_logp, old_topk_logp, is_argmax = (extras[n] for n in names)
    return simko_token_loss(
        logp,
        old_logp,
        topk_logp,
        old_topk_logp.to(logp.dtype),
        is_argmax.to(mask.device),
        entropy,
        adv,
        mask,
        simko_top_k=cfg.simko_top_k,
        simko_tau=cfg.simko_tau,
        simko_mix=cfg.simko_mix,
        simko_neg_scale=cfg.simko_neg_scale,
        eps_low=cfg.eps_low,
        eps_high=cfg.eps_high,
    )
