"""The data side and the after-step as the modes declare them (objective/batching.py): hand-computed values of
each built-in hook through the trainer's calls, off when the knob is off, and a plugin hook that cannot take
its call refused when it registers."""

import pytest
import torch

from harness.objective import ObjectiveConfig, register_extension
from harness.objective.batching import group_keep, refill_keep, refills, resets_reference, retire_at, reward_shaping
from harness.objective.extensions import Hooks

G = 2
REWARDS = torch.tensor([1.0, 1.0, 0.0, 1.0, 0.5, 0.0])  # groups: all equal, mixed, unequal rewards
CORRECT = torch.tensor([True, True, False, True, False, False])  # groups: all right, mixed, all wrong


def test_overlong_shaping_is_dapos_ramp():
    """max_len 20, buffer 8: the ramp starts past 12; L = 10 -> 0, 16 -> -(16-12)/8 * 0.5 = -0.25, 25 -> -0.5."""
    obj = ObjectiveConfig(overlong_buffer=8, overlong_penalty=0.5)
    like = torch.zeros(3)
    got = reward_shaping(obj, torch.tensor([10, 16, 25]), 20, like)
    assert torch.equal(got, torch.tensor([0.0, -0.25, -0.5]))
    assert torch.equal(reward_shaping(ObjectiveConfig(), torch.tensor([10, 16, 25]), 20, like), like)


def test_dynamic_sampling_keeps_mixed_accuracy_groups_and_refills():
    """0 < #correct < G, on accuracy: the all-right and all-wrong groups go, whatever their rewards."""
    obj = ObjectiveConfig(dynamic_sampling=True)
    assert refills(obj) and not refills(ObjectiveConfig())
    assert refill_keep(obj, REWARDS, CORRECT, G).tolist() == [False, True, False]
    assert refill_keep(ObjectiveConfig(), REWARDS, CORRECT, G) is None


def test_zero_variance_filter_keeps_unequal_reward_groups():
    """On the rewards as the objective sees them: group 3 (0.5, 0.0) stays though both answers are wrong."""
    keep, metrics = group_keep(ObjectiveConfig(zero_variance_filter=True), REWARDS, CORRECT, G)
    assert keep.tolist() == [False, True, True] and metrics == {"groups/zero_var_dropped": 1.0}
    assert group_keep(ObjectiveConfig(), REWARDS, CORRECT, G) == (None, {})


def test_pool_threshold_and_reference_schedule():
    assert retire_at(ObjectiveConfig(no_positive_resampling=0.9)) == 0.9
    assert retire_at(ObjectiveConfig()) is None
    obj = ObjectiveConfig(kl_coef=0.04, ref_update_every=3)
    assert [resets_reference(obj, s) for s in range(7)] == [False, False, True, False, False, True, False]
    assert not any(resets_reference(ObjectiveConfig(kl_coef=0.04), s) for s in range(7))


@pytest.mark.parametrize(
    "hooks, needle",
    [
        (Hooks(reward_shaping=lambda cfg, lengths: lengths), "fn(cfg, lengths, max_new_tokens)"),
        (Hooks(group_filter=lambda cfg, rewards: rewards), "fn(cfg, rewards, correct, group_size)"),
        (Hooks(reset_reference=lambda cfg: True), "fn(cfg, step)"),
    ],
)
def test_a_data_side_hook_that_cannot_take_its_call_is_refused(hooks, needle):
    with pytest.raises(ValueError, match="cannot be called as") as e:
        register_extension("bad_data_hook", doc="x", switch="kl_coef", hooks=hooks)(lambda cfg: False)
    assert needle in str(e.value)
