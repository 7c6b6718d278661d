"""policy_loss: equivalences between presets and formulas, TIS, entropy, metrics, shape checks."""

from __future__ import annotations

import math

import pytest
import torch

from harness.objective import ObjectiveConfig, group_advantages, policy_loss


def T(x, **kw):
    """float64 tensor (hand values are compared at 1e-12)."""
    return torch.tensor(x, dtype=torch.float64, **kw)


LENGTHS = [5, 2, 4, 1, 3, 5]
REWARDS = T([1.0, 0.0, 1.0, 0.0, 0.0, 1.0])  # two groups of G = 3


def _mask():
    return T([[1.0] * n + [0.0] * (5 - n) for n in LENGTHS])


def _reinforce_grad(pol, adv_tok, mask, denom):
    """Hand REINFORCE: d/dW of -(sum_{i,t} M A_{i,t} logp_{i,t}) / denom."""
    return pol.grad(-(mask * adv_tok * pol.logp()).sum() / denom)


def test_gpg_is_reinforce_with_group_mean_baseline(make_policy):
    pol = make_policy(B=6, T=5, seed=1)
    mask = _mask()
    cfg = ObjectiveConfig.preset("gpg")
    adv = group_advantages(cfg, REWARDS, 3)
    # group means 2/3 and 1/3: r - mean = [1/3, -2/3, 1/3, -1/3, -1/3, 2/3]
    torch.testing.assert_close(adv, T([1 / 3, -2 / 3, 1 / 3, -1 / 3, -1 / 3, 2 / 3]), rtol=0, atol=1e-12)
    expected = _reinforce_grad(pol, adv.unsqueeze(-1), mask, mask.sum())
    for old in (pol.logp().detach(), pol.logp().detach() + pol.noise):  # no ratio: old_logp is irrelevant
        loss, m = policy_loss(cfg, pol.logp(), old, adv, mask)
        torch.testing.assert_close(pol.grad(loss), expected, rtol=1e-10, atol=1e-12)
        # value: rho = 1 -> -(sum M A) / sum M
        assert loss.item() == pytest.approx(-float((mask * adv.unsqueeze(-1)).sum() / mask.sum()), abs=1e-12)
        assert m["clip/frac"] == 0.0 and m["ratio/mean"] == 1.0 and m["ratio/max"] == 1.0


def test_cispo_with_huge_caps_on_policy_is_reinforce(make_policy):
    pol = make_policy(B=6, T=5, seed=2)
    mask = _mask()
    cfg = ObjectiveConfig.preset("cispo", eps_high=1e9)  # eps_low None: no lower bound
    adv = group_advantages(cfg, REWARDS, 3)
    loss, _ = policy_loss(cfg, pol.logp(), pol.logp().detach(), adv, mask)
    expected = _reinforce_grad(pol, adv.unsqueeze(-1), mask, mask.sum())
    torch.testing.assert_close(pol.grad(loss), expected, rtol=1e-10, atol=1e-12)
    # and equals the unclipped on-policy ratio surrogate -rho*A
    plain, _ = policy_loss(
        ObjectiveConfig(clip="none", agg="token_mean", kl_coef=0.0), pol.logp(), pol.logp().detach(), adv, mask
    )
    torch.testing.assert_close(pol.grad(plain), expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("eps", [None, (0.2, 0.2)])
def test_gspo_token_equals_gspo_for_sequence_advantages(make_policy, eps):
    pol = make_policy(B=6, T=5, seed=3)
    mask = _mask()
    kw = {} if eps is None else dict(eps_low=eps[0], eps_high=eps[1])
    gspo = ObjectiveConfig.preset("gspo", **kw)
    gspo_tok = ObjectiveConfig.preset("gspo_token", **kw)
    adv = group_advantages(gspo, REWARDS, 3)
    # rows 0-2 off-policy (clipped or not depending on eps), rows 3-5 nearly on-policy (inside 3e-4/4e-4)
    scale = T([1.0, 1.0, 1.0, 1e-5, 1e-5, 1e-5]).unsqueeze(-1)
    old = pol.logp().detach() + scale * pol.noise
    l1, m1 = policy_loss(gspo, pol.logp(), old, adv, mask)
    l2, m2 = policy_loss(gspo_tok, pol.logp(), old, adv, mask)
    assert l1.item() == pytest.approx(l2.item(), abs=1e-12)
    g1, g2 = pol.grad(l1), pol.grad(l2)
    torch.testing.assert_close(g1, g2, rtol=1e-10, atol=1e-12)
    assert g1.abs().sum() > 0
    assert m1 == pytest.approx(m2)


def test_sequence_ratio_clip_metrics_are_shares_of_sequences():
    # three sequences of 1, 2 and 3 tokens with sequence log-ratios 0, +0.01, -0.01
    mask = T([[1, 0, 0], [1, 1, 0], [1, 1, 1]])
    old = torch.zeros(3, 3)
    logp = T([[0.0, 0.0, 0.0], [0.02, 0.0, 0.0], [-0.01, -0.03, 0.01]])  # means 0, 0.01, -0.01
    adv = T([1.0, 1.0, -1.0])
    _, m = policy_loss(ObjectiveConfig.preset("gspo"), logp, old, adv, mask)
    # s = [1, e^0.01, e^-0.01]: seq 2 above 1+4e-4 with A>0 (high), seq 3 below 1-3e-4 with A<0 (low)
    assert m["clip/frac_high"] == pytest.approx(1 / 3, abs=1e-12)  # not 2/6 of the tokens
    assert m["clip/frac_low"] == pytest.approx(1 / 3, abs=1e-12)  # not 3/6 of the tokens
    assert m["clip/frac"] == pytest.approx(2 / 3, abs=1e-12)
    assert m["ratio/mean"] == pytest.approx((1 + math.exp(0.01) + math.exp(-0.01)) / 3, abs=1e-12)
    assert m["ratio/max"] == pytest.approx(math.exp(0.01), abs=1e-12)


def test_token_metrics_by_hand():
    # 4 tokens: rho = [1.5, 0.5, 0.5, 1.5], A = [1, -1, 1, -1], eps 0.2
    rho = [1.5, 0.5, 0.5, 1.5]
    logp = torch.log(T([rho]))
    ref = torch.log(T([[0.75, 0.25, 0.5, 1.5]]))  # ref/pi = [0.5, 0.5, 1, 1]
    ent = T([[0.1, 0.2, 0.3, 0.4]])
    cfg = ObjectiveConfig(agg="token_mean", kl_coef=0.1, entropy_coef=0.01)
    loss, m = policy_loss(
        cfg, logp, torch.zeros(1, 4), T([[1.0, -1.0, 1.0, -1.0]]), torch.ones(1, 4), ref_logp=ref, entropy=ent
    )
    # surrogate: [-min(1.5,1.2), -min(-0.5,-0.8), -min(0.5,0.8), -min(-1.5,-1.2)] = [-1.2, 0.8, -0.5, 1.5] -> mean 0.15
    assert m["loss/policy"] == pytest.approx(0.15, abs=1e-12)
    # k3 with d = ln(ref/pi) = [ln .5, ln .5, 0, 0]: 0.5 + ln2 - 1 = 0.193147 twice, 0 twice -> mean 0.0965736
    k3_mean = (0.5 + math.log(2) - 1) / 2
    assert m["kl/ref"] == pytest.approx(k3_mean, abs=1e-12)
    assert m["loss/kl"] == pytest.approx(0.1 * k3_mean, abs=1e-12)
    # entropy mean 0.25; contribution -0.01 * 0.25
    assert m["entropy"] == pytest.approx(0.25, abs=1e-12)
    assert m["loss/entropy"] == pytest.approx(-0.0025, abs=1e-12)
    assert loss.item() == pytest.approx(0.15 + 0.1 * k3_mean - 0.0025, abs=1e-12)
    # clip: high = token 0, low = token 1
    assert (m["clip/frac"], m["clip/frac_low"], m["clip/frac_high"]) == pytest.approx((0.5, 0.25, 0.25))
    # ratio mean 1.0, max 1.5; kl/old = mean(old - logp) = -mean(ln rho) = -(2 ln1.5 + 2 ln0.5)/4 = 0.1438410
    assert m["ratio/mean"] == pytest.approx(1.0) and m["ratio/max"] == pytest.approx(1.5)
    assert m["kl/old"] == pytest.approx(-0.5 * math.log(0.75), abs=1e-12)
    assert set(m) == {
        "clip/frac",
        "clip/frac_low",
        "clip/frac_high",
        "ratio/mean",
        "ratio/max",
        "kl/ref",
        "kl/old",
        "entropy",
        "loss/policy",
        "loss/kl",
        "loss/entropy",
    }


def test_metric_keys_without_reference_or_entropy():
    _, m = policy_loss(
        ObjectiveConfig.preset("dapo"), torch.zeros(2, 3), torch.zeros(2, 3), T([1.0, -1.0]), torch.ones(2, 3)
    )
    assert set(m) == {
        "clip/frac",
        "clip/frac_low",
        "clip/frac_high",
        "ratio/mean",
        "ratio/max",
        "kl/old",
        "loss/policy",
        "loss/kl",
        "loss/entropy",
    }
    assert all(isinstance(v, float) for v in m.values())


def test_entropy_bonus_gradient():
    ent = T([[0.5, 0.7]], requires_grad=True)
    cfg = ObjectiveConfig(kl_coef=0.0, entropy_coef=0.1, agg="token_mean")
    loss, _ = policy_loss(cfg, torch.zeros(1, 2), torch.zeros(1, 2), T([0.0]), torch.ones(1, 2), entropy=ent)
    (g,) = torch.autograd.grad(loss, ent)
    torch.testing.assert_close(g, T([[-0.05, -0.05]]), rtol=0, atol=1e-12)  # -0.1 / 2 tokens


def test_tis_caps_the_weight():
    # old - rollout = [ln 3, ln 0.5] -> weights min([3, 0.5], cap 2) = [2, 0.5]; on-policy rho = 1, A = 1
    logp = torch.zeros(1, 2, requires_grad=True)
    rollout = torch.log(T([[1 / 3, 2.0]])).requires_grad_()
    cfg = ObjectiveConfig(kl_coef=0.0, clip="none", agg="token_mean", tis_cap=2.0)
    loss, _ = policy_loss(cfg, logp, torch.zeros(1, 2), T([1.0]), torch.ones(1, 2), rollout_logp=rollout)
    # loss = -(2 + 0.5)/2 = -1.25;  d/dlogp = -w/2 = [-1, -0.25];  no gradient into the weights
    assert loss.item() == pytest.approx(-1.25, abs=1e-12)
    g_lp, g_roll = torch.autograd.grad(loss, (logp, rollout), allow_unused=True)
    torch.testing.assert_close(g_lp, T([[-1.0, -0.25]]), rtol=0, atol=1e-12)
    assert g_roll is None or (g_roll == 0).all()
    # without a cap (or without rollout log-probs) the weight is 1
    plain, _ = policy_loss(
        cfg.model_copy(update={"tis_cap": None}),
        logp,
        torch.zeros(1, 2),
        T([1.0]),
        torch.ones(1, 2),
        rollout_logp=rollout,
    )
    assert plain.item() == pytest.approx(-1.0, abs=1e-12)
    nolog, _ = policy_loss(cfg, logp, torch.zeros(1, 2), T([1.0]), torch.ones(1, 2))
    assert nolog.item() == pytest.approx(-1.0, abs=1e-12)


def test_per_token_advantages_and_padding_garbage():
    # (B, T) advantages (critic path); padding holds -inf log-probs and NaN advantages
    logp = T([[math.log(1.5), float("-inf")], [0.0, float("-inf")]], requires_grad=True)
    old = T([[0.0, float("nan")], [0.0, 0.0]])
    adv = T([[2.0, float("nan")], [-1.0, float("nan")]])
    mask = T([[1, 0], [1, 0]])
    loss, m = policy_loss(ObjectiveConfig.preset("ppo"), logp, old, adv, mask)
    # token 0: -min(3, 2.4) = -2.4; token 1: -(-1) = 1 -> token_mean -0.7
    assert loss.item() == pytest.approx(-0.7, abs=1e-12)
    (g,) = torch.autograd.grad(loss, logp)
    torch.testing.assert_close(g, T([[0.0, 0.0], [0.5, 0.0]]), rtol=0, atol=1e-12)
    assert all(math.isfinite(v) for v in m.values())


def test_shape_errors_name_the_tensor():
    lp = torch.zeros(2, 3)
    cfg = ObjectiveConfig(kl_coef=0.0)
    with pytest.raises(ValueError, match="old_logp"):
        policy_loss(cfg, lp, torch.zeros(2, 4), T([1.0, 1.0]), torch.ones(2, 3))
    with pytest.raises(ValueError, match="adv"):
        policy_loss(cfg, lp, lp, T([1.0, 1.0, 1.0]), torch.ones(2, 3))
    with pytest.raises(ValueError, match="mask"):
        policy_loss(cfg, lp, lp, T([1.0, 1.0]), torch.ones(3, 2))
    with pytest.raises(ValueError, match="ref_logp"):
        policy_loss(cfg, lp, lp, T([1.0, 1.0]), torch.ones(2, 3), torch.zeros(2))
    with pytest.raises(ValueError, match="logp must be"):
        policy_loss(cfg, torch.zeros(3), torch.zeros(3), T([1.0]), torch.ones(3))
