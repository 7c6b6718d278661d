"""λ-GRPO's learnable length weighting (arXiv 2510.06870), docs/objective.md, "λ-GRPO".

Trained as `agg: lambda_length` (preset `lambda_grpo`): λ is a component of the run
(harness/train/core/components.py, `lambda`): one scalar parameter from `lambda_init` with its own
AdamW at `lambda_lr` (no weight decay), stepped with the policy, checkpointed and resumed, logged as
`agg/lambda`. The trainer's mini-batches are random rows, so each row carries its group's lengths
(`group_lengths` (B, G), its position `group_pos` (B,)) and `lambda_row_weights` computes its f_i.

Glossary: B = N*G sequences (groups contiguous), T padded response length, M response mask (B, T),
|o_i| = sum_t M[i, t]. Per group g of G responses:

    mu_g = mean_j |o_j|,  sigma_g = std_j |o_j|                    (population std)
    z_i  = (|o_i| - mu_g) / sigma_g                                 (0 when sigma_g = 0)
    h_i  = max(1 + r z_i, 1e-6),  r = lambda_r
    f_i  = G * softmax_j(h_j^lambda)_i                              (sum_i f_i = G)
    loss = sum_i f_i sum_t M l_it / sum_{i,t} M                     (the whole mini-batch's token count)

At λ = 0 every h^0 = 1, f_i = 1 exactly and the loss is `token_mean`'s, bit for bit (tested);
λ < 0 favours short responses (towards GRPO's 1/|o_i|), λ > 0 long ones.

Where the paper left a choice (we could not read its code), picked here and said so:
  - the std of the lengths is the population one (N), and a group of equal lengths has z = 0;
  - h is floored at 1e-6 so that h^λ is defined when r z_i <= -1 (a very short response);
  - the weights are normalised within each group (G softmax over the G responses of a prompt),
    not over the whole batch;
  - the denominator is the mini-batch's token count (token_mean's), so λ = 0 is DAPO's loss;
  - λ is learned by gradient descent on this same loss (its gradient is `loss.backward()`'s).
"""

from __future__ import annotations

import torch

from harness.objective.extensions import Hooks
from harness.objective.modes import Knob


def lambda_length_weights(
    lengths: torch.Tensor, group_size: int, lam: torch.Tensor | float, lambda_r: float
) -> torch.Tensor:
    """f (B,) from response lengths (B,) (groups of `group_size` contiguous): the module docstring's
    f_i = G softmax(h^λ)_i. Differentiable in `lam` (a 0-dim tensor with grad, or a float)."""
    if lengths.dim() != 1 or group_size < 1 or lengths.shape[0] % group_size:
        raise ValueError(
            f"lengths must be (B,) with B divisible by group_size={group_size}, got {tuple(lengths.shape)}"
        )
    L = lengths.to(torch.get_default_dtype()).view(-1, group_size)  # (N, G)
    sigma = L.std(-1, correction=0, keepdim=True)
    z = torch.where(sigma > 0, (L - L.mean(-1, keepdim=True)) / torch.where(sigma > 0, sigma, 1.0), 0.0)
    h = (1.0 + lambda_r * z).clamp(min=1e-6)
    lam_t = torch.as_tensor(lam, dtype=h.dtype)
    g = torch.pow(h, lam_t)  # h^λ: exactly 1 at λ = 0
    e = torch.exp(g - g.amax(-1, keepdim=True))
    f = e * group_size / e.sum(-1, keepdim=True)  # G * softmax; all-equal g -> exactly 1
    return f.reshape(-1)


def group_length_rows(lengths: torch.Tensor, group_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(group_lengths (B, G), group_pos (B,)): each row's group's lengths and its position in the
    group (groups of `group_size` contiguous rows), so a row's weight survives any row selection."""
    if lengths.dim() != 1 or group_size < 1 or lengths.shape[0] % group_size:
        raise ValueError(
            f"lengths must be (B,) with B divisible by group_size={group_size}, got {tuple(lengths.shape)}"
        )
    L = lengths.view(-1, group_size)
    rows = L.repeat_interleave(group_size, dim=0)  # (B, G)
    pos = torch.arange(lengths.shape[0], device=lengths.device) % group_size
    return rows, pos


def lambda_row_weights(
    group_lengths: torch.Tensor, group_pos: torch.Tensor, lam: torch.Tensor | float, lambda_r: float
) -> torch.Tensor:
    """f_i (b,) of rows taken from anywhere in the batch: `lambda_length_weights` of each row's group
    (group_lengths (b, G)) read at the row's position (group_pos (b,)). Differentiable in `lam`."""
    G = group_lengths.shape[-1]
    f = lambda_length_weights(group_lengths.reshape(-1), G, lam, lambda_r).view(-1, G)  # (b, G)
    return f.gather(1, group_pos.long().view(-1, 1)).squeeze(1)


# ----------------------------------------------------------------------------- its declaration
# (agg: lambda_length, harness/objective/aggregation.py; λ is the trained component `lam`)
KNOBS = (
    Knob("lambda_init", 0.0, "λ-GRPO (2510.06870): λ's starting value; 0 = token_mean exactly", type=float),
    Knob("lambda_lr", 1e-2, "λ-GRPO: AdamW learning rate of the learned scalar λ (no weight decay)", gt=0),
    Knob("lambda_r", 0.5, "λ-GRPO: h_i = max(1 + lambda_r z_i, 1e-6), z_i the length's z-score in its group", gt=0),
)


def _scoring(cfg, rewards: torch.Tensor, mask: torch.Tensor, group_size: int) -> dict[str, torch.Tensor]:
    """Each row's group lengths (B, G) and its place in the group (B,): the weights of random mini-batch rows."""
    lengths, pos = group_length_rows((mask > 0).sum(-1), group_size)
    return {"group_lengths": lengths, "group_pos": pos}


def _row_weights(cfg, extras) -> torch.Tensor:
    """f_i (b,), differentiable in the learned λ (extras['lam'])."""
    if any(extras.get(k) is None for k in ("lam", "group_lengths", "group_pos")):
        raise ValueError(
            "agg='lambda_length' needs lam (the learned λ), group_lengths (b, G) and group_pos (b,) "
            "in LossInputs.extras: inputs_needed(obj).components ('lam') and its scoring"
        )
    return lambda_row_weights(extras["group_lengths"], extras["group_pos"], extras["lam"], cfg.lambda_r)


def _metric(cfg, x, num_seqs, num_tokens):
    lam = x.extras.get("lam")
    return None, ({} if lam is None else {"agg/lambda": float(lam.detach())})


HOOKS = Hooks(component="lam", scoring=_scoring, row_weights=_row_weights, loss_term=_metric)
