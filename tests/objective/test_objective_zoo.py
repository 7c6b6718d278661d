"""The zoo of docs/objective.md ("Advantage", "Importance ratio", "Surrogate and clipping") as knobs of the one loss:
MaxRL, pass@k, SAPO, GMPO, DPPO. Worked examples are the reference implementations' numbers; every other value is
computed by hand in the comment beside it."""

from __future__ import annotations

import math

import pytest
import torch
from pydantic import ValidationError

from harness.config import ConfigError, load_config
from harness.objective import ObjectiveConfig, group_advantages, importance_ratio, policy_loss
from harness.objective.surrogates import clip_masks, dppo_mask, surrogate_loss


def T(x):
    return torch.tensor(x, dtype=torch.float64)


# --------------------------------------------------------------------------- MaxRL: scale group_mean
def test_maxrl_worked_example_and_all_zero_group():
    cfg = ObjectiveConfig.preset("maxrl")
    adv = group_advantages(cfg, T([1, 0, 0, 0, 0, 0, 0, 0]), 4)
    # (r - 1/4) / (1/4 + 1e-6): [3, -1, -1, -1] up to the eps; an all-zero group: exactly 0, never inf
    torch.testing.assert_close(adv[:4], T([3, -1, -1, -1]), rtol=1e-5, atol=0)
    assert torch.equal(adv[4:], torch.zeros(4))
    exact = group_advantages(ObjectiveConfig.preset("maxrl", adv_eps=0.0), T([1, 0, 0, 0]), 4)
    torch.testing.assert_close(exact, T([3, -1, -1, -1]), rtol=0, atol=1e-15)


def test_maxrl_all_correct_and_two_correct():
    cfg = ObjectiveConfig.preset("maxrl", adv_eps=0.0)
    # [1,1,0,0]: mean 1/2 -> (r - 1/2) / (1/2) = [1, 1, -1, -1]; [1,1,1,1] -> 0
    adv = group_advantages(cfg, T([1, 1, 0, 0, 1, 1, 1, 1]), 4)
    assert adv.tolist() == [1.0, 1.0, -1.0, -1.0, 0.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize("knobs", [dict(algorithm="maxrl"), dict(algorithm="passk", passk_k=2)])
def test_non_binary_rewards_raise_naming_the_knob(knobs):
    cfg = ObjectiveConfig(**knobs)
    with pytest.raises(ValueError) as e:
        group_advantages(cfg, T([1, 0.5, 0, 0]), 4)
    msg = str(e.value)
    assert ("scale='group_mean'" in msg or "baseline='passk'" in msg) and "0.5" in msg and "0 and 1" in msg, msg


# --------------------------------------------------------------------------- pass@k: baseline passk
def test_passk_worked_example():
    cfg = ObjectiveConfig.preset("passk", passk_k=2)
    # k=2, G=4, one correct: rho = 1 - C(3,2)/C(4,2) = 1/2, sigma = 1/2;
    # correct (1 - 1/2)/(1/2) = 1; wrong (1 - 1/2 - C(2,1)/C(3,1))/(1/2) = (1/2 - 2/3)*2 = -1/3
    adv = group_advantages(cfg, T([1, 0, 0, 0]), 4)
    torch.testing.assert_close(adv, T([1, -1 / 3, -1 / 3, -1 / 3]), rtol=1e-5, atol=0)


def test_passk_degenerate_groups_are_exactly_zero():
    cfg = ObjectiveConfig.preset("passk", passk_k=2)
    # all wrong (pass@2 = 0), all right, and 3 of 4 right (every pair holds a correct one: pass@2 = 1)
    adv = group_advantages(cfg, T([0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 0]), 4)
    assert torch.equal(adv, torch.zeros(12))


def test_passk_two_correct_of_six_k3():
    cfg = ObjectiveConfig.preset("passk", passk_k=3, adv_eps=0.0)
    # n=6, c=2, k=3: rho = 1 - C(4,3)/C(6,3) = 1 - 4/20 = 0.8, sigma = 0.4
    # correct: 0.2/0.4 = 0.5; wrong: (0.2 - C(3,2)/C(5,2))/0.4 = (0.2 - 0.3)/0.4 = -0.25
    adv = group_advantages(cfg, T([1, 0, 1, 0, 0, 0]), 6)
    torch.testing.assert_close(adv, T([0.5, -0.25, 0.5, -0.25, -0.25, -0.25]), rtol=0, atol=1e-12)


def test_passk_k_larger_than_the_group_raises():
    with pytest.raises(ValueError, match=r"passk_k=5 must lie in \[1, group_size=4\]"):
        group_advantages(ObjectiveConfig.preset("passk", passk_k=5), T([1, 0, 0, 0]), 4)


# --------------------------------------------------------------------------- SAPO: clip sapo
SAPO_RHO = [[0.9, 1.0, 1.2, 1.5], [0.8, 1.0, 1.3, 1.0]]
SAPO_MASK = [[1, 1, 1, 1], [1, 1, 1, 0]]


def test_sapo_worked_example_loss():
    cfg = ObjectiveConfig.preset("sapo")
    lp = torch.log(T(SAPO_RHO))
    loss, metrics = policy_loss(cfg, lp, torch.zeros(2, 4), T([1.0, -1.0]), T(SAPO_MASK))
    assert loss.item() == pytest.approx(-0.104897, abs=1e-6)
    assert metrics["clip/frac"] == 0.0  # every gate weight here is above 1/2 of its peak


def test_sapo_gradient_is_a_4p1mp_rho_per_token():
    cfg = ObjectiveConfig.preset("sapo", agg="seq_mean_token_sum")  # sum per sequence, / B = 2
    lp = torch.log(T(SAPO_RHO)).requires_grad_()
    loss, _ = policy_loss(cfg, lp, torch.zeros(2, 4), T([1.0, -1.0]), T(SAPO_MASK))
    (g,) = torch.autograd.grad(loss, lp)
    expected = torch.zeros(2, 4)
    for i, (a, tau) in enumerate(((1.0, 1.0), (-1.0, 1.05))):
        for t, rho in enumerate(SAPO_RHO[i]):
            if SAPO_MASK[i][t]:
                p = 1 / (1 + math.exp(-tau * (rho - 1)))
                expected[i, t] = -a * 4 * p * (1 - p) * rho / 2  # d loss / d logp = -A 4p(1-p) rho / B
    torch.testing.assert_close(g, expected, rtol=0, atol=1e-12)


def test_sapo_counts_gates_below_half_their_peak():
    # tau = 1: 4p(1-p) < 1/2 iff |rho - 1| > ln((1+sqrt .5)/(1-sqrt .5)) = 1.7627;
    # rho 3.0 (x = 2, weight 0.42) is damped, rho 2.5 (x = 1.5, weight 0.60) is not
    rho, adv = T([[1.0, 2.5, 3.0, 3.0]]), T([[1.0, 1.0, 1.0, 0.0]])
    sapo = ObjectiveConfig(clip="sapo", sapo_tau_pos=1.0, sapo_tau_neg=1.05)
    low, high = clip_masks(sapo, rho, adv)
    assert high.tolist() == [[False, False, True, False]] and not low.any()  # A = 0: no gradient to damp
    # A < 0, tau 1.05: rho = -1 is x = -2.1 (weight 0.40) -> low
    low, high = clip_masks(sapo, T([[-1.0]]), T([[-1.0]]))
    assert low.tolist() == [[True]] and not high.any()


# --------------------------------------------------------------------------- GMPO: ratio geometric
def test_gmpo_worked_example_loss_and_clipped_tokens():
    cfg = ObjectiveConfig.preset("gmpo")
    x = T([[0.1, -0.5, 0.6], [0.1, -0.5, 0.6]])
    lp = x.clone().requires_grad_()
    loss, metrics = policy_loss(cfg, lp, torch.zeros(2, 3), T([1.0, -1.0]), torch.ones(2, 3))
    # A>0: [0.1, -0.5, 0.4] (upward move capped) -> mean 0 -> s = 1, l = -1
    # A<0: [0.1, -0.4, 0.6] (downward move capped) -> mean 0.1 -> s = e^0.1 = 1.105171, l = +1.105171
    assert loss.item() == pytest.approx(0.052585, abs=1e-6)
    assert loss.item() == pytest.approx((-1 + math.exp(0.1)) / 2, abs=1e-12)
    assert metrics["clip/frac"] == pytest.approx(2 / 6)
    assert metrics["clip/frac_high"] == pytest.approx(1 / 6) and metrics["clip/frac_low"] == pytest.approx(1 / 6)
    (g,) = torch.autograd.grad(loss, lp)
    # d/dx_t of -A s / 2 = -A s / (2 * 3) on unclipped tokens, 0 on the clipped ones
    e = math.exp(0.1)
    torch.testing.assert_close(g, T([[-1 / 6, -1 / 6, 0.0], [e / 6, 0.0, e / 6]]), rtol=0, atol=1e-12)


def test_geometric_ratio_needs_the_advantage():
    with pytest.raises(ValueError, match="adv"):
        importance_ratio("geometric", torch.zeros(1, 2), torch.zeros(1, 2), torch.ones(1, 2))
    cfg = ObjectiveConfig(ratio="geometric", clip="none", eps_low=None, eps_high=0.1)
    rho = importance_ratio("geometric", T([[0.2, -0.4]]), torch.zeros(1, 2), torch.ones(1, 2), T([[1.0, 1.0]]), cfg)
    # eps_low None: no lower bound; [0.1, -0.4] -> s = exp(-0.15)
    torch.testing.assert_close(rho, torch.full((1, 2), math.exp(-0.15)), rtol=0, atol=1e-12)


# --------------------------------------------------------------------------- DPPO: clip dppo_tv | dppo_kl
MU = [[0.90, 0.01, 0.99, 0.50]]
PI = [[0.99, 0.05, 0.80, 0.30]]
ADV4 = [[1.0, 1.0, -1.0, 1.0]]


@pytest.mark.parametrize("kind, div, keep", [("tv", 0.15, [1, 1, 0, 1]), ("kl", 0.05, [0, 1, 0, 1])])
def test_dppo_worked_example_masks(kind, div, keep):
    m = dppo_mask(kind, torch.log(T(PI)), torch.log(T(MU)), T(ADV4), div, div)
    assert m.long().tolist() == [keep]


@pytest.mark.parametrize("name, keep", [("dppo_tv", [1, 1, 0, 1]), ("dppo_kl", [0, 1, 0, 1])])
def test_dppo_loss_gradient_and_masked_fraction(name, keep):
    cfg = ObjectiveConfig.preset(name, norm_constant=4.0)
    lp = torch.log(T(PI)).requires_grad_()
    loss, metrics = policy_loss(cfg, lp, torch.log(T(MU)), T(ADV4), torch.ones(1, 4))
    (g,) = torch.autograd.grad(loss, lp)
    # d/dlogp of -A sg(min(pi/mu, 20)) logp m / (B C), B = 1, C = 4
    rho = [p / u for p, u in zip(PI[0], MU[0])]  # [1.1, 5, 0.808, 0.6]
    expected = T([[-a * min(r, 20.0) * k / 4 for a, r, k in zip(ADV4[0], rho, keep)]])
    torch.testing.assert_close(g, expected, rtol=0, atol=1e-12)
    dropped = [1 - k for k in keep]
    assert metrics["clip/frac"] == pytest.approx(sum(dropped) / 4)
    assert metrics["clip/frac_low"] == pytest.approx(dropped[2] / 4)  # the one A < 0 token


def test_dppo_caps_the_is_weight():
    lp, old = T([[0.0]]), T([[math.log(0.1)]])  # pi = 1, mu = 0.1: rho = 10
    cfg = ObjectiveConfig(clip="dppo_tv", div_low=1.0, div_high=1.0, is_cap=3.0)
    lpg = lp.clone().requires_grad_()
    loss = surrogate_loss(cfg, torch.exp(lpg - old), T([[1.0]]), lpg, old)
    (g,) = torch.autograd.grad(loss.sum(), lpg)
    assert g.item() == pytest.approx(-3.0)  # -A min(10, 3)


# --------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "knobs, names",
    [
        (dict(ratio="geometric", clip="ppo"), ("clip='ppo'", "ratio='geometric'", "['none']")),
        (dict(baseline="passk", scale="group_std"), ("scale='group_std'", "baseline='passk'", "['none']")),
        (dict(clip="dppo_tv", ratio="sequence"), ("ratio='sequence'", "clip='dppo_tv'", "['token']")),
        (dict(scale="group_mean", overlong_buffer=8), ("overlong_buffer=8", "scale='group_mean'", "[0]")),
        (dict(baseline="critic", scale="group_mean"), ("scale='group_mean'", "baseline='critic'", "'batch_std'")),
    ],
)
def test_illegal_zoo_combinations_name_knob_value_and_allowed(knobs, names):
    with pytest.raises(ValidationError) as e:
        ObjectiveConfig(**knobs)
    for n in names:
        assert n in str(e.value), (n, str(e.value))


def test_run_config_refuses_passk_k_not_below_the_group_size():
    with pytest.raises(ConfigError) as e:
        load_config("experiments/runs/smoke.yaml", ["objective.preset=passk", "objective.passk_k=8"])
    assert "objective.passk_k=8" in str(e.value) and "1..7" in str(e.value)


@pytest.mark.parametrize(
    "overrides, knob",
    [
        (["objective.sapo_tau_pos=2.0"], "objective.sapo_tau_pos"),
        (["objective.is_cap=3.0"], "objective.is_cap"),
        (["objective.preset=sapo", "objective.eps_high=0.3"], "objective.eps_high"),
    ],
)
def test_run_config_refuses_zoo_knobs_nothing_reads(overrides, knob):
    with pytest.raises(ConfigError) as e:
        load_config("experiments/runs/smoke.yaml", overrides)
    assert knob in str(e.value)


def test_gmpo_reads_its_eps_in_log_space():
    cfg = load_config("experiments/runs/smoke.yaml", ["objective.preset=gmpo", "objective.eps_high=0.3"])
    assert cfg.objective.eps_high == 0.3
