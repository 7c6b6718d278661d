"""SimKO through the trainer's calls (harness/objective/api.py, docs/objective.md, "The trainer's calls",
"Token statistics"): the `simko` preset asks for the top-K log-probs, `loss` reproduces the worked example's gradient
coefficients (through the aggregation), and without the top-K inputs it raises."""

from __future__ import annotations

import pytest
import torch

from harness.config import ConfigError, load_config
from harness.objective import LossInputs, ObjectiveConfig, inputs_needed, loss

ENT = [[0.1, 0.5, 2.0, 0.3, 1.2]]  # only the third token is above the 0.8 quantile (1.36)


def T(x):
    return torch.tensor(x, dtype=torch.float64)


def _grads(adv, is_argmax, obj):
    lp = torch.log(T([[0.5, 0.6, 0.3, 0.7, 0.4]])).requires_grad_()
    topk = torch.log(T([[[0.5, 0.2, 0.1]] * 5])).requires_grad_()
    x = LossInputs(
        logp=lp,
        old_logp=lp.detach(),
        adv=T([adv]),
        mask=torch.ones(1, 5, dtype=torch.float64),
        entropy=T(ENT),
        topk_logp=topk,
        old_topk_logp=topk.detach(),
        is_argmax=torch.tensor([is_argmax]),
    )
    total, _ = loss(obj, x, 1, 5)
    return torch.autograd.grad(total, (lp, topk), allow_unused=True)  # SimKO off: topk unused


def test_the_preset_asks_for_top_k_log_probs_only_when_on():
    on, off = inputs_needed(ObjectiveConfig.preset("simko")), inputs_needed(ObjectiveConfig.preset("grpo"))
    assert on.old_forward and on.train_forward  # pi_old's top-K, then their log-probs in the training forward
    assert not off.old_forward and not off.train_forward


def test_loss_reproduces_the_worked_example_coefficients():
    obj = ObjectiveConfig.preset("simko", kl_coef=0.0)  # seq_mean_token_mean over one row of 5 tokens: / 5
    g_lp, g_topk = _grads(0.75, [False] * 5, obj)
    torch.testing.assert_close(g_lp * 5, T([[-0.75, -0.75, -0.7425, -0.75, -0.75]]), rtol=0, atol=1e-12)
    torch.testing.assert_close(g_topk[0, 2] * 5, T([-0.0025] * 3), rtol=0, atol=1e-12)
    assert (g_topk[0, [0, 1, 3, 4]] == 0).all()
    g_lp, g_topk = _grads(-0.25, [True] * 5, obj)  # A -> 1.1 * -0.25 = -0.275 at the gated argmax token
    torch.testing.assert_close(g_lp * 5, T([[0.25, 0.25, 0.275, 0.25, 0.25]]), rtol=0, atol=1e-12)
    assert (g_topk == 0).all()
    # the same knobs with SimKO off: the plain PPO coefficients -A
    g_lp, _ = _grads(-0.25, [True] * 5, ObjectiveConfig.preset("simko", kl_coef=0.0, simko_top_k=0))
    torch.testing.assert_close(g_lp * 5, torch.full((1, 5), 0.25, dtype=torch.float64), rtol=0, atol=1e-12)


def test_loss_without_top_k_inputs_raises():
    lp = torch.zeros(1, 5, dtype=torch.float64)
    x = LossInputs(logp=lp, old_logp=lp, adv=T([1.0]), mask=torch.ones(1, 5), entropy=T(ENT))
    with pytest.raises(ValueError, match="simko_top_k=3 needs the top-K log-probs"):
        loss(ObjectiveConfig.preset("simko"), x, 1, 5)


@pytest.mark.parametrize(
    "overrides", [dict(clip="cispo", eps_low=None, eps_high=4.0), dict(ratio="sequence"), dict(dual_clip=3.0)]
)
def test_simko_needs_the_token_ppo_clip(overrides):
    with pytest.raises(ValueError, match=r"allowed \w+ with simko_top_k > 0"):
        ObjectiveConfig.preset("simko", **overrides)


def test_run_config_refuses_simko_knobs_when_off():
    with pytest.raises(ConfigError, match="simko_mix"):
        load_config(None, ["objective.preset=grpo", "objective.simko_mix=0.1"])
