"""TOPR, `clip: topr` (harness/objective/topr.py): by hand, against ROLL's `_compute_topr_loss` (fixture from
benchmarks/reference/topr.py) through the shared `advantages` and `policy_loss`, and its refusals."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from harness.config import ConfigError, load_config
from harness.objective import ObjectiveConfig, advantages
from harness.objective.policy import policy_loss
from harness.objective.topr import POSITIVE, topr_token_loss

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "topr.json").read_text())
X = {k: torch.tensor(v, dtype=torch.float64) for k, v in FIXTURE["inputs"].items()}
SMOKE = "experiments/runs/smoke.yaml"


def _cfg(w_pos: float = 1.0, w_neg: float = 1.0) -> ObjectiveConfig:
    return ObjectiveConfig(
        clip="topr", agg="token_mean", kl_coef=0.0, topr_positive_weight=w_pos, topr_negative_weight=w_neg
    )


def test_by_hand():
    """A right row keeps -A logp whatever the ratio; a wrong row's weight is the ratio, capped at 1."""
    logp = torch.tensor([[math.log(0.5)], [math.log(0.5)], [math.log(0.5)]], dtype=torch.float64, requires_grad=True)
    old = torch.log(torch.tensor([[0.25], [0.25], [0.8]], dtype=torch.float64))  # ratios 2, 2, 0.625
    adv = torch.tensor([[1.0], [-1.0], [-1.0]], dtype=torch.float64)
    loss = topr_token_loss(logp, old, adv, torch.tensor([1.0, 0.0, 0.0]), 1.0, 1.0)
    assert loss[:, 0].tolist() == pytest.approx([math.log(0.5) * -1.0, 1.0 * math.log(0.5), 0.625 * math.log(0.5)])
    (g,) = torch.autograd.grad(loss.sum(), logp)
    assert g[:, 0].tolist() == pytest.approx([-1.0, 1.0, 0.625])  # -w A on T+, -clip(rho, 0, 1) A on T-


def test_the_split_is_the_reward_not_the_advantage():
    """A right answer in a group of right answers has A < 0 under the group mean and is still in T+."""
    cfg = _cfg()
    rewards = torch.tensor([1.0, 1.0, 0.5, 1.0])
    mask = torch.ones(4, 1)
    scored = advantages(cfg, rewards, mask, group_size=4)
    assert scored.extras[POSITIVE].tolist() == [1.0, 1.0, 1.0, 1.0]
    assert scored.adv[2] < 0 and scored.extras[POSITIVE][2] == 1.0


@pytest.mark.parametrize("key", sorted(FIXTURE["roll"]))
def test_equals_roll(key):
    w_pos, w_neg = (float(w) for w in key.split(","))
    cfg = _cfg(w_pos, w_neg)
    rewards = torch.tensor(FIXTURE["rewards"])
    scored = advantages(cfg, rewards, X["mask"], group_size=1)
    lp = X["logp"].clone().requires_grad_(True)
    loss, _ = policy_loss(cfg, lp, X["old_logp"], X["adv"], X["mask"], extras=scored.extras)
    (g,) = torch.autograd.grad(loss, lp)
    ref = FIXTURE["roll"][key]
    assert loss.item() == pytest.approx(ref["loss"], abs=1e-6)
    assert torch.allclose(g, torch.tensor(ref["grad"], dtype=g.dtype), atol=1e-6, rtol=0)


def test_the_fixture_reaches_the_taper_and_the_weights_matter():
    ratio = torch.exp(X["logp"] - X["old_logp"])
    negative = torch.tensor(FIXTURE["rewards"]) <= 0
    on = X["mask"] > 0
    assert (ratio[negative] > 1)[on[negative]].any() and (ratio[negative] < 1)[on[negative]].any()
    assert abs(FIXTURE["roll"]["1.0,1.0"]["loss"] - FIXTURE["roll"]["0.7,1.3"]["loss"]) > 1e-3


def test_without_the_rewards_it_says_what_it_needs():
    with pytest.raises(ValueError, match=POSITIVE):
        policy_loss(_cfg(), X["logp"], X["old_logp"], X["adv"], X["mask"])


@pytest.mark.parametrize(
    "overrides, named",
    [
        (["objective.clip=topr", "objective.ratio=sequence"], "ratio"),
        (["objective.clip=topr", "objective.topr_negative_weight=0"], "objective.topr_negative_weight"),
        (["objective.clip=topr", "objective.topr_positive_weight=much"], "objective.topr_positive_weight"),
        (["objective.topr_positive_weight=2"], "topr_positive_weight"),
    ],
)
def test_bad_settings_are_refused_naming_the_key(overrides, named):
    with pytest.raises(ConfigError, match=named):
        load_config(SMOKE, overrides)


def test_loads_from_yaml():
    obj = load_config(SMOKE, ["objective.clip=topr", "objective.topr_negative_weight=0.5"]).objective
    assert (obj.clip, obj.topr_positive_weight, obj.topr_negative_weight) == ("topr", 1.0, 0.5)
