"""The optimal token baseline, `baseline: optimal_token` (harness/objective/optimal_token_baseline.py): by hand,
against verl 0.9.1's `compute_optimal_token_baseline_advantage` (fixture from
benchmarks/reference/optimal_token_baseline.py) through the shared `advantages`, its wiring and its refusals."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from harness.config import ConfigError, load_config
from harness.objective import ObjectiveConfig, TokenLogits, advantages, inputs_needed
from harness.objective.optimal_token_baseline import (
    SUM_PI_SQUARED,
    optimal_token_advantages,
    path_variance,
    sum_pi_squared,
)

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "optimal_token_baseline.json").read_text())
X = {k: torch.tensor(v, dtype=torch.float64) for k, v in FIXTURE["inputs"].items()}
SMOKE = "experiments/runs/smoke.yaml"


def _cfg(**knobs) -> ObjectiveConfig:
    return ObjectiveConfig(baseline="optimal_token", scale="none", kl_coef=0.0, **knobs)


def test_sum_pi_squared_by_hand():
    """logits log [1, 1, 2] -> pi = [1/4, 1/4, 1/2]: sum pi^2 = 1/16 + 1/16 + 1/4 = 0.375."""
    logits = torch.log(torch.tensor([[[1.0, 1.0, 2.0]]]))
    view = TokenLogits(logits, torch.logsumexp(logits, -1), torch.ones(1, 1), torch.zeros(1, 1, dtype=torch.long))
    assert sum_pi_squared(view).item() == pytest.approx(0.375)


def test_path_variance_by_hand():
    """w = 1 - 2 pi + sum pi^2 per token, summed from the start; padding adds nothing."""
    old_logp = torch.log(torch.tensor([[0.5, 0.25, 0.9]]))
    sum_sq = torch.tensor([[0.5, 0.25, 7.0]])
    W = path_variance(old_logp, sum_sq, torch.tensor([[1.0, 1.0, 0.0]]))
    assert W.tolist()[0] == pytest.approx([0.5, 0.5 + 0.75, 0.5 + 0.75])


def test_two_rows_by_hand():
    """One group of two rows of one token: W = 1 - 2 pi + s; B = (1 * W_0 + 0 * W_1) / (W_0 + W_1)."""
    rewards = torch.tensor([[1.0], [0.0]])
    mask = torch.ones(2, 1)
    old_logp = torch.log(torch.tensor([[0.5], [0.25]]))
    sum_sq = torch.tensor([[0.5], [0.5]])  # W = 0.5 and 1.0
    adv, returns = optimal_token_advantages(rewards, mask, old_logp, sum_sq, group_size=2)
    b = 0.5 / (1.5 + 1e-8)
    assert adv[:, 0].tolist() == pytest.approx([1 - b, -b]) and returns[:, 0].tolist() == [1.0, 0.0]


def test_the_zero_tail_by_hand():
    """Rows of length 3 and 1: past position 1 only the long row is there, its baseline is its own return (A = 0)
    without the zero tail, 0 (A = G) with it."""
    rewards = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    old_logp, sum_sq = torch.full((2, 3), math.log(0.5)), torch.full((2, 3), 0.5)
    kept, _ = optimal_token_advantages(rewards, mask, old_logp, sum_sq, group_size=2, zero_tail=False)
    zeroed, _ = optimal_token_advantages(rewards, mask, old_logp, sum_sq, group_size=2, zero_tail=True)
    assert kept[0, 1:].tolist() == pytest.approx([0.0, 0.0], abs=1e-7)
    assert zeroed[0, 1:].tolist() == [1.0, 1.0] and zeroed[0, 0].item() == pytest.approx(kept[0, 0].item())


@pytest.mark.parametrize("key", sorted(FIXTURE["adv"]))
def test_equals_verl(key):
    groups, tail = key.split(",")
    cfg = _cfg(otb_zero_tail=tail == "zero_tail")
    rewards = torch.tensor(FIXTURE["rewards"], dtype=torch.float64)
    scored = advantages(
        cfg,
        rewards,
        X["mask"],
        group_size=int(groups.removeprefix("groups_of_")),
        extras={"old_logp": X["old_logp"], SUM_PI_SQUARED: X["sum_pi_squared"]},
    )
    ref = torch.tensor(FIXTURE["adv"][key], dtype=torch.float64)
    assert scored.adv.shape == ref.shape
    assert torch.allclose(scored.adv, ref, atol=1e-6, rtol=0), (scored.adv - ref).abs().max()


def test_the_fixture_reaches_the_zero_tail():
    """The zero tail changes the verl advantages, so the test above can fail on it."""
    adv = FIXTURE["adv"]
    assert adv["groups_of_4,zero_tail"] != adv["groups_of_4,no_zero_tail"]


def test_it_needs_pi_old_and_its_forward():
    needs = inputs_needed(_cfg())
    assert needs.recompute_old_logp and needs.old_forward
    assert not inputs_needed(ObjectiveConfig(algorithm="dapo")).recompute_old_logp
    with pytest.raises(ValueError, match="sum_pi_squared"):
        advantages(_cfg(), torch.ones(4), torch.ones(4, 2), group_size=4, extras={"old_logp": torch.zeros(4, 2)})


@pytest.mark.parametrize(
    "overrides, named",
    [
        (["objective.baseline=optimal_token"], "scale"),  # grpo's group_std
        (["objective.baseline=optimal_token", "objective.scale=none", "objective.otb_zero_tail=1"], "otb_zero_tail"),
        (["objective.otb_zero_tail=false"], "objective.otb_zero_tail"),  # read only with the baseline
    ],
)
def test_bad_values_are_refused_naming_the_key(overrides, named):
    with pytest.raises(ConfigError, match=named):
        load_config(SMOKE, overrides)
