"""VAPO's positive-example NLL, objective.positive_nll_coef (harness/objective/positive_nll.py): the rows it
trains on, the term by hand under two aggregations and its gradient, through `advantages` and `loss`, and its
refusals."""

from __future__ import annotations

import math

import pytest
import torch

from harness.config import ConfigError, load_config
from harness.objective import LossInputs, ObjectiveConfig, advantages, inputs_needed, loss
from harness.objective.positive_nll import ROWS_KEY, positive_nll_loss, positive_rows

SMOKE = "experiments/runs/smoke.yaml"
LOGP = torch.log(torch.tensor([[0.5, 0.25, 1.0], [0.5, 0.9, 0.1], [0.2, 1.0, 1.0]], dtype=torch.float64))
MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [1.0, 0.0, 0.0]], dtype=torch.float64)
REWARDS = torch.tensor([1.0, 0.0, 0.5])  # rows 0 and 2 have reward > 0; row 0 is the batch's max


def _cfg(**knobs) -> ObjectiveConfig:
    return ObjectiveConfig(kl_coef=0.0, **{"positive_nll_coef": 0.1, **knobs})


def test_the_rows():
    assert positive_rows(REWARDS, "positive").tolist() == [1.0, 0.0, 1.0]
    assert positive_rows(REWARDS, "max").tolist() == [1.0, 0.0, 0.0]
    assert positive_rows(torch.tensor([0.0, 0.0]), "max").tolist() == [0.0, 0.0]  # all equal: no best row
    assert positive_rows(torch.tensor([-1.0, 0.0]), "positive").tolist() == [0.0, 0.0]


def test_token_mean_by_hand_and_its_gradient():
    """Rows 0 and 2: -log 0.5 - log 0.25 - log 0.2 over the batch's 6 response tokens, times mu = 0.1."""
    lp = LOGP.clone().requires_grad_(True)
    value = positive_nll_loss(_cfg(agg="token_mean"), lp, MASK, positive_rows(REWARDS, "positive"))
    hand = 0.1 * (math.log(2) + math.log(4) + math.log(5)) / 6
    assert value.item() == pytest.approx(hand, abs=1e-12)
    (g,) = torch.autograd.grad(value, lp)
    assert g.flatten().tolist() == pytest.approx([-0.1 / 6, -0.1 / 6, 0.0, 0.0, 0.0, 0.0, -0.1 / 6, 0.0, 0.0])


def test_seq_mean_token_mean_by_hand():
    """Each row's token mean, then the mean over the 3 rows (the wrong row's NLL is 0 and still counts)."""
    value = positive_nll_loss(_cfg(), LOGP, MASK, positive_rows(REWARDS, "positive"))
    hand = 0.1 * ((math.log(2) + math.log(4)) / 2 + 0.0 + math.log(5)) / 3
    assert value.item() == pytest.approx(hand, abs=1e-12)


def test_padding_garbage_does_not_leak():
    lp = LOGP.clone()
    lp[0, 2] = float("-inf")
    value = positive_nll_loss(_cfg(agg="token_mean"), lp, MASK, torch.tensor([1.0, 1.0, 1.0]))
    assert math.isfinite(value.item())


def test_through_advantages_and_loss_it_is_added_to_the_policy_loss():
    """The scoring keeps the rows; `loss` adds mu L_NLL to the policy loss and logs it."""
    on, off = _cfg(agg="token_mean"), ObjectiveConfig(kl_coef=0.0, agg="token_mean")
    scored = advantages(on, REWARDS, MASK, group_size=3)
    assert scored.extras[ROWS_KEY].tolist() == [1.0, 0.0, 1.0]
    x = LossInputs(LOGP, LOGP, scored.adv, MASK, extras=scored.extras)
    with_nll, metrics = loss(on, x)
    without, _ = loss(off, LossInputs(LOGP, LOGP, scored.adv, MASK))
    hand = 0.1 * (math.log(2) + math.log(4) + math.log(5)) / 6
    assert (with_nll - without).item() == pytest.approx(hand, abs=1e-9)
    assert metrics["loss/positive_nll"] == pytest.approx(hand, abs=1e-9)


def test_max_rows_through_the_scoring():
    scored = advantages(_cfg(positive_nll_rows="max"), REWARDS, MASK, group_size=3)
    assert scored.extras[ROWS_KEY].tolist() == [1.0, 0.0, 0.0]


def test_off_by_default_and_a_zero_advantage_row_then_has_a_gradient():
    assert ROWS_KEY not in advantages(ObjectiveConfig(), REWARDS, MASK, group_size=3).extras
    assert inputs_needed(ObjectiveConfig(algorithm="dapo")).adv_only_gradient
    assert not inputs_needed(ObjectiveConfig(algorithm="dapo", positive_nll_coef=0.1)).adv_only_gradient


def test_without_the_rows_the_loss_says_what_is_missing():
    with pytest.raises(ValueError, match="positive_nll_rows"):
        loss(_cfg(), LossInputs(LOGP, LOGP, torch.zeros(3), MASK))


@pytest.mark.parametrize(
    "overrides, named",
    [
        (["objective.positive_nll_coef=-0.1"], "objective.positive_nll_coef"),
        (['objective.positive_nll_coef="much"'], "objective.positive_nll_coef"),
        (["objective.positive_nll_coef=0.1", "objective.positive_nll_rows=best"], "positive_nll_rows"),
        (["objective.positive_nll_rows=max"], "objective.positive_nll_rows"),  # set while the term is off
    ],
)
def test_bad_values_are_refused_naming_the_key(overrides, named):
    with pytest.raises(ConfigError, match=named):
        load_config(SMOKE, overrides)


def test_loads_from_yaml():
    obj = load_config(SMOKE, ["objective.positive_nll_coef=0.1", "objective.positive_nll_rows=max"]).objective
    assert (obj.positive_nll_coef, obj.positive_nll_rows) == (0.1, "max")
