"""On-policy distillation, objective.distill_coef > 0 (harness/objective/distill.py): the per-token advantage
A_t = [A_i] - distill_coef (log pi_old - log pi_T) by hand, through `advantages`, what it asks of the trainer,
the opd preset, and verl 0.9.1's distillation loss (fixture from benchmarks/reference/distill.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from harness.objective import LossInputs, ObjectiveConfig, advantages, inputs_needed, loss
from harness.objective.distill import distill_advantages, reverse_kl, teacher_kl_mean

MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])  # (B=2, T=3): lengths 3 and 2
LOGP = torch.tensor([[-1.0, -2.0, -0.5], [-0.3, -1.2, 0.0]])
TEACHER = torch.tensor([[-1.5, -1.0, -0.5], [-0.3, -2.2, -9.0]])


def _close(got: torch.Tensor, want) -> None:
    torch.testing.assert_close(got, torch.tensor(want, dtype=got.dtype), rtol=0, atol=1e-6)


K = [[0.5, -1.0, 0.0], [0.0, 1.0, 0.0]]  # log pi_old - log pi_T on the mask, 0 off it


def test_reverse_kl_and_its_mean_by_hand():
    _close(reverse_kl(LOGP, TEACHER, MASK), K)
    assert teacher_kl_mean(LOGP, TEACHER, MASK) == pytest.approx((0.5 - 1.0 + 0.0 + 0.0 + 1.0) / 5)
    assert teacher_kl_mean(LOGP, TEACHER, torch.zeros_like(MASK)) == 0.0


def test_distillation_alone_by_hand():
    adv = distill_advantages(None, LOGP, TEACHER, MASK, 2.0)  # A_t = -2 k_t
    _close(adv, [[-1.0, 2.0, 0.0], [0.0, -2.0, 0.0]])


def test_the_task_advantage_is_added_per_row():
    adv = distill_advantages(torch.tensor([0.5, -0.5]), LOGP, TEACHER, MASK, 2.0)  # A_i - 2 k_t
    _close(adv, [[-0.5, 2.5, 0.5], [-0.5, -2.5, 0.0]])  # the padded token stays 0
    per_token = distill_advantages(torch.full((2, 3), 0.25), LOGP, TEACHER, MASK, 1.0)
    _close(per_token, [[-0.25, 1.25, 0.25], [0.25, -0.75, 0.0]])


def test_advantages_of_the_opd_preset_are_minus_the_reverse_kl():
    opd = ObjectiveConfig.preset("opd")
    scored = advantages(opd, torch.tensor([1.0, 0.0]), MASK, 2, logp=LOGP, extras={"teacher_logp": TEACHER})
    _close(scored.adv, [[-k for k in row] for row in K])
    assert scored.metrics["distill/reverse_kl"] == pytest.approx(0.1)
    assert scored.metrics["distill/teacher_logp_mean"] == pytest.approx((-1.5 - 1.0 - 0.5 - 0.3 - 2.2) / 5)


def test_the_mix_keeps_the_group_advantage():
    mix = ObjectiveConfig.preset("opd", distill_task_advantage=True, baseline="group_mean", scale="none")
    scored = advantages(mix, torch.tensor([1.0, 0.0]), MASK, 2, logp=LOGP, extras={"teacher_logp": TEACHER})
    # A_i = r_i - mean = +-0.5, then - k_t
    _close(scored.adv, [[0.0, 1.5, 0.5], [-0.5, -1.5, 0.0]])


def test_what_it_asks_of_the_trainer():
    needs = inputs_needed(ObjectiveConfig.preset("opd"))
    assert needs.teacher_logp and needs.current_logp_for_kl and not needs.ref_logp
    grpo = inputs_needed(ObjectiveConfig.preset("grpo"))
    assert not grpo.teacher_logp and not grpo.current_logp_for_kl
    with pytest.raises(ValueError, match="teacher_logp"):
        advantages(ObjectiveConfig.preset("opd"), torch.tensor([1.0, 0.0]), MASK, 2, logp=LOGP)


def test_a_per_token_baseline_is_refused():
    with pytest.raises(ValueError, match="baseline='critic' with distill_coef > 0"):
        ObjectiveConfig.preset("opd", baseline="critic")
    for per_token in ("prime", "remax", "opo"):  # each computes its own advantages
        with pytest.raises(ValueError, match=f"baseline='{per_token}' with distill_coef > 0"):
            ObjectiveConfig.preset("opd", baseline=per_token)
    with pytest.raises(ValueError, match="distill_coef"):
        ObjectiveConfig.preset("opd", distill_coef=-0.5)


FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "distill.json").read_text())


@pytest.mark.parametrize("case", FIXTURE["cases"], ids=lambda c: f"coef{c['coef']}")
def test_equal_to_verls_distillation_loss_on_policy(case):
    # verl: L_pg(A_task) + coef * L_pg(-(log pi_theta - log pi_T)), vanilla PPO, token-mean (benchmarks/reference/
    # distill.py); here one policy loss of A_task - coef * k at ratio 1: the same loss and gradient
    t = {k: torch.tensor(case[k], dtype=torch.float64) for k in ("logp", "teacher_logp", "task_adv", "mask")}
    cfg = ObjectiveConfig.preset("opd", distill_coef=case["coef"], distill_task_advantage=True)
    adv = distill_advantages(t["task_adv"], t["logp"], t["teacher_logp"], t["mask"], case["coef"])
    logp = t["logp"].clone().requires_grad_(True)
    total, _ = loss(cfg, LossInputs(logp, t["logp"], adv, t["mask"]))
    total.backward()
    assert float(total.detach()) == pytest.approx(case["loss"], abs=1e-9)
    torch.testing.assert_close(logp.grad, torch.tensor(case["grad"], dtype=torch.float64), rtol=0, atol=1e-9)
