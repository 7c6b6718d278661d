"""The Bradley–Terry loss (harness/rm/loss.py): hand-computed values and TRL 1.16's RewardTrainer loss."""

import json
import math
from pathlib import Path

import pytest
import torch

from harness.rm.loss import bt_loss

FIXTURE = Path(__file__).resolve().parents[1] / "objective" / "fixtures" / "trl_reward_loss.json"


def test_bt_loss_hand_computed():
    chosen, rejected = torch.tensor([2.0, 0.0]), torch.tensor([0.0, 0.0])
    # -(log σ(2) + log σ(0)) / 2 = (log(1 + e^-2) + log 2) / 2
    plain = (math.log1p(math.exp(-2)) + math.log(2)) / 2
    loss, metrics = bt_loss(chosen, rejected)
    assert float(loss) == pytest.approx(plain, abs=1e-6)  # 0.4100378
    assert metrics["accuracy"] == 0.5  # a tie is not a win
    assert metrics["margin"] == pytest.approx(1.0)
    # margin m = [1, 0]: -(log σ(2 - 1) + log σ(0)) / 2
    with_margin, _ = bt_loss(chosen, rejected, margin=torch.tensor([1.0, 0.0]))
    assert float(with_margin) == pytest.approx((math.log1p(math.exp(-1)) + math.log(2)) / 2, abs=1e-6)
    # η = 0.1: + 0.1 * mean((2 + 0)^2, (0 + 0)^2) = + 0.2
    centred, _ = bt_loss(chosen, rejected, center_rewards_coefficient=0.1)
    assert float(centred) == pytest.approx(plain + 0.2, abs=1e-6)


def test_bt_loss_gradient_pushes_chosen_up():
    chosen, rejected = torch.zeros(3, requires_grad=True), torch.zeros(3, requires_grad=True)
    bt_loss(chosen, rejected)[0].backward()
    assert torch.allclose(chosen.grad, torch.full((3,), -0.5 / 3))  # d/dr_c = -(1 - σ(0)) / P
    assert torch.allclose(rejected.grad, torch.full((3,), 0.5 / 3))


def test_bt_loss_refuses_mismatched_shapes():
    with pytest.raises(ValueError, match="chosen and rejected must be"):
        bt_loss(torch.zeros(3), torch.zeros(2))


@pytest.mark.parametrize("case", range(4))
def test_bt_loss_equals_trl_1_16(case):
    """benchmarks/reference/trl_reward_loss.py ran TRL 1.16's RewardTrainer.compute_loss on these rewards."""
    data = json.loads(FIXTURE.read_text())
    c = data["cases"][case]
    margin = None if c["margin"] is None else torch.tensor(c["margin"], dtype=torch.float64)
    loss, _ = bt_loss(
        torch.tensor(data["chosen"], dtype=torch.float64),
        torch.tensor(data["rejected"], dtype=torch.float64),
        margin,
        c["center_rewards_coefficient"],
    )
    assert float(loss) == pytest.approx(c["loss"], abs=1e-6), c["name"]
