"""Padding is replaced by 0 in one place (objective/padding.py), once per input of policy_loss; the
token log-ratio is clamped at ±20 before the exp, as verl's (docs/objective.md, "Importance ratio")."""

import math

import torch

import harness.objective.padding as padding
from harness.objective import ObjectiveConfig, importance_ratio, policy_loss
from harness.objective.ratios import LOG_RATIO_BOUND

MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])


def test_the_token_ratio_is_bounded_at_exp_20_and_stays_finite():
    logp = torch.tensor([[100.0, -100.0, 0.0], [0.5, 0.0, 0.0]], requires_grad=True)
    rho = importance_ratio("token", logp, torch.zeros(2, 3), MASK)
    assert LOG_RATIO_BOUND == 20.0
    assert torch.isfinite(rho).all()
    assert math.isclose(rho[0, 0].item(), math.exp(20), rel_tol=1e-6)
    assert math.isclose(rho[0, 1].item(), math.exp(-20), rel_tol=1e-6)
    assert math.isclose(rho[1, 0].item(), math.exp(0.5), rel_tol=1e-6)  # inside the bound: unchanged
    rho.sum().backward()
    assert logp.grad[0, 0] == 0 and logp.grad[0, 1] == 0 and logp.grad[1, 0] > 0


def test_policy_loss_cleans_each_input_once(monkeypatch):
    seen = []
    real = padding.zero_padding

    def spy(x, m, dtype=None):
        seen.append(x.data_ptr())
        return real(x, m, dtype)

    monkeypatch.setattr("harness.objective.policy.zero_padding", spy)
    monkeypatch.setattr("harness.objective.ratios.zero_padding", spy)
    logp = torch.tensor([[-1.0, -2.0, float("-inf")], [-0.5, float("nan"), float("-inf")]], requires_grad=True)
    old = torch.tensor([[-1.1, -2.1, float("nan")], [-0.4, float("-inf"), 0.0]])
    ref = torch.tensor([[-1.0, -1.9, float("nan")], [-0.6, float("-inf"), 0.0]])
    loss, _ = policy_loss(ObjectiveConfig.preset("grpo"), logp, old, torch.tensor([1.0, -1.0]), MASK, ref)
    assert len(seen) == 3 and len(set(seen)) == 3  # logp, old_logp, ref_logp: each once, never again downstream
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logp.grad).all() and (logp.grad[MASK == 0] == 0).all()
