"""OPO's length-weighted baseline, `baseline: opo` (harness/objective/opo.py): by hand, against verl 0.9.1's
`compute_opo_outcome_advantage` (fixture from benchmarks/reference/opo.py), its edge cases and the preset."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from harness.config import ConfigError, load_config
from harness.objective import ObjectiveConfig, advantages

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "opo.json").read_text())
SMOKE = "experiments/runs/smoke.yaml"


def _mask(lengths: list[int], T: int) -> torch.Tensor:
    return (torch.arange(T).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).to(torch.float32)  # (B, T)


def _adv(cfg: ObjectiveConfig, rewards, lengths, group_size: int, T: int = 6) -> torch.Tensor:
    r = torch.tensor(rewards, dtype=torch.float32)
    return advantages(cfg, r, _mask(lengths, T), group_size).adv


OPO = ObjectiveConfig(algorithm="opo")


def test_length_weighted_baseline_by_hand():
    # lengths 1, 2, 3, 4; rewards 1, 0, 0, 1: b = (1*1 + 4*1) / 10 = 0.5
    adv = _adv(OPO, [1.0, 0.0, 0.0, 1.0], [1, 2, 3, 4], 4)
    assert adv.tolist() == pytest.approx([0.5, -0.5, -0.5, 0.5])
    # the group mean would be 0.5 too; lengths 4, 1, 1, 1 weigh the right answer: b = 4 / 7
    adv = _adv(OPO, [1.0, 0.0, 0.0, 0.0], [4, 1, 1, 1], 4)
    assert adv.tolist() == pytest.approx([3 / 7, -4 / 7, -4 / 7, -4 / 7])
    mean_baseline = _adv(ObjectiveConfig(algorithm="opo", baseline="group_mean"), [1.0, 0.0, 0.0, 0.0], [4, 1, 1, 1], 4)
    assert mean_baseline.tolist() == pytest.approx([0.75, -0.25, -0.25, -0.25])  # so the test can fail


def test_equal_lengths_give_the_group_mean():
    r = [0.9, 0.1, 0.5, 0.0]
    ours = _adv(OPO, r, [3, 3, 3, 3], 4)
    assert ours.tolist() == pytest.approx([x - sum(r) / 4 for x in r], abs=1e-7)


def test_edge_cases():
    assert _adv(OPO, [1.0, 1.0, 1.0], [1, 5, 2], 3).tolist() == [0.0, 0.0, 0.0]  # all equal: exactly 0
    assert _adv(OPO, [1.0, 0.0], [0, 0], 2).tolist() == pytest.approx([0.5, -0.5])  # no length: the plain mean
    assert _adv(OPO, [1.0, 0.0], [3, 2], 1).tolist() == [1.0, 0.0]  # a group of one: baseline 0 (verl)


def test_the_scale_knob_still_applies():
    cfg = ObjectiveConfig(algorithm="opo", scale="group_std")
    adv = _adv(cfg, [1.0, 0.0, 0.0, 1.0], [1, 2, 3, 4], 4)
    std = torch.tensor([1.0, 0.0, 0.0, 1.0]).std().item()
    a = 0.5 / (std + 1e-6)  # b = 0.5 as above, then the group std
    assert adv.tolist() == pytest.approx([a, -a, -a, a])


@pytest.mark.parametrize("key, group_size", [("groups_of_4", 4), ("groups_of_1", 1)])
def test_equals_verl(key, group_size):
    """verl's per-token advantages are 0 on an empty row; ours gives it a value no token carries."""
    lengths = FIXTURE["lengths"]
    ours = _adv(OPO, FIXTURE["rewards"], lengths, group_size, FIXTURE["T"])
    keep = torch.tensor(lengths) > 0
    ref = torch.tensor(FIXTURE[key], dtype=ours.dtype)
    assert torch.allclose(ours[keep], ref[keep], atol=1e-6, rtol=0)


def test_the_fixture_tells_opo_from_the_group_mean():
    lengths, rewards = FIXTURE["lengths"], FIXTURE["rewards"]
    grpo_mean = _adv(ObjectiveConfig(algorithm="opo", baseline="group_mean"), rewards, lengths, 4, FIXTURE["T"])
    assert (grpo_mean - torch.tensor(FIXTURE["groups_of_4"], dtype=grpo_mean.dtype)).abs().max() > 0.1


def test_the_kl_in_the_reward_comes_off_before_the_baseline():
    cfg = ObjectiveConfig(algorithm="opo", kl_coef=0.5, kl_estimator="k1", kl_placement="reward")
    mask = _mask([1, 1], 2)
    logp, ref = torch.tensor([[-1.0, 0.0], [-1.0, 0.0]]), torch.tensor([[-2.0, 0.0], [-1.0, 0.0]])
    adv = advantages(cfg, torch.tensor([1.0, 1.0]), mask, 2, logp=logp, ref_logp=ref).adv
    assert adv.tolist() == pytest.approx([-0.25, 0.25])  # rewards 1 - 0.5*1, 1: b = 0.75


def test_the_preset_loads_from_yaml_and_a_typo_is_refused():
    obj = load_config(SMOKE, ["objective.preset=opo"]).objective
    assert (obj.baseline, obj.scale, obj.kl_coef, obj.agg) == ("opo", "none", 0.0, "token_mean")
    with pytest.raises(ConfigError, match="objective.baseline"):
        load_config(SMOKE, ["objective.baseline=opo_len"])
