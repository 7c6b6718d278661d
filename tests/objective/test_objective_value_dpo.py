"""PPO value loss and DPO / IPO by hand."""

from __future__ import annotations

import math

import pytest
import torch

from harness.objective import ObjectiveConfig, dpo_loss, explained_variance, value_loss


def T(x, **kw):
    """float64 tensor (hand values are compared at 1e-12)."""
    return torch.tensor(x, dtype=torch.float64, **kw)


def test_value_loss_clipping_by_hand():
    cfg = ObjectiveConfig.preset("ppo")  # value_clip 0.2, vf_coef 0.1, agg token_mean
    values = T([[1.5, 0.5, 9.0]], requires_grad=True)
    old = T([[1.0, 0.4, 0.0]])
    ret = T([[2.0, 0.0, 0.0]])
    mask = T([[1, 1, 0]])
    # token 0: V-R = -0.5 -> 0.25; V_clip = 1.0 + clip(0.5, +-0.2) = 1.2 -> (1.2-2)^2 = 0.64; 0.5*max = 0.32
    # token 1: V - V_old = 0.1 inside the band -> V_clip = V; 0.5 * 0.5^2 = 0.125
    # token_mean (0.32 + 0.125)/2 = 0.2225; * vf_coef 0.1 = 0.02225
    loss, m = value_loss(cfg, values, old, ret, mask)
    assert loss.item() == pytest.approx(0.02225, abs=1e-12)
    assert m["loss/value"] == pytest.approx(0.02225, abs=1e-12)
    assert m["value/clip_frac"] == pytest.approx(0.5, abs=1e-12)
    (g,) = torch.autograd.grad(loss, values)
    # token 0: the clipped branch wins, V_clip is constant in V -> 0; token 1: 0.1 * (V - R) / 2 = 0.025
    torch.testing.assert_close(g, T([[0.0, 0.025, 0.0]]), rtol=0, atol=1e-12)
    # unclipped: 0.1 * 0.5 * (0.25 + 0.25) / 2 = 0.0125
    plain, _ = value_loss(cfg.model_copy(update={"value_clip": None}), values, old, ret, mask)
    assert plain.item() == pytest.approx(0.0125, abs=1e-12)


def test_value_clip_frac_counts_no_token_inside_the_band():
    """Inside the band V_clip = V_old + (V - V_old) equals V only up to rounding: in fp32, V = 0.2409158,
    V_old = 0.1156637 (a pair from a PPO run) gives V_clip = V - 1.5e-8, so the clipped branch is the
    larger for a return just above V (0.25). Such a token is not clipped (its gradient is V's); one past the band
    whose clipped branch is larger is."""
    cfg = ObjectiveConfig.preset("ppo")  # value_clip 0.2
    f32 = dict(dtype=torch.float32)  # (this folder's default is float64)
    v, v_old = torch.tensor([[0.24091584980487823]], **f32), torch.tensor([[0.11566365510225296]], **f32)
    ret, mask = torch.tensor([[0.25]], **f32), torch.ones(1, 1, **f32)
    v_clip = v_old + torch.clamp(v - v_old, -0.2, 0.2)
    assert v_clip.item() != v.item() and ((v_clip - ret) ** 2 > (v - ret) ** 2).item()  # rounding alone
    _, m = value_loss(cfg, v, v_old, ret, mask)
    assert m["value/clip_frac"] == 0.0
    # past the band: V - V_old = 0.3; token 0's return lies beyond V (the clipped branch, nearer V_old, is
    # further from it: larger -> clipped); token 1's return lies below V_old (the unclipped is larger)
    _, m = value_loss(cfg, T([[1.3, 1.3]]), T([[1.0, 1.0]]), T([[2.0, 0.0]]), T([[1, 1]]))
    assert m["value/clip_frac"] == pytest.approx(0.5, abs=1e-12)


def test_explained_variance():
    # R = [1, 2, 3], V = [1, 2, 2]: Var[R - V] = Var[0, 0, 1] = 2/9, Var[R] = 2/3 -> 1 - 1/3 = 2/3
    ev = explained_variance(T([[1.0, 2.0, 2.0, 7.0]]), T([[1.0, 2.0, 3.0, 0.0]]), T([[1, 1, 1, 0]]))
    assert ev == pytest.approx(2 / 3, abs=1e-12)
    assert math.isnan(explained_variance(torch.zeros(1, 2), torch.ones(1, 2), torch.ones(1, 2)))


# pair 1: chosen -10 vs ref -12 (+2), rejected -15 vs ref -14 (-1): h = 3
# pair 2: chosen  -5 vs ref  -5 ( 0), rejected  -6 vs ref  -7 (+1): h = -1
PC, PR, RC, RR = T([-10.0, -5.0]), T([-15.0, -6.0]), T([-12.0, -5.0]), T([-14.0, -7.0])


def test_dpo_sigmoid_by_hand():
    cfg = ObjectiveConfig.preset("dpo")  # beta 0.1
    pc = PC.clone().requires_grad_()
    loss, m = dpo_loss(cfg, pc, PR, RC, RR)
    # z = 0.1*h = [0.3, -0.1]; -log sigma(z) = log(1 + e^-z) = [0.5543552, 0.7443967] -> mean 0.6493760
    expected = (math.log1p(math.exp(-0.3)) + math.log1p(math.exp(0.1))) / 2
    assert loss.item() == pytest.approx(expected, abs=1e-12)
    assert expected == pytest.approx(0.6493760, abs=1e-7)
    assert m["loss/dpo"] == pytest.approx(expected, abs=1e-12)
    # rewards: chosen beta*[2, 0] -> mean 0.1; rejected beta*[-1, 1] -> mean 0; margin mean [0.3, -0.1] = 0.1
    assert m["rewards/chosen"] == pytest.approx(0.1, abs=1e-12)
    assert m["rewards/rejected"] == pytest.approx(0.0, abs=1e-12)
    assert m["rewards/margin"] == pytest.approx(0.1, abs=1e-12)
    assert m["rewards/accuracy"] == pytest.approx(0.5, abs=1e-12)
    assert m["logps/chosen"] == pytest.approx(-7.5) and m["logps/rejected"] == pytest.approx(-10.5)
    # d loss / d pi_c = -beta * sigma(-z) / B
    (g,) = torch.autograd.grad(loss, pc)
    sig = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    torch.testing.assert_close(g, T([-0.1 * sig(-0.3) / 2, -0.1 * sig(0.1) / 2]), rtol=0, atol=1e-12)


def test_ipo_by_hand():
    # on the token sums (the per-token default: tests/objective/test_trl_dpo_losses.py)
    cfg = ObjectiveConfig.preset("dpo", dpo_loss_type="ipo", dpo_ipo_length_norm=False)  # tau = beta = 0.1 -> 5
    loss, _ = dpo_loss(cfg, PC, PR, RC, RR)
    # (h - 5)^2 = [(3-5)^2, (-1-5)^2] = [4, 36] -> mean 20
    assert loss.item() == pytest.approx(20.0, abs=1e-12)


def test_rpo_sft_term_by_hand():
    """RPO (2404.19733): DPO + alpha * mean(-pi_c / |y_c|)."""
    cfg = ObjectiveConfig.preset("dpo", dpo_sft_coef=0.5)
    pc = PC.clone().requires_grad_()
    lengths = T([5.0, 3.0])
    loss, m = dpo_loss(cfg, pc, PR, RC, RR, chosen_lengths=lengths)
    dpo_only = (math.log1p(math.exp(-0.3)) + math.log1p(math.exp(0.1))) / 2
    # pi_c = [-10, -5], |y_c| = [5, 3] -> NLL per token [2, 5/3] -> mean 11/6; alpha 0.5 -> + 11/12
    assert m["loss/sft"] == pytest.approx(11 / 6, abs=1e-12)
    assert m["loss/dpo"] == pytest.approx(dpo_only, abs=1e-12)
    assert loss.item() == pytest.approx(dpo_only + 11 / 12, abs=1e-12)
    # the SFT term adds -alpha / (B |y_c|) to d loss / d pi_c
    (g,) = torch.autograd.grad(loss, pc)
    sig = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    expected = [-0.1 * sig(-0.3) / 2 - 0.5 / (2 * 5), -0.1 * sig(0.1) / 2 - 0.5 / (2 * 3)]
    torch.testing.assert_close(g, T(expected), rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="chosen_lengths"):
        dpo_loss(cfg, PC, PR, RC, RR)


def test_dpo_shapes():
    with pytest.raises(ValueError, match="same B"):
        dpo_loss(ObjectiveConfig.preset("dpo"), PC, PR[:1], RC, RR)
