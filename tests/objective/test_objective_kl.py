"""KL estimators (docs/objective.md, "KL to the reference") by hand, their expectations, and both placements."""

from __future__ import annotations

import math

import pytest
import torch

from harness.objective import ObjectiveConfig, kl_penalty, policy_loss
from harness.objective.kl import kl_in_reward, token_rewards_with_kl


def T(x, **kw):
    """float64 tensor (hand values are compared at 1e-12)."""
    return torch.tensor(x, dtype=torch.float64, **kw)


LN2 = math.log(2.0)


def test_estimators_by_hand():
    # token 0: pi = 0.5, ref = 0.25 -> d = log(ref/pi) = -ln2
    #   k1 = ln2 = 0.693147;  k2 = (ln2)^2/2 = 0.240227;  k3 = e^{-ln2} + ln2 - 1 = 0.5 + 0.693147 - 1 = 0.193147
    # token 1: pi = 0.25, ref = 0.5 -> d = +ln2
    #   k1 = -ln2;             k2 = 0.240227;               k3 = 2 - ln2 - 1 = 0.306853
    logp = torch.log(T([[0.5, 0.25]]))
    ref = torch.log(T([[0.25, 0.5]]))
    torch.testing.assert_close(kl_penalty(logp, ref, "k1"), T([[LN2, -LN2]]), rtol=0, atol=1e-12)
    torch.testing.assert_close(kl_penalty(logp, ref, "k2"), T([[LN2**2 / 2, LN2**2 / 2]]), rtol=0, atol=1e-12)
    torch.testing.assert_close(kl_penalty(logp, ref, "k3"), T([[0.5 + LN2 - 1, 2 - LN2 - 1]]), rtol=0, atol=1e-12)
    # equal policies: every estimator is 0
    assert (kl_penalty(logp, logp.clone(), "k3") == 0).all()


def test_k1_and_k3_are_unbiased_for_the_exact_kl():
    # E_{x~p}[k] over a 3-way categorical equals KL(p || q) = sum p log(p/q) for k1 and k3
    p = T([0.5, 0.3, 0.2])
    q = T([0.2, 0.5, 0.3])
    kl = float((p * (p / q).log()).sum())  # 0.5 ln2.5 + 0.3 ln0.6 + 0.2 ln(2/3) = 0.2230...
    for est in ("k1", "k3"):
        k = kl_penalty(p.log().unsqueeze(0), q.log().unsqueeze(0), est)[0]
        assert float((p * k).sum()) == pytest.approx(kl, abs=1e-12)


def test_k3_is_nonnegative():
    g = torch.Generator().manual_seed(0)
    logp = 3 * torch.randn(50, 20, generator=g, dtype=torch.float64)
    ref = 3 * torch.randn(50, 20, generator=g, dtype=torch.float64)
    assert (kl_penalty(logp, ref, "k3") >= 0).all()
    assert (kl_penalty(logp, ref, "k2") >= 0).all()


def test_gradient_flows_through_logp_only():
    logp = torch.log(T([[0.5]])).requires_grad_()
    ref = torch.log(T([[0.25]])).requires_grad_()
    k3 = kl_penalty(logp, ref, "k3")
    gl, gr = torch.autograd.grad(k3.sum(), (logp, ref), allow_unused=True)
    # d k3 / d logp = 1 - exp(ref - logp) = 1 - 0.5 = 0.5; no gradient into the reference
    assert gl.item() == pytest.approx(0.5, abs=1e-12)
    assert gr is None or (gr == 0).all()


def test_unknown_estimator():
    with pytest.raises(ValueError, match="'k1', 'k2', 'k3'"):
        kl_penalty(torch.zeros(1, 1), torch.zeros(1, 1), "k4")


def test_kl_in_loss_grpo():
    cfg = ObjectiveConfig.preset("grpo")  # kl_coef 0.04, k3, in the loss
    logp = torch.log(T([[0.5, 0.25]]))
    ref = torch.log(T([[0.25, 0.5]]))
    loss, m = policy_loss(cfg, logp, logp.clone(), T([0.0]), torch.ones(1, 2), ref_logp=ref)
    # A = 0 -> policy term 0; KL term = 0.04 * mean(0.193147, 0.306853) = 0.04 * 0.25 = 0.01
    assert m["loss/policy"] == 0.0
    assert m["loss/kl"] == pytest.approx(0.01, abs=1e-12)
    assert loss.item() == pytest.approx(0.01, abs=1e-12)
    assert m["kl/ref"] == pytest.approx(0.25, abs=1e-12)


def test_kl_in_loss_without_reference_raises():
    with pytest.raises(ValueError) as e:
        policy_loss(ObjectiveConfig.preset("grpo"), torch.zeros(1, 2), torch.zeros(1, 2), T([1.0]), torch.ones(1, 2))
    assert "kl_coef" in str(e.value) and "ref_logp" in str(e.value)


def test_kl_in_reward_sequence_level():
    cfg = ObjectiveConfig.preset("rloo")  # kl_coef 0.05, k1 in the reward
    rewards = T([1.0, 0.0])
    logp = T([[-1.0, -2.0, 7.0], [-0.5, 7.0, 7.0]])
    ref = T([[-1.5, -1.0, 0.0], [-0.5, 0.0, 0.0]])
    mask = T([[1, 1, 0], [1, 0, 0]])
    # row 0: k1 = [0.5, -1.0], sum -0.5 -> 1 - 0.05 * -0.5 = 1.025;  row 1: k1 = [0] -> 0
    got = kl_in_reward(cfg, rewards, logp, ref, mask)
    torch.testing.assert_close(got, T([1.025, 0.0]), rtol=0, atol=1e-12)
    # placement 'loss' (or kl_coef 0): a no-op
    torch.testing.assert_close(kl_in_reward(ObjectiveConfig(), rewards, logp, None, mask), rewards)
    with pytest.raises(ValueError, match="kl_coef"):
        kl_in_reward(cfg, rewards, logp, None, mask)


def test_token_rewards_with_kl_for_the_critic():
    cfg = ObjectiveConfig.preset("ppo")  # kl_coef 0.05, k1 in the reward
    rewards = T([1.0, 2.0, 3.0])
    logp = T([[-1.0, -2.0, 7.0], [-0.5, 7.0, 7.0], [0.0, 0.0, 0.0]])
    ref = T([[-1.5, -1.0, 0.0], [-0.25, 0.0, 0.0], [0.0, 0.0, 0.0]])
    mask = T([[1, 1, 0], [1, 0, 0], [0, 0, 0]])
    # row 0: -0.05*[0.5, -1.0] = [-0.025, 0.05], + reward 1 on the last response token (t=1)
    # row 1: -0.05*(-0.25) = 0.0125 + reward 2 on t=0;  row 2: no response token, no reward
    got = token_rewards_with_kl(cfg, rewards, logp, ref, mask)
    torch.testing.assert_close(got, T([[-0.025, 1.05, 0.0], [2.0125, 0.0, 0.0], [0.0, 0.0, 0.0]]), rtol=0, atol=1e-12)
    # KL in the loss: only the task reward is placed
    plain = token_rewards_with_kl(
        ObjectiveConfig.preset("ppo", kl_placement="loss", kl_estimator="k3"), rewards, logp, ref, mask
    )
    torch.testing.assert_close(plain, T([[0.0, 1.0, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, 0.0]]), rtol=0, atol=0)
