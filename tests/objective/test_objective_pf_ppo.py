"""PF-PPO's reward-weighted resampling, objective.pf_ppo_reweight (harness/objective/pf_ppo.py): the weights by
hand, the drawn rows against verl 0.9.1's `compute_pf_ppo_reweight_data` (fixture from benchmarks/reference/pf_ppo.py)
with the same generator state, the batching call and its refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from harness.config import ConfigError, load_config
from harness.objective import ObjectiveConfig
from harness.objective.batching import resampled_rows
from harness.objective.pf_ppo import pf_ppo_indices, pf_ppo_weights

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "pf_ppo.json").read_text())
SMOKE = "experiments/runs/smoke.yaml"
R = torch.tensor([1.0, 0.0, -0.5, 1.0, -0.5])


def test_the_weights_by_hand():
    assert pf_ppo_weights(R, "pow", 2.0).tolist() == [1.0, 0.0, 0.25, 1.0, 0.25]  # |r|^2
    assert pf_ppo_weights(R, "pow", 1.0).tolist() == [1.0, 0.0, 0.5, 1.0, 0.5]
    assert pf_ppo_weights(R, "max_min", 2.0).tolist() == [1.0, 0.0, 1.0, 1.0, 1.0]  # max 1, min -0.5
    assert pf_ppo_weights(R, "max_random", 2.0).tolist() == pytest.approx([0.4, 0.1, 0.1, 0.4, 0.1])


def test_b_draws_and_a_zero_weight_row_almost_never():
    """verl adds 1e-8 to every weight: a row of weight 0 has probability 1e-8 / (sum w), not 0."""
    g = torch.Generator().manual_seed(0)
    idx = pf_ppo_indices(torch.tensor([1.0, 0.0]), "pow", 2.0, g)
    assert idx.shape == (2,) and idx.tolist() == [0, 0]


@pytest.mark.parametrize("key", sorted(FIXTURE["rows"]))
def test_the_rows_are_verls(key):
    method, weight_pow = key.split(",")
    rewards = torch.tensor(FIXTURE["rewards"])
    for seed, rows in FIXTURE["rows"][key].items():
        g = torch.Generator().manual_seed(int(seed))
        assert pf_ppo_indices(rewards, method, float(weight_pow), g).tolist() == rows, (key, seed)


def test_the_fixture_draws_differ_by_method():
    """Each method draws other rows from the same generator state, so the test above can fail on the weights."""
    firsts = [json.dumps(v["0"]) for v in FIXTURE["rows"].values()]
    assert len(set(firsts)) == len(firsts)


def test_through_batching():
    cfg = ObjectiveConfig(pf_ppo_reweight="max_min")
    idx = resampled_rows(cfg, R, torch.Generator().manual_seed(3))
    assert idx.shape == (5,) and set(idx.tolist()) <= {0, 2, 3, 4}
    assert resampled_rows(ObjectiveConfig(), R, torch.Generator()) is None  # off: the batch as it is


@pytest.mark.parametrize(
    "overrides, named",
    [
        (["objective.pf_ppo_reweight=linear"], "pf_ppo_reweight"),
        (["objective.pf_ppo_reweight=pow", "objective.pf_ppo_weight_pow=0"], "objective.pf_ppo_weight_pow"),
        (["objective.pf_ppo_weight_pow=3.0"], "objective.pf_ppo_weight_pow"),  # read only while it resamples
    ],
)
def test_bad_values_are_refused_naming_the_key(overrides, named):
    with pytest.raises(ConfigError, match=named):
        load_config(SMOKE, overrides)


def test_loads_from_yaml():
    obj = load_config(SMOKE, ["objective.pf_ppo_reweight=pow", "objective.pf_ppo_weight_pow=1.5"]).objective
    assert (obj.pf_ppo_reweight, obj.pf_ppo_weight_pow) == ("pow", 1.5)
