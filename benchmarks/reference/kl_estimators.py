"""Reference outputs of the KL estimators and TRL's bias-corrected KL, for tests/objective/test_objective_kl_estimators.py.

    python benchmarks/reference/kl_estimators.py   # rewrites tests/objective/fixtures/kl_estimators.json

On fixed random log-probs with padding (the policy's, the behaviour policy's, the reference's; a response mask with
rows of every length, one row empty) it runs the peers' own code, copied below verbatim (neither verl nor TRL is
installed in the project's environment; the copies come from the wheels on PyPI, bodies verbatim, docstrings
left out):

  verl 0.9.1  verl/trainer/ppo/core_algos.py `kl_penalty` (l. 2188-2213) and `kl_penalty_forward` (l. 2216-2251):
              every estimator name verl accepts (kl/k1, abs, mse/k2, low_var_kl/k3) and each with the
              straight-through '+' suffix; stored: the per-token value and its gradient w.r.t. `logprob` (of the
              masked sum);
  TRL 1.16    trl/trainer/grpo_trainer.py `_compute_loss`, the ratio, the KL and its bias correction (l. 3057-3105),
              loss_type "grpo"'s clipped surrogate (l. 3113-3120), the KL added to the token loss (l. 3149-3150) and
              grpo's aggregation (l. 3154), with `self` a namespace holding the config's values; stored: the
              loss and its gradient w.r.t. `per_token_logps`, at importance_sampling_level token and sequence, with
              use_bias_correction_kl true and false.

For verl the log-ratios reach past its clamps (|ref - logp| > 20 on two tokens, k3 > 10 on others) so that the
clamped estimator is told apart from the unclamped one; TRL's loss is taken against a reference near the policy
(trl_ref_logp), where no token's k3 is in the millions.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import torch

OUT = Path(__file__).resolve().parents[2] / "tests" / "objective" / "fixtures" / "kl_estimators.json"


# ----------------------------------------------------------------------------- verl 0.9.1 (copied)
def kl_penalty(logprob: torch.FloatTensor, ref_logprob: torch.FloatTensor, kl_penalty) -> torch.FloatTensor:
    # Strip the optional '+' suffix so e.g. "k3+" dispatches to "k3".
    base_kl_penalty = kl_penalty[:-1] if kl_penalty.endswith("+") else kl_penalty
    forward_score = kl_penalty_forward(logprob, ref_logprob, base_kl_penalty)
    if not kl_penalty.endswith("+") or kl_penalty in ("mse", "k2"):
        return forward_score

    backward_score = 0.5 * (logprob - ref_logprob).square()

    return backward_score - backward_score.detach() + forward_score.detach()


def kl_penalty_forward(logprob: torch.FloatTensor, ref_logprob: torch.FloatTensor, kl_penalty) -> torch.FloatTensor:
    if kl_penalty in ("kl", "k1"):
        return logprob - ref_logprob

    if kl_penalty == "abs":
        return (logprob - ref_logprob).abs()

    if kl_penalty in ("mse", "k2"):
        return 0.5 * (logprob - ref_logprob).square()

    # J. Schulman. Approximating kl divergence, 2020.
    # # URL http://joschu.net/blog/kl-approx.html.
    if kl_penalty in ("low_var_kl", "k3"):
        kl = ref_logprob - logprob
        # For numerical stability
        kl = torch.clamp(kl, min=-20, max=20)
        ratio = torch.exp(kl)
        kld = (ratio - kl - 1).contiguous()
        return torch.clamp(kld, min=-10, max=10)

    if kl_penalty == "full":
        # so, here logprob and ref_logprob should contain the logits for every token in vocabulary
        raise NotImplementedError

    raise NotImplementedError


# ----------------------------------------------------------------------------- TRL 1.16 (copied)
def trl_grpo_loss(self, per_token_logps, old_per_token_logps, ref_per_token_logps, advantages, mask):
    """_compute_loss's lines for loss_type grpo, beta != 0, no entropy mask, no vLLM correction, no delta."""
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1)
    log_ratio = per_token_logps - old_per_token_logps
    if self.importance_sampling_level == "token":
        log_importance_weights = log_ratio
    elif self.importance_sampling_level == "sequence":
        log_importance_weights = (log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
        log_importance_weights = log_importance_weights.unsqueeze(-1)

    coef_1 = torch.exp(log_importance_weights)

    # Compute the KL divergence between the model and the reference model
    if self.beta != 0.0:
        per_token_kl = torch.exp(ref_per_token_logps - per_token_logps) - (ref_per_token_logps - per_token_logps) - 1
        # Importance sampling correction for the KL divergence
        if self.args.use_bias_correction_kl:
            per_token_kl = per_token_kl * coef_1

    coef_2 = torch.clamp(coef_1, 1 - self.epsilon_low, 1 + self.epsilon_high)
    per_token_loss1 = coef_1 * advantages
    per_token_loss2 = coef_2 * advantages
    per_token_loss = -torch.min(per_token_loss1, per_token_loss2)

    if self.beta != 0.0:
        per_token_loss = per_token_loss + self.beta * per_token_kl

    loss = ((per_token_loss * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    return loss


# ----------------------------------------------------------------------------- the fixture
B, T = 6, 7
VERL_NAMES = ["kl", "abs", "mse", "low_var_kl", "k1", "k2", "k3", "kl+", "k1+", "abs+", "k3+", "low_var_kl+"]
TRL_CONFIG = {"beta": 0.04, "epsilon_low": 0.2, "epsilon_high": 0.2}


def _inputs(gen: torch.Generator) -> dict[str, torch.Tensor]:
    lengths = torch.tensor([T, 1, 4, 0, 6, 3])  # every length, one row without a response token
    mask = (torch.arange(T)[None, :] < lengths[:, None]).to(torch.float64)
    logp = -torch.rand(B, T, generator=gen, dtype=torch.float64) * 3
    old = logp + 0.3 * torch.randn(B, T, generator=gen, dtype=torch.float64)
    ref = logp + 1.2 * torch.randn(B, T, generator=gen, dtype=torch.float64)
    ref[0, 1], ref[2, 3] = logp[0, 1] + 3.5, logp[2, 3] + 2.8  # k3 past verl's clamp at 10
    ref[0, 4], ref[4, 2] = logp[0, 4] + 22.0, logp[4, 2] - 21.0  # |log r| past verl's clamp at 20
    adv = torch.randn(B, generator=gen, dtype=torch.float64)
    trl_ref = logp + 0.5 * torch.randn(B, T, generator=gen, dtype=torch.float64)  # a reference the policy is near
    return {"logp": logp, "old_logp": old, "ref_logp": ref, "trl_ref_logp": trl_ref, "adv": adv, "mask": mask}


def _verl(x: dict) -> dict:
    out = {}
    for name in VERL_NAMES:
        lp = x["logp"].clone().requires_grad_(True)
        k = kl_penalty(lp, x["ref_logp"], name)
        (grad,) = torch.autograd.grad((k * x["mask"]).sum(), lp)
        out[name] = {"value": k.detach().tolist(), "grad": grad.tolist()}
    return out


def _trl(x: dict) -> dict:
    out = {}
    for level in ("token", "sequence"):
        for bias in (True, False):
            cfg = SimpleNamespace(**TRL_CONFIG, importance_sampling_level=level)
            cfg.args = SimpleNamespace(use_bias_correction_kl=bias)
            lp = x["logp"].clone().requires_grad_(True)
            loss = trl_grpo_loss(cfg, lp, x["old_logp"], x["trl_ref_logp"], x["adv"], x["mask"])
            (grad,) = torch.autograd.grad(loss, lp)
            out[f"{level}/bias={str(bias).lower()}"] = {"loss": loss.item(), "grad": grad.tolist()}
    return out


def build() -> dict:
    x = _inputs(torch.Generator().manual_seed(2512))
    return {
        "about": "written by benchmarks/reference/kl_estimators.py: verl 0.9.1 kl_penalty and TRL 1.16 "
        "_compute_loss's KL with use_bias_correction_kl, copied verbatim",
        "inputs": {k: v.tolist() for k, v in x.items()},
        "verl": _verl(x),
        "trl_config": TRL_CONFIG,
        "trl": _trl(x),
    }


if __name__ == "__main__":
    OUT.write_text(json.dumps(build(), indent=1) + "\n")
    print(OUT)
