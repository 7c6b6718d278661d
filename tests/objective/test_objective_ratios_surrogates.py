"""Ratios (values and Jacobians) and surrogates (values, gradients, clip masks): docs/objective.md,
"Importance ratio" and "Surrogate and clipping"."""

from __future__ import annotations

import math

import pytest
import torch
from torch.autograd.functional import jacobian

from harness.objective import ObjectiveConfig, importance_ratio, policy_loss
from harness.objective.surrogates import clip_masks, surrogate_loss


def C(clip, eps_low, eps_high, **knobs):
    """The config a surrogate reads its knobs from (the mode functions take the config, as verl's)."""
    return ObjectiveConfig(clip=clip, eps_low=eps_low, eps_high=eps_high, **knobs)


def T(x, **kw):
    """float64 tensor (hand values are compared at 1e-12)."""
    return torch.tensor(x, dtype=torch.float64, **kw)


# one sequence, two response tokens and one padding position holding garbage
LOGP = T([[-1.0, -2.0, float("-inf")]])
OLD = T([[-1.2, -1.6, 0.0]])  # logp - old = [0.2, -0.4]
MASK = T([[1.0, 1.0, 0.0]])


def _ratio(mode):
    return lambda lp: importance_ratio(mode, lp, OLD, MASK)[0]


def test_token_ratio():
    # rho = exp(logp - old) = [e^0.2, e^-0.4] = [1.2214028, 0.6703200]; padding -> 1
    rho = importance_ratio("token", LOGP, OLD, MASK)
    torch.testing.assert_close(rho, T([[math.exp(0.2), math.exp(-0.4), 1.0]]), rtol=0, atol=1e-12)
    J = jacobian(_ratio("token"), LOGP.clone())[:, 0, :]  # d rho_t / d logp_t' : diag(rho) on the response
    torch.testing.assert_close(J, torch.diag(T([math.exp(0.2), math.exp(-0.4), 0.0])), rtol=0, atol=1e-12)


def test_sequence_ratio_gspo():
    # s = exp((0.2 - 0.4) / 2) = exp(-0.1) = 0.9048374, the same for every token
    s = math.exp(-0.1)
    rho = importance_ratio("sequence", LOGP, OLD, MASK)
    torch.testing.assert_close(rho[0, :2], T([s, s]), rtol=0, atol=1e-12)
    # gradient flows through the sequence mean: d s / d logp_t = s / |o| = 0.4524187 for each token
    J = jacobian(_ratio("sequence"), LOGP.clone())[:, 0, :]
    torch.testing.assert_close(J[:2, :2], torch.full((2, 2), s / 2), rtol=0, atol=1e-12)
    assert (J[:, 2] == 0).all()


def test_sequence_token_ratio_gspo_token():
    # value s_i, but d rho_t / d logp_t' = s * [t == t'] (sg(s) * pi/sg(pi))
    s = math.exp(-0.1)
    rho = importance_ratio("sequence_token", LOGP, OLD, MASK)
    torch.testing.assert_close(rho[0, :2], T([s, s]), rtol=0, atol=1e-12)
    J = jacobian(_ratio("sequence_token"), LOGP.clone())[:, 0, :]
    torch.testing.assert_close(J[:2, :2], torch.diag(T([s, s])), rtol=0, atol=1e-12)
    assert (J[:, 2] == 0).all()


def test_no_ratio_is_one_with_the_gradient_of_logp():
    rho = importance_ratio("none", LOGP, OLD, MASK)
    torch.testing.assert_close(rho, torch.ones(1, 3), rtol=0, atol=0)
    J = jacobian(_ratio("none"), LOGP.clone())[:, 0, :]
    torch.testing.assert_close(J, torch.diag(T([1.0, 1.0, 0.0])), rtol=0, atol=0)


def test_unknown_ratio_mode_raises():
    with pytest.raises(ValueError, match="allowed"):
        importance_ratio("seq", LOGP, OLD, MASK)


# --------------------------------------------------------------------------- surrogates, by hand
@pytest.mark.parametrize(
    "A, rho, expected",
    [
        (1.0, 1.5, -1.2),  # objective min(1.5*1, 1.2*1) = 1.2 -> loss -1.2
        (-1.0, 0.1, 0.8),  # objective min(0.1*-1, 0.8*-1) = -0.8 -> loss 0.8
        (1.0, 0.5, -0.5),  # min(0.5, 0.8) = 0.5: below the band in the wrong direction, unclipped
        (-1.0, 1.5, 1.5),  # min(-1.5, -1.2) = -1.5: above the band in the wrong direction, unclipped
        (2.0, 1.1, -2.2),  # inside the band
    ],
)
def test_ppo_values(A, rho, expected):
    got = surrogate_loss(C("ppo", 0.2, 0.2), T([[rho]]), T([[A]]), T([[0.0]]))
    torch.testing.assert_close(got, T([[expected]]), rtol=0, atol=1e-12)


def test_ppo_examples_through_policy_loss():
    # a single token with logp - old = log 1.5: loss -1.2 for A=+1
    cfg = ObjectiveConfig(kl_coef=0.0)
    lp = T([[math.log(1.5)]])
    loss, _ = policy_loss(cfg, lp, T([[0.0]]), T([1.0]), T([[1.0]]))
    assert abs(loss.item() - (-1.2)) < 1e-12
    loss, _ = policy_loss(cfg, T([[math.log(0.1)]]), T([[0.0]]), T([-1.0]), T([[1.0]]))
    assert abs(loss.item() - 0.8) < 1e-12


def test_clip_higher_uses_separate_distances():
    # eps_low 0.2, eps_high 0.28 (DAPO): A=+1, rho=1.5 -> 1.28; A=-1, rho=0.5 -> 0.8
    got = surrogate_loss(C("ppo", 0.2, 0.28), T([[1.5, 0.5]]), T([[1.0, -1.0]]), torch.zeros(1, 2))
    torch.testing.assert_close(got, T([[-1.28, 0.8]]), rtol=0, atol=1e-12)


def test_dual_clip():
    # c = 3. A=-1, rho=5: PPO loss = -min(-5, -0.8) = 5, dual clip caps it at -c*A = 3 (zero gradient)
    #        A=-1, rho=2: loss 2 < 3, unchanged;  A=+1, rho=5: -1.2, dual clip never applies to A>0
    lp = T([[math.log(5.0), math.log(2.0), math.log(5.0)]], requires_grad=True)
    A = T([[-1.0, -1.0, 1.0]])
    loss = surrogate_loss(C("ppo", 0.2, 0.2, dual_clip=3.0), torch.exp(lp), A, lp)
    torch.testing.assert_close(loss, T([[3.0, 2.0, -1.2]]), rtol=0, atol=1e-12)
    (g,) = torch.autograd.grad(loss.sum(), lp)
    # d/dlogp of -rho*A = -A*rho: token 2 -> 2; tokens 1 and 3 are clipped -> 0
    torch.testing.assert_close(g, T([[0.0, 2.0, 0.0]]), rtol=0, atol=1e-12)
    # and through the config
    cfg = ObjectiveConfig(kl_coef=0.0, dual_clip=3.0, agg="token_mean")
    loss, _ = policy_loss(cfg, lp.detach(), torch.zeros(1, 3), A, torch.ones(1, 3))
    assert abs(loss.item() - (3.0 + 2.0 - 1.2) / 3) < 1e-12


def test_cispo_values_and_no_lower_bound():
    # l = -sg(clip(rho, 1-eps_low, 1+eps_high)) * A * logp; eps_low None, eps_high 4 -> weight in (0, 5]
    rho = T([[6.0, 0.01, 1.5]])
    A = T([[1.0, -1.0, 2.0]])
    lp = T([[-0.5, -2.0, -1.0]])
    got = surrogate_loss(C("cispo", None, 4.0), rho, A, lp)
    # weights [5, 0.01, 1.5]: -5*1*-0.5 = 2.5; -0.01*-1*-2 = -0.02; -1.5*2*-1 = 3.0
    torch.testing.assert_close(got, T([[2.5, -0.02, 3.0]]), rtol=0, atol=1e-12)
    # with eps_low 0.2 the 0.01 weight is raised to 0.8: -0.8*-1*-2 = -1.6
    got = surrogate_loss(C("cispo", 0.2, 4.0), rho, A, lp)
    torch.testing.assert_close(got[0, 1], T(-1.6), rtol=0, atol=1e-12)


def test_clip_none_is_minus_rho_A():
    got = surrogate_loss(C("none", 0.2, 0.2), T([[3.0, 0.1]]), T([[1.0, -2.0]]), torch.zeros(1, 2))
    torch.testing.assert_close(got, T([[-3.0, 0.2]]), rtol=0, atol=1e-12)


# --------------------------------------------------------------------------- gradient properties
# five tokens of one sequence: rho and A chosen to hit every case of the clip
RHO5 = [1.5, 0.5, 0.5, 1.5, 6.0]
ADV5 = [1.0, -1.0, 1.0, -1.0, 1.0]
# 0: A>0, rho>1+eps (improving, clipped)   1: A<0, rho<1-eps (improving, clipped)
# 2: A>0, rho<1-eps (wrong way, live)      3: A<0, rho>1+eps (wrong way, live)   4: A>0, rho=6 (clipped)


def _grad_wrt_logp(cfg):
    lp = torch.log(T([RHO5])).requires_grad_()  # old_logp = 0 -> rho = exp(logp)
    loss, metrics = policy_loss(cfg, lp, torch.zeros(1, 5), T([ADV5]), torch.ones(1, 5))
    (g,) = torch.autograd.grad(loss, lp)
    return g[0], metrics


def test_ppo_gradient_zero_where_clipped_in_the_improving_direction():
    g, metrics = _grad_wrt_logp(ObjectiveConfig(kl_coef=0.0, agg="token_mean"))
    # live tokens: d(-rho*A)/dlogp / 5 tokens: token 2: -0.5*1/5 = -0.1; token 3: -1.5*(-1)/5 = 0.3
    torch.testing.assert_close(g, T([0.0, 0.0, -0.1, 0.3, 0.0]), rtol=0, atol=1e-12)
    # metrics: high = tokens 0 and 4, low = token 1 -> 2/5, 1/5, 3/5
    assert metrics["clip/frac_high"] == pytest.approx(0.4, abs=1e-12)
    assert metrics["clip/frac_low"] == pytest.approx(0.2, abs=1e-12)
    assert metrics["clip/frac"] == pytest.approx(0.6, abs=1e-12)


def test_cispo_gradient_on_every_token():
    g, metrics = _grad_wrt_logp(ObjectiveConfig.preset("cispo"))
    # d(-w*A*logp)/dlogp / 5 = -w*A/5, weights clip(rho, -, 5) = [1.5, 0.5, 0.5, 1.5, 5]
    torch.testing.assert_close(g, T([-0.3, 0.1, -0.1, 0.3, -1.0]), rtol=0, atol=1e-12)
    assert (g != 0).all()
    # only token 4 has its weight capped (A>0, rho > 5); no lower bound
    assert metrics["clip/frac_high"] == pytest.approx(0.2) and metrics["clip/frac_low"] == 0.0


def test_clip_masks_follow_the_advantage_direction():
    low, high = clip_masks(C("ppo", 0.2, 0.2), T([RHO5]), T([ADV5]))
    assert low.tolist() == [[False, True, False, False, False]]
    assert high.tolist() == [[True, False, False, False, True]]
    none_low, none_high = clip_masks(C("none", 0.2, 0.2), T([RHO5]), T([ADV5]))
    assert not none_low.any() and not none_high.any()
    no_lower, _ = clip_masks(C("cispo", None, 4.0), T([RHO5]), T([ADV5]))
    assert not no_lower.any()
