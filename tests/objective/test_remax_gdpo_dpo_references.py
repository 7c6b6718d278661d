"""ReMax (`baseline: remax`), GDPO (`task.reward_combine: normalize_then_sum`) and DPO-Shift
(`dpo_shift_lambda`): hand-computed values, and equal to verl 0.9.1 / TRL 1.16 on the fixture that
benchmarks/reference/remax_gdpo_dpo.py writes (random inputs with padding), at 1e-6."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from harness.objective import ObjectiveConfig, advantages, dpo_loss, inputs_needed
from harness.objective.advantages import whiten
from harness.objective.remax import remax_advantages
from harness.objective.reward_combine import combine, normalize_then_sum

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "remax_gdpo_dpo.json").read_text())


def _t(x) -> torch.Tensor:
    return torch.tensor(x, dtype=torch.float64)


# ----------------------------------------------------------------------------- ReMax
def test_remax_hand_computed():
    cfg = ObjectiveConfig.preset("remax")
    rewards = _t([1.0, 0.0, 1.0, 0.5])  # N = 2 prompts, G = 2
    greedy = _t([1.0, 1.0, 0.0, 0.0])  # prompt 0's greedy reward 1, prompt 1's 0
    assert remax_advantages(cfg, rewards, greedy, 2).tolist() == [0.0, -1.0, 1.0, 0.5]
    # composes with the scale knob: group_std divides each group's r - r_greedy by the group's reward std
    std = ObjectiveConfig.preset("remax", scale="group_std")
    got = remax_advantages(std, rewards, greedy, 2)
    assert got.tolist() == pytest.approx(
        [0.0, -1.0 / (math.sqrt(0.5) + 1e-6), 1.0 / (math.sqrt(0.125) + 1e-6), 0.5 / (math.sqrt(0.125) + 1e-6)]
    )


def test_remax_through_the_trainer_call_logs_the_greedy_reward():
    cfg = ObjectiveConfig.preset("remax")
    assert inputs_needed(cfg).greedy_rewards and not inputs_needed(ObjectiveConfig.preset("grpo")).greedy_rewards
    mask = torch.ones(4, 3)
    scored = advantages(cfg, _t([1.0, 0.0, 1.0, 0.5]), mask, 2, greedy_rewards=_t([1.0, 1.0, 0.0, 0.0]))
    assert scored.adv.tolist() == [0.0, -1.0, 1.0, 0.5]
    assert scored.metrics["reward/greedy_mean"] == 0.5 and scored.metrics["reward/above_greedy_frac"] == 0.5
    with pytest.raises(ValueError, match="greedy_rewards"):
        advantages(cfg, _t([1.0, 0.0]), torch.ones(2, 3), 2)


def test_remax_kl_in_the_reward_comes_off_the_sampled_responses_only():
    cfg = ObjectiveConfig.preset("remax", kl_coef=0.5)
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    logp, ref = torch.tensor([[-1.0, -1.0], [-2.0, 0.0]]), torch.tensor([[-1.5, -1.0], [-1.0, 0.0]])
    scored = advantages(cfg, _t([1.0, 1.0]), mask, 1, logp=logp, ref_logp=ref, greedy_rewards=_t([0.0, 1.0]))
    # k1 sums: row 0 0.5, row 1 -1.0 -> rewards 1 - 0.25 and 1 + 0.5; minus the greedy rewards 0 and 1
    assert scored.adv.tolist() == pytest.approx([0.75, 0.5])


@pytest.mark.parametrize("case", FIXTURE["remax"], ids=lambda c: f"N{c['N']}G{c['G']}")
def test_remax_equals_verl(case):
    cfg = ObjectiveConfig.preset("remax")
    adv = remax_advantages(cfg, _t(case["rewards"]), _t(case["greedy"]), case["G"])
    verl, mask = _t(case["verl_adv"]), _t(case["mask"])
    ours = adv.unsqueeze(1) * mask  # verl broadcasts the sequence advantage over the response tokens
    assert torch.allclose(ours, verl, atol=1e-6, rtol=0)


# ----------------------------------------------------------------------------- GDPO
def test_gdpo_hand_computed():
    # one group of 3: reward a = [1, 0, 0] (mean 1/3, sample std 1/sqrt(3)), reward b = [2, 2, 2] (all equal)
    values = _t([[1.0, 2.0], [0.0, 2.0], [0.0, 2.0]])
    got = normalize_then_sum(values, _t([2.0, 5.0]), 3, "sample", 0.0)
    z = (2.0 / 3.0) * math.sqrt(3.0)  # (1 - 1/3) / (1/sqrt 3)
    assert got.tolist() == pytest.approx([2.0 * z, -z, -z], abs=1e-6)  # b's spread 0: it adds exactly 0
    # sum_then_normalize hands the task's totals through untouched (every run before the knob)
    totals = torch.tensor([3.0, 2.0, 2.0])
    cfg = ObjectiveConfig()
    assert combine("sum_then_normalize", totals, values, _t([1.0, 1.0]), 3, cfg) is totals
    with pytest.raises(ValueError, match="group_size >= 2"):
        normalize_then_sum(values, _t([1.0, 1.0]), 1)


def test_gdpo_keeps_a_small_reward_from_being_drowned():
    # reward a (spread 100) and b (spread 1) disagree; the weighted sum follows a alone, GDPO weighs both
    values = _t([[100.0, 0.0], [0.0, 1.0]])
    summed = values.sum(1)
    assert (summed[0] > summed[1]).item()
    assert normalize_then_sum(values, _t([1.0, 1.0]), 2).tolist() == pytest.approx([0.0, 0.0], abs=1e-5)


@pytest.mark.parametrize("case", FIXTURE["gdpo"], ids=lambda c: f"N{c['N']}G{c['G']}")
def test_gdpo_equals_trl_and_verl(case):
    values, weights, G, mask = _t(case["values"]), _t(case["weights"]), case["G"], _t(case["mask"])
    # TRL 1.16 normalize_then_sum: eps 1e-4 in both normalisations, then (r - batch mean) / (batch std + 1e-4)
    trl = ObjectiveConfig(baseline="batch_mean", scale="batch_std", adv_eps=1e-4, kl_coef=0.0)
    combined = normalize_then_sum(values, weights, G, trl.std, trl.adv_eps)
    ours = advantages(trl, combined, mask, G).adv.double()
    assert torch.allclose(ours, _t(case["trl_adv"]), atol=1e-6, rtol=0)
    # verl 0.9.1 gdpo, eps 1e-6: the group-normalised weighted sum (its Steps 1-2), token by token
    verl = ObjectiveConfig(baseline="batch_mean", scale="batch_std", adv_eps=1e-6, kl_coef=0.0)
    combined = normalize_then_sum(values, weights, G, verl.std, verl.adv_eps).double()
    assert torch.allclose(combined.unsqueeze(1) * mask, _t(case["verl_group_normalised_sum"]), atol=1e-6, rtol=0)
    # its Step 3 whitens over the response TOKENS (a long response weighs more; sample std over the tokens):
    # advantages.whiten, the critic's whitening -- not the objective's per-sequence batch_std (TRL's)
    white = whiten(combined.unsqueeze(1).expand_as(mask), mask, std="sample", eps=0.0)
    assert torch.allclose(white, _t(case["verl_adv"]), atol=1e-6, rtol=0)


# ----------------------------------------------------------------------------- DPO-Shift
def _dpo(cfg, pc, pr, rc, rr):
    return dpo_loss(cfg, _t(pc), _t(pr), _t(rc), _t(rr))


def test_dpo_shift_hand_computed():
    cfg = ObjectiveConfig.preset("dpo", dpo_beta=0.5, dpo_shift_lambda=0.5)
    # chosen log-ratio -2 - (-3) = 1, rejected -4 - (-2) = -2: h = 1 - 0.5 * (-2) = 2, loss = -log sigma(0.5 * 2)
    loss, metrics = _dpo(cfg, [-2.0], [-4.0], [-3.0], [-2.0])
    assert float(loss) == pytest.approx(math.log1p(math.exp(-1.0)), abs=1e-12)
    assert metrics["rewards/margin"] == pytest.approx(0.5 * (1.0 - (-2.0)))  # the margin keeps its definition
    plain, _ = _dpo(ObjectiveConfig.preset("dpo", dpo_beta=0.5), [-2.0], [-4.0], [-3.0], [-2.0])
    assert float(plain) == pytest.approx(math.log1p(math.exp(-1.5)), abs=1e-12)


def test_dpo_shift_below_one_pushes_the_chosen_up_harder():
    # d loss / d pi_c = -beta sigma(-z) and d loss / d pi_r = lambda beta sigma(-z): lambda < 1 moves the
    # rejected less, so the chosen's share of the step grows (the paper's fix for likelihood displacement)
    pc, pr = torch.tensor([-5.0], requires_grad=True), torch.tensor([-5.0], requires_grad=True)
    ref = torch.tensor([-5.0])
    loss, _ = dpo_loss(ObjectiveConfig.preset("dpo", dpo_shift_lambda=0.5), pc, pr, ref, ref)
    loss.backward()
    assert float(pr.grad) == pytest.approx(-0.5 * float(pc.grad))


@pytest.mark.parametrize("case", FIXTURE["dpo"], ids=lambda c: f"beta{c['beta']}")
def test_dpo_shift_of_one_equals_trl_sigmoid(case):
    cfg = ObjectiveConfig.preset("dpo", dpo_beta=case["beta"], dpo_shift_lambda=1.0)
    loss, _ = _dpo(cfg, case["pol_chosen"], case["pol_rejected"], case["ref_chosen"], case["ref_rejected"])
    assert float(loss) == pytest.approx(float(_t(case["trl_sigmoid"]).mean()), abs=1e-6)


def test_dpo_shift_lambda_refused_outside_zero_to_one():
    with pytest.raises(ValueError, match="dpo_shift_lambda"):
        ObjectiveConfig.preset("dpo", dpo_shift_lambda=1.5)
