"""Advantages (docs/objective.md, "Advantage"): every baseline x scale x std by hand, the worked examples, exact zeros,
GAE."""

from __future__ import annotations

import math

import pytest
import torch

from harness.objective import ObjectiveConfig, gae_advantages, group_advantages
from harness.objective.advantages import critic_advantages, whiten


def T(x, **kw):
    """float64 tensor (hand values are compared at 1e-12)."""
    return torch.tensor(x, dtype=torch.float64, **kw)


# Two groups of G=4:  g1 = [3, 1, 2, 0],  g2 = [1, 1, 1, 0]
R = [3.0, 1.0, 2.0, 0.0, 1.0, 1.0, 1.0, 0.0]
# g1: mean 1.5, r - mean = [1.5, -0.5, 0.5, -1.5], sum of squares 2.25+0.25+0.25+2.25 = 5
# g2: mean 0.75, r - mean = [0.25, 0.25, 0.25, -0.75], sum of squares 3*0.0625+0.5625 = 0.75
DEV = [1.5, -0.5, 0.5, -1.5, 0.25, 0.25, 0.25, -0.75]
# leave-one-out: b_i = (sum_g - r_i)/3 -> g1 [1, 5/3, 4/3, 2] -> r - b = [2, -2/3, 2/3, -2] = 4/3 * DEV
LOO = [4 / 3 * d for d in DEV]
# batch mean = (6 + 3)/8 = 1.125
BM = [r - 1.125 for r in R]
# group std per row: population sqrt(5/4), sqrt(0.75/4); sample sqrt(5/3), sqrt(0.75/3) = 0.5
GSTD = {"population": [math.sqrt(1.25)] * 4 + [math.sqrt(0.1875)] * 4, "sample": [math.sqrt(5 / 3)] * 4 + [0.5] * 4}
# batch std of the rewards: sum of squares = sum r^2 - 8*1.125^2 = 17 - 10.125 = 6.875
BSTD_R = {"population": math.sqrt(6.875 / 8), "sample": math.sqrt(6.875 / 7)}
# batch std of centred values u (their batch mean is 0 for group baselines):
#   group_mean: sum u^2 = 5 + 0.75 = 5.75; leave_one_out: (4/3)^2 * 5.75; batch_mean/none: as rewards
BSTD_C = {
    "group_mean": {"population": math.sqrt(5.75 / 8), "sample": math.sqrt(5.75 / 7)},
    "leave_one_out": {"population": 4 / 3 * math.sqrt(5.75 / 8), "sample": 4 / 3 * math.sqrt(5.75 / 7)},
    "batch_mean": BSTD_R,
    "none": BSTD_R,
}
NUM = {"group_mean": DEV, "leave_one_out": LOO, "batch_mean": BM, "none": R}


def _expected(baseline: str, scale: str, std: str, of: str) -> list[float]:
    u = NUM[baseline]
    if scale == "none":
        return list(u)
    if scale == "group_std":
        return [x / s for x, s in zip(u, GSTD[std])]
    s = BSTD_R[std] if of == "reward" else BSTD_C[baseline][std]
    return [x / s for x in u]


@pytest.mark.parametrize("baseline", ["group_mean", "leave_one_out", "batch_mean", "none"])
@pytest.mark.parametrize("scale", ["group_std", "batch_std", "none"])
@pytest.mark.parametrize("std", ["sample", "population"])
@pytest.mark.parametrize("of", ["reward", "centered"])
def test_every_mode_by_hand(baseline, scale, std, of):
    cfg = ObjectiveConfig(baseline=baseline, scale=scale, std=std, batch_std_of=of, adv_eps=0.0)
    got = group_advantages(cfg, T(R), 4)
    assert got.shape == (8,)
    torch.testing.assert_close(got, T(_expected(baseline, scale, std, of)), rtol=0, atol=1e-12)


def test_worked_example_3120_population():
    cfg = ObjectiveConfig(std="population")
    # mean 1.5, population std sqrt(1.25) = 1.1180340 -> 1.5/1.118 = 1.342, 0.5/1.118 = 0.447
    got = group_advantages(cfg, T([3.0, 1.0, 2.0, 0.0]), 4)
    torch.testing.assert_close(got, T([1.3416408, -0.4472136, 0.4472136, -1.3416408]), rtol=0, atol=2e-6)


def test_worked_example_1110_population_vs_sample():
    r = T([1.0, 1.0, 1.0, 0.0])
    # mean 0.75; population std sqrt(0.1875) = 0.4330127 -> 0.25/0.433 = 0.577, -0.75/0.433 = -1.732
    pop = group_advantages(ObjectiveConfig(std="population"), r, 4)
    torch.testing.assert_close(pop, T([0.5773503, 0.5773503, 0.5773503, -1.7320508]), rtol=0, atol=5e-6)
    # sample std sqrt(0.75/3) = 0.5 -> 0.25/0.5 = 0.5, -0.75/0.5 = -1.5
    smp = group_advantages(ObjectiveConfig(std="sample"), r, 4)
    torch.testing.assert_close(smp, T([0.5, 0.5, 0.5, -1.5]), rtol=0, atol=5e-6)


def test_leave_one_out_is_G_over_G_minus_1_times_centred():
    g = torch.Generator().manual_seed(1)
    for G in (2, 3, 5, 8):
        r = torch.rand(4 * G, generator=g, dtype=torch.float64)
        got = group_advantages(ObjectiveConfig(baseline="leave_one_out", scale="none"), r, G)
        centred = r.view(-1, G) - r.view(-1, G).mean(-1, keepdim=True)
        torch.testing.assert_close(got, (G / (G - 1) * centred).reshape(-1), rtol=0, atol=1e-12)


def test_adv_eps_is_added_outside_the_sqrt():
    # rewards [0, 2]: population std 1. eps 0.5 outside: 1/(1+0.5) = 0.6667; inside would be 1/sqrt(1.5) = 0.8165
    cfg = ObjectiveConfig(std="population", adv_eps=0.5)
    torch.testing.assert_close(group_advantages(cfg, T([0.0, 2.0]), 2), T([-2 / 3, 2 / 3]), rtol=0, atol=1e-12)


@pytest.mark.parametrize("baseline", ["group_mean", "leave_one_out"])
@pytest.mark.parametrize("scale", ["group_std", "batch_std", "none"])
@pytest.mark.parametrize("std", ["sample", "population"])
@pytest.mark.parametrize("of", ["reward", "centered"])
def test_all_equal_group_is_exactly_zero(baseline, scale, std, of):
    cfg = ObjectiveConfig(baseline=baseline, scale=scale, std=std, batch_std_of=of)
    # 0.1 * 3 is not exactly representable: the naive r - mean leaves ~1e-17, which /1e-6 is ~1e-11
    r = T([0.1, 0.1, 0.1, 1.0, 0.0, 1.0, 7.0, 7.0, 7.0])
    got = group_advantages(cfg, r, 3)
    assert torch.isfinite(got).all()
    assert (got[:3] == 0.0).all() and (got[6:] == 0.0).all()
    assert (got[3:6] != 0).all()
    # the whole batch all-equal: zeros under every scale
    flat = group_advantages(cfg, T([0.3] * 6), 3)
    assert (flat == 0.0).all()
    # float32 input keeps its dtype and its exact zeros
    f32 = group_advantages(cfg, r.float(), 3)
    assert f32.dtype == torch.float32 and (f32[:3] == 0.0).all()


@pytest.mark.parametrize("scale", ["group_std", "batch_std", "none"])
@pytest.mark.parametrize("std", ["sample", "population"])
def test_group_size_one(scale, std):
    # G = 1: the group std is defined as 0 (no spread; the sample std would be 0/0), so the
    # group-mean advantage is exactly 0 and nothing is NaN.
    r = T([1.0, 0.0, 1.0])
    got = group_advantages(ObjectiveConfig(scale=scale, std=std), r, 1)
    assert (got == 0.0).all()
    # batch_mean with G=1 is an ordinary baseline: r - 2/3, scaled by the batch std (group_std: by 1)
    bm = group_advantages(ObjectiveConfig(baseline="batch_mean", scale=scale, std=std, adv_eps=0.0), r, 1)
    s = {
        "none": 1.0,
        "group_std": 1.0,
        "batch_std": math.sqrt((2 * (1 / 3) ** 2 + (2 / 3) ** 2) / (2 if std == "sample" else 3)),
    }[scale]
    torch.testing.assert_close(bm, (r - 2 / 3) / s, rtol=0, atol=1e-12)


def test_zero_spread_divides_by_one_not_eps():
    # baseline none + group_std on an all-equal group: numerator 1, spread 0 -> 1 (not 1/1e-6)
    got = group_advantages(ObjectiveConfig(baseline="none"), T([1.0, 1.0, 0.0, 1.0]), 2)
    torch.testing.assert_close(got[:2], T([1.0, 1.0]), rtol=0, atol=0)


def test_leave_one_out_with_group_size_one_raises():
    with pytest.raises(ValueError) as e:
        group_advantages(ObjectiveConfig(baseline="leave_one_out"), T([1.0, 0.0]), 1)
    msg = str(e.value)
    assert "baseline='leave_one_out'" in msg and "group_size=1" in msg and ">= 2" in msg
    assert "['group_mean', 'batch_mean', 'none']" in msg


def test_critic_baseline_points_to_gae():
    with pytest.raises(ValueError, match="gae_advantages"):
        group_advantages(ObjectiveConfig.preset("ppo"), T([1.0, 0.0]), 2)


def test_bad_shapes_raise():
    with pytest.raises(ValueError, match="divide B=5"):
        group_advantages(ObjectiveConfig(), torch.zeros(5), 2)
    with pytest.raises(ValueError, match=r"\(B,\)"):
        group_advantages(ObjectiveConfig(), torch.zeros(2, 2), 2)


def test_dr_grpo_difficulty_bias_example():
    """Dr.GRPO (2503.20783) sigma example: dividing by the group std makes a nearly solved,
    low-spread prompt weigh as much as a hard one; scale=none removes that."""
    easy = [0.92, 0.90, 0.91, 0.89]  # mean 0.905, r - mean = [.015, -.005, .005, -.015], SS = 5e-4
    hard = [0.94, 0.61, 0.78, 0.55]  # mean 0.72,  r - mean = [.22, -.11, .06, -.17],     SS = 0.093
    r = T(easy + hard)
    dev = T([0.015, -0.005, 0.005, -0.015, 0.22, -0.11, 0.06, -0.17])
    grpo = group_advantages(ObjectiveConfig.preset("grpo"), r, 4)
    per_unit = grpo / dev  # advantage per unit of reward deviation = 1 / (std + eps)
    # sample std: easy sqrt(5e-4/3) = 0.0129099 -> 1/(0.0129099+1e-6) = 77.4537; hard sqrt(0.031) = 0.1760682 -> 5.6795
    torch.testing.assert_close(per_unit[:4], torch.full((4,), 1 / (math.sqrt(5e-4 / 3) + 1e-6)), rtol=1e-9, atol=0)
    torch.testing.assert_close(per_unit[4:], torch.full((4,), 1 / (math.sqrt(0.031) + 1e-6)), rtol=1e-9, atol=0)
    assert per_unit[0] / per_unit[4] > 13.6  # 77.45 / 5.68 = 13.64
    # a 0.015 deviation on the easy prompt gets |A| = 1.16, about the 1.25 of a 0.22 deviation on the hard one
    assert abs(float(grpo[0]) - 1.1618) < 1e-3 and abs(float(grpo[4]) - 1.2495) < 1e-3
    # scale=none (Dr.GRPO): the advantage IS the deviation, the same weight per unit for both prompts
    dr = group_advantages(ObjectiveConfig.preset("dr_grpo", norm_constant=64), r, 4)
    torch.testing.assert_close(dr, dev, rtol=0, atol=1e-12)


# --------------------------------------------------------------------------- GAE
def test_gae_three_tokens_hand_unrolled():
    gamma, lam = 0.9, 0.8
    rewards = T([[0.0, 0.0, 1.0, 9.0]])  # 4th position is padding: garbage must not leak
    values = T([[0.5, 0.6, 0.7, 5.0]])
    mask = T([[1, 1, 1, 0]])
    # delta_2 = 1 + 0.9*0 - 0.7 = 0.3                      (terminal: V after the last token = 0)
    # delta_1 = 0 + 0.9*0.7 - 0.6 = 0.03
    # delta_0 = 0 + 0.9*0.6 - 0.5 = 0.04
    # A_2 = 0.3;  A_1 = 0.03 + 0.72*0.3 = 0.246;  A_0 = 0.04 + 0.72*0.246 = 0.21712
    # returns = A + V = [0.71712, 0.846, 1.0]
    adv, ret = gae_advantages(rewards, values, mask, gamma, lam)
    torch.testing.assert_close(adv, T([[0.21712, 0.246, 0.3, 0.0]]), rtol=0, atol=1e-12)
    torch.testing.assert_close(ret, T([[0.71712, 0.846, 1.0, 0.0]]), rtol=0, atol=1e-12)


def test_gae_matches_textbook_recursion_per_row():
    g = torch.Generator().manual_seed(3)
    B, Tn = 4, 7
    rewards = torch.randn(B, Tn, generator=g)
    values = torch.randn(B, Tn, generator=g, requires_grad=True)
    lengths = [7, 3, 1, 5]
    mask = T([[1] * n + [0] * (Tn - n) for n in lengths])
    gamma, lam = 0.97, 0.9
    adv, ret = gae_advantages(rewards, values, mask, gamma, lam)
    assert not adv.requires_grad and not ret.requires_grad
    for i, n in enumerate(lengths):
        r, v = rewards[i, :n].tolist(), values[i, :n].tolist() + [0.0]
        expect, running = [0.0] * n, 0.0
        for t in reversed(range(n)):
            running = (r[t] + gamma * v[t + 1] - v[t]) + gamma * lam * running
            expect[t] = running
        torch.testing.assert_close(adv[i, :n], T(expect), rtol=0, atol=1e-12)
        torch.testing.assert_close(ret[i, :n], T(expect) + values[i, :n].detach(), rtol=0, atol=1e-12)
        assert (adv[i, n:] == 0).all() and (ret[i, n:] == 0).all()


def test_gae_lambda_one_gamma_one_is_return_to_go_minus_value():
    rewards = T([[0.1, -0.2, 1.0]])
    values = T([[0.3, 0.2, 0.1]])
    adv, _ = gae_advantages(rewards, values, torch.ones(1, 3), 1.0, 1.0)
    # A_t = sum_{s>=t} r_s - V_t = [0.9-0.3, 0.8-0.2, 1.0-0.1]
    torch.testing.assert_close(adv, T([[0.6, 0.6, 0.9]]), rtol=0, atol=1e-12)


def test_whiten_and_critic_advantages():
    x = T([[1.0, 2.0, 3.0], [4.0, 99.0, 99.0]])
    mask = T([[1, 1, 1], [1, 0, 0]])
    # response values [1,2,3,4]: mean 2.5, sample std sqrt(5/3) = 1.2909944
    s = math.sqrt(5 / 3)
    got = whiten(x, mask, eps=0.0)
    torch.testing.assert_close(got, T([[-1.5 / s, -0.5 / s, 0.5 / s], [1.5 / s, 0.0, 0.0]]), rtol=0, atol=1e-12)
    assert (whiten(T([[2.0, 2.0]]), torch.ones(1, 2)) == 0).all()
    # critic path: GAE then whitening under scale=batch_std (ppo preset); returns stay un-whitened
    cfg = ObjectiveConfig.preset("ppo", gamma=0.9, lam=0.8, adv_eps=0.0)
    rewards, values, m = T([[0.0, 0.0, 1.0]]), T([[0.5, 0.6, 0.7]]), torch.ones(1, 3)
    adv, ret = critic_advantages(cfg, rewards, values, m)
    raw = T([0.21712, 0.246, 0.3])
    torch.testing.assert_close(adv[0], (raw - raw.mean()) / raw.std(), rtol=0, atol=1e-12)
    torch.testing.assert_close(ret, T([[0.71712, 0.846, 1.0]]), rtol=0, atol=1e-12)
