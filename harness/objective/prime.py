"""PRIME's implicit process rewards (arXiv 2502.01456), docs/objective.md, "PRIME" -- the math only.

Trained by the RL loop as `baseline: prime` (preset `prime`, docs/objective.md, "PRIME"): the implicit
process reward model pi_phi is a component (harness/train/core/components.py) like PPO's critic,
initialised from the warm start, stepped with the policy at `prm_lr` on the outcome labels,
checkpointed and resumed with the run. The token rewards come from pi_phi BEFORE the step's update
(the scores of the rollout), then the update trains it. The knobs below are ObjectiveConfig fields.

Glossary: N prompts, G group size (PRIME's n), B = N*G sequences (groups contiguous), T padded
response length, M response mask (B, T). q = log pi_phi - log pi_ref of the sampled tokens (B, T).

    process reward     r^p_t = prime_beta * q_t                     (the implicit PRM's token reward)
    reward-model loss  BCE(sigmoid(prime_beta * sum_t M q_t), outcome)   (binary outcomes)
    advantages         RLOO over the group of the process rewards (x prime_coef) and of the outcome
                       at the last token (x outcome_coef), summed; returns = reverse cumulative sums;
                       advantages = the returns whitened over the batch's response tokens; PPO-clip loss.

This follows verl's PRIME recipe (the `prime_*` of verl/recipe/prime), whose worked example is
tested to 1e-6, including three details of that code:
  - it DROPS the last response token's process reward (prime_keep_last_token=False); the PRIME
    repository keeps it (prime_keep_last_token=True; also tested);
  - before the RLOO it divides the process rewards by the batch's largest |reverse cumulative sum|
    + 1e-6 (its `prime_norm: batch_norm`);
  - its RLOO of the process rewards is per token: r_t n/(n-1) - (sum_j mean_t r_j)/(n-1), the group's
    per-response token means (the response's own included) over n - 1; its whitening uses the
    sample variance and (x - mean) / sqrt(var + 1e-8). Here the objective's whitening
    (advantages.whiten: (x - mean) / (std + adv_eps)); the two differ by ~1e-7 on the worked example.
"""

from __future__ import annotations

import torch

from harness.objective.advantages import BINARY, check_binary, whiten
from harness.objective.extensions import Hooks, Scored
from harness.objective.modes import Knob, Requires, register_baseline


def _last_token(mask: torch.Tensor) -> torch.Tensor:
    """(B, T) bool: the last response token of each row (right-padded mask)."""
    m = mask > 0
    lengths = m.sum(-1)
    out = torch.zeros_like(m)
    rows = torch.nonzero(lengths > 0).flatten()
    out[rows, lengths[rows] - 1] = True
    return out


def prime_process_rewards(
    q: torch.Tensor, mask: torch.Tensor, prime_beta: float = 0.05, prime_keep_last_token: bool = False
) -> torch.Tensor:
    """Token rewards (B, T) = prime_beta * q on the response tokens, no grad; the last response
    token's is 0 unless prime_keep_last_token (verl drops it, the PRIME repository keeps it)."""
    m = mask > 0
    r = torch.where(m, prime_beta * q.detach(), torch.zeros_like(q))
    if not prime_keep_last_token:
        r = torch.where(_last_token(m), torch.zeros_like(r), r)
    return r


def prime_rm_loss(
    q: torch.Tensor, mask: torch.Tensor, outcomes: torch.Tensor, prime_beta: float = 0.05, num_seqs: float | None = None
) -> torch.Tensor:
    """The implicit PRM's loss: mean over the rows with a response token of
    BCE(sigmoid(prime_beta * sum_t M q), outcome). q (B, T) carries the gradient of pi_phi;
    outcomes (B,) must be 0 or 1. num_seqs: the whole mini-batch's row count (the trainer's
    micro-batches then sum to the mini-batch's mean, like the policy loss, docs/objective.md, "Aggregation");
    None: this batch's."""
    check_binary(outcomes, "PRIME's reward-model loss")
    m = mask > 0
    rows = m.any(-1)
    score = prime_beta * torch.where(m, q, torch.zeros_like(q)).sum(-1)
    bce = torch.nn.functional.binary_cross_entropy_with_logits(score, outcomes.to(score.dtype), reduction="none")
    denom = float(rows.sum().item()) if num_seqs is None else float(num_seqs)
    return torch.where(rows, bce, torch.zeros_like(bce)).sum() / max(denom, 1.0)


def _sequence_scores(q: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B,) the PRM's score of each row, sum_t M q (no grad)."""
    return torch.where(mask > 0, q.detach(), torch.zeros_like(q)).sum(-1)


def prime_rm_accuracy(q: torch.Tensor, mask: torch.Tensor, outcomes: torch.Tensor) -> float:
    """`prm/accuracy`: share of sequences whose PRM score predicts the outcome (sum_t M q > 0 iff correct)."""
    score = _sequence_scores(q, mask)
    return float(((score > 0) == (outcomes > 0.5)).to(torch.float64).mean().item())


def prime_rm_auc(q: torch.Tensor, mask: torch.Tensor, outcomes: torch.Tensor) -> float | None:
    """`prm/auc`: the probability that a correct response's PRM score sum_t M q exceeds a wrong one's
    (ties count 1/2), over every (correct, wrong) pair of rows; chance is 0.5 whatever the pass rate
    (prm/accuracy's chance is the share of the majority outcome). None without both outcomes."""
    score = _sequence_scores(q, mask).to(torch.float64)
    pos, neg = score[outcomes > 0.5], score[outcomes <= 0.5]
    if len(pos) == 0 or len(neg) == 0:
        return None
    diff = pos.unsqueeze(1) - neg.unsqueeze(0)  # (P, N)
    return float(((diff > 0).to(torch.float64) + 0.5 * (diff == 0).to(torch.float64)).mean())


def _masked_rloo(r: torch.Tensor, m: torch.Tensor, n: int) -> torch.Tensor:
    """verl's per-token RLOO (module docstring) over groups of n contiguous rows; 0 off the mask."""
    if n < 2:
        raise ValueError(f"PRIME's RLOO needs group_size >= 2, got {n}")
    r = torch.where(m, r, torch.zeros_like(r))
    means = r.sum(-1) / m.sum(-1).clamp(min=1).to(r.dtype)  # (B,) mean over each row's masked tokens
    base = means.view(-1, n).sum(-1, keepdim=True).expand(-1, n).reshape(-1) / (n - 1)  # (B,)
    out = r * (n / (n - 1)) - base.unsqueeze(-1)
    return torch.where(m, out, torch.zeros_like(out))


def prime_advantages(
    process_rewards: torch.Tensor,
    outcomes: torch.Tensor,
    mask: torch.Tensor,
    group_size: int,
    prime_coef: float = 5.0,
    outcome_coef: float = 5.0,
    std: str = "sample",
    eps: float = 1e-6,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages (B, T), returns (B, T)), no grad, from the process rewards (B, T)
    (`prime_process_rewards`) and the binary outcomes (B,), groups of `group_size` contiguous:

        p   = process_rewards / (max_{i,t} |sum_{s>=t} process_rewards_is| + 1e-6)      (batch norm)
        R_t = prime_coef * rloo(p)_t + outcome_coef * [t last] * rloo(outcome)          (per token)
        returns_t = sum_{s>=t} M R_s;   advantages = whiten(returns) over the response tokens
    (advantages.whiten, the objective's `std` and `adv_eps`: the preset's scale=batch_std)."""
    check_binary(outcomes, "PRIME's outcome reward")
    m = mask > 0
    p = torch.where(m, process_rewards.detach(), torch.zeros_like(process_rewards))
    p = p / (p.flip(-1).cumsum(-1).flip(-1).abs().max() + 1e-6)
    last = _last_token(m)
    out = torch.where(last, outcomes.to(p.dtype).unsqueeze(-1).expand_as(p), torch.zeros_like(p))
    total = prime_coef * _masked_rloo(p, m, group_size) + outcome_coef * _masked_rloo(out, last, group_size)
    returns = torch.where(m, total, torch.zeros_like(total)).flip(-1).cumsum(-1).flip(-1)
    returns = torch.where(m, returns, torch.zeros_like(returns))
    return whiten(returns, m, std=std, eps=eps), returns


# ----------------------------------------------------------------------------- its declaration
# (baseline: prime; the implicit reward model is the trained component `prm_logp`)
KNOBS = (
    Knob(
        "prime_beta",
        0.05,
        "PRIME (2502.01456) beta: token reward beta*(log pi_phi - log pi_ref) of the implicit "
        "reward model, and its BCE's logit beta*sum_t of it",
        gt=0,
    ),
    Knob("prime_coef", 5.0, "PRIME: weight of the RLOO'd process rewards in the token return (verl recipe 5)", ge=0),
    Knob("outcome_coef", 5.0, "PRIME: weight of the RLOO'd outcome at the last token (verl recipe 5)", ge=0),
    Knob(
        "prm_lr",
        1e-4,
        "PRIME: AdamW learning rate of the implicit reward model (the paper: 1e-6 at 7B, twice the "
        "policy's; here train.lr's default)",
        gt=0,
    ),
    Knob(
        "prime_keep_last_token",
        False,
        "PRIME: keep the last response token's process reward (the PRIME "
        "repository) instead of dropping it (verl's recipe)",
    ),
)


def _rm_term(cfg, x, num_seqs, num_tokens):
    """The reward model's BCE(sigmoid(prime_beta sum_t M q), outcome) on the micro-batch (docs/objective.md,
    "PRIME")."""
    prm_logp = x.extras.get("prm_logp")
    if prm_logp is None:
        return None, {}
    if x.ref_logp is None or x.extras.get("outcomes") is None:
        raise ValueError(
            "prm_logp given without ref_logp (b, T) and outcomes (b,): the reward model's loss needs all three"
        )
    rm = prime_rm_loss(prm_logp - x.ref_logp.detach(), x.mask, x.extras["outcomes"], cfg.prime_beta, num_seqs)
    return rm, {"loss/prm": float(rm.detach())}


@register_baseline(
    "prime",
    doc="PRIME's implicit process rewards + outcome, RLOO over the group, returns whitened: per-token advantages "
    "(2502.01456, docs/objective.md, 'PRIME'); binary rewards, scale batch_std",
    knobs=KNOBS,
    min_group_size=2,
    requires=(
        Requires(
            "scale", ("batch_std",), "PRIME whitens its token returns over the batch (docs/objective.md, 'PRIME')"
        ),
        Requires(
            "kl_placement",
            why="PRIME's returns are built from its process and outcome rewards only",
            accepts=lambda v, cfg: v == "loss" or cfg.kl_coef == 0,
            allowed_text="'loss', or kl_coef=0",
        ),
        Requires("overlong_buffer", (0,), BINARY),
    ),
    hooks=Hooks(component="prm_logp", reference=True, loss_term=_rm_term),
    per_token=True,
)
def _scored(cfg, rewards: torch.Tensor, mask: torch.Tensor, group_size: int, inputs: dict) -> Scored:
    """PRIME's advantages (B, T) and the reward model's metrics on the step's batch (docs/objective.md, "PRIME"):
    prm/loss its BCE, prm/accuracy the share of rows whose score sum_t M q predicts the outcome,
    prm/auc the chance that a correct row scores above a wrong one (ranking; chance 0.5),
    reward/process_mean the mean token reward prime_beta * q over the response tokens. The outcomes
    are kept as the labels of the reward model's loss."""
    prm_logp, ref_logp = inputs.get("prm_logp"), inputs.get("ref_logp")
    if prm_logp is None or ref_logp is None:
        raise ValueError(
            "baseline='prime' needs prm_logp (the implicit reward model's log-probs) and ref_logp "
            "(the reference's), both (B, T): inputs_needed(obj).components / .ref_logp"
        )
    q = (prm_logp - ref_logp).detach()  # log pi_phi - log pi_ref per sampled token
    proc = prime_process_rewards(q, mask, cfg.prime_beta, cfg.prime_keep_last_token)
    adv, _ = prime_advantages(proc, rewards, mask, group_size, cfg.prime_coef, cfg.outcome_coef, cfg.std, cfg.adv_eps)
    m = mask > 0
    metrics = {
        "prm/loss": float(prime_rm_loss(q, mask, rewards, cfg.prime_beta)),
        "prm/accuracy": prime_rm_accuracy(q, mask, rewards),
        "reward/process_mean": float(proc[m].mean()) if m.any() else 0.0,
    }
    if (auc := prime_rm_auc(q, mask, rewards)) is not None:
        metrics["prm/auc"] = auc
    return Scored(adv=adv, returns=None, rewards=rewards, metrics=metrics, extras={"outcomes": rewards})
