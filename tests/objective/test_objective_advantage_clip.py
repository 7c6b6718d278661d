"""Advantage clipping, adv_clip_low / adv_clip_high (harness/objective/advantage_clip.py): by hand, against
NeMo-RL's `_clip_grpo_advantages` and ROLL's `advantage_clip` on their own GRPO advantages (fixture from
benchmarks/reference/advantage_clip.py), and their refusals."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from harness.config import ConfigError, load_config
from harness.objective import ObjectiveConfig
from harness.objective.advantage_clip import clip_advantages
from harness.objective.api import advantages

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "advantage_clip.json").read_text())
REWARDS = torch.tensor(FIXTURE["rewards"], dtype=torch.float32)  # the peers' dtype
G = FIXTURE["group_size"]
MASK = torch.ones(REWARDS.shape[0], 3, dtype=torch.float32)
SMOKE = "experiments/runs/smoke.yaml"


def _bound(text: str) -> float | None:
    return None if text == "None" else float(text)


def test_clamp_by_hand():
    cfg = ObjectiveConfig(adv_clip_low=-0.5, adv_clip_high=1.0)
    adv = torch.tensor([1.5, -0.5, -0.7, 0.0, 0.99])
    mask = torch.ones(5, 2)
    clipped, metrics = clip_advantages(cfg, adv, mask)
    assert clipped.tolist() == pytest.approx([1.0, -0.5, -0.5, 0.0, 0.99])
    assert metrics == {"adv/clip_frac": pytest.approx(2 / 5)}  # 1.5 and -0.7 moved; -0.5 sits on the bound


def test_one_bound_leaves_the_other_side():
    adv = torch.tensor([3.0, -3.0])
    mask = torch.ones(2, 1)
    assert clip_advantages(ObjectiveConfig(adv_clip_high=1.0), adv, mask)[0].tolist() == [1.0, -3.0]
    assert clip_advantages(ObjectiveConfig(adv_clip_low=-1.0), adv, mask)[0].tolist() == [3.0, -1.0]


def test_off_by_default_and_no_metric():
    adv = torch.tensor([30.0, -30.0])
    clipped, metrics = clip_advantages(ObjectiveConfig(), adv, torch.ones(2, 1))
    assert clipped is adv and metrics == {}


def test_per_token_advantages_count_response_tokens():
    """A critic's (B, T) advantages are clipped token by token; the fraction counts only response tokens."""
    cfg = ObjectiveConfig(adv_clip_low=-1.0, adv_clip_high=1.0)
    adv = torch.tensor([[2.0, 0.5, 9.0], [-3.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])  # the 9.0 is padding
    clipped, metrics = clip_advantages(cfg, adv, mask)
    assert clipped.tolist() == [[1.0, 0.5, 1.0], [-1.0, 0.0, 0.0]]
    assert metrics["adv/clip_frac"] == pytest.approx(2 / 5)


def test_rows_without_a_response_are_not_counted():
    cfg = ObjectiveConfig(adv_clip_high=1.0)
    adv = torch.tensor([2.0, 5.0, 0.5])
    mask = torch.tensor([[1.0], [0.0], [1.0]])
    assert clip_advantages(cfg, adv, mask)[1]["adv/clip_frac"] == pytest.approx(1 / 2)


def test_through_the_api_a_lone_right_answer_is_held_at_the_bound():
    """GRPO's one right answer in a group of 4 gets (1 - 1/4) / std = 1.5 (sample std 0.5): clipped to 1.0."""
    rewards, mask = torch.tensor([1.0, 0.0, 0.0, 0.0]), torch.ones(4, 2)
    unclipped = advantages(ObjectiveConfig(), rewards, mask, group_size=4)
    assert unclipped.adv[0].item() == pytest.approx(0.75 / (0.5 + 1e-6)) and "adv/clip_frac" not in unclipped.metrics
    scored = advantages(ObjectiveConfig(adv_clip_high=1.0), rewards, mask, group_size=4)
    assert scored.adv.tolist() == pytest.approx([1.0] + [-0.25 / (0.5 + 1e-6)] * 3)
    assert scored.metrics["adv/clip_frac"] == pytest.approx(1 / 4)


def test_the_unclipped_advantages_are_nemos():
    """Without it the bounds below would be compared on different advantages."""
    ours = advantages(ObjectiveConfig(), REWARDS, MASK, group_size=G).adv
    assert torch.allclose(ours, torch.tensor(FIXTURE["unclipped"], dtype=ours.dtype), atol=1e-6, rtol=0)


@pytest.mark.parametrize("key", sorted(FIXTURE["nemo"]))
def test_equals_nemo_rl(key):
    low, high = (_bound(b) for b in key.split(","))
    ours = advantages(ObjectiveConfig(adv_clip_low=low, adv_clip_high=high), REWARDS, MASK, group_size=G).adv
    assert torch.allclose(ours, torch.tensor(FIXTURE["nemo"][key], dtype=ours.dtype), atol=1e-6, rtol=0)


@pytest.mark.parametrize("c", sorted(FIXTURE["roll"]))
def test_equals_roll_with_its_clip_fraction(c):
    """ROLL's advantage_clip c is [-c, c]; its fraction counts every token, here all response tokens."""
    cfg = ObjectiveConfig(adv_clip_low=-float(c), adv_clip_high=float(c))
    scored = advantages(cfg, REWARDS, MASK, group_size=G)
    ref = FIXTURE["roll"][c]
    assert torch.allclose(scored.adv, torch.tensor(ref["adv"], dtype=scored.adv.dtype), atol=1e-6, rtol=0)
    assert scored.metrics["adv/clip_frac"] == pytest.approx(ref["clip_frac"], abs=1e-6)


def test_the_fixture_reaches_past_every_bound():
    """Each peer setting moves some advantage, so the equality tests above can fail."""
    unclipped = FIXTURE["unclipped"]
    for key, clipped in FIXTURE["nemo"].items():
        assert any(not math.isclose(a, b) for a, b in zip(unclipped, clipped)), key
    assert all(r["clip_frac"] > 0 for r in FIXTURE["roll"].values())


@pytest.mark.parametrize(
    "overrides, named",
    [
        (["objective.adv_clip_low=0.5"], "objective.adv_clip_low"),
        (["objective.adv_clip_high=-1"], "objective.adv_clip_high"),
        (["objective.adv_clip_low=0", "objective.adv_clip_high=0"], "adv_clip_low"),
        (['objective.adv_clip_high="wide"'], "objective.adv_clip_high"),
    ],
)
def test_bad_bounds_are_refused_naming_the_key(overrides, named):
    with pytest.raises(ConfigError, match=named):
        load_config(SMOKE, overrides)


def test_bounds_load_from_yaml():
    obj = load_config(SMOKE, ["objective.adv_clip_low=-2", "objective.adv_clip_high=2.5"]).objective
    assert (obj.adv_clip_low, obj.adv_clip_high) == (-2.0, 2.5)
    assert load_config(SMOKE, []).objective.adv_clip_low is None
