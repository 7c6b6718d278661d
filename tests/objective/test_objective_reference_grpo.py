"""The one-file GRPO step (harness/objective/reference_grpo.py) and the composable objective are the
same loss: equal losses and gradients (1e-6) for the grpo, dr_grpo and dapo presets, off-policy (the
clip binds), with uneven lengths, an all-equal group, and a KL term where the preset has one."""

from __future__ import annotations

import pytest
import torch

from harness.objective import ObjectiveConfig, group_advantages, policy_loss
from harness.objective.reference_grpo import group_advantage, grpo_step

G = 4
LENGTHS = [5, 3, 1, 4, 2, 5, 5, 2]
REWARDS = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0]  # the second group is all correct: advantage 0
# the reference step's arguments for each preset: the knobs that differ from GRPO's
CASES = {
    "grpo": ({}, {}),
    "dr_grpo": (
        {"norm_constant": 5.0},
        {"scale_by_std": False, "length_norm": "constant", "norm_constant": 5.0, "beta": 0.0},
    ),
    "dapo": ({}, {"eps_high": 0.28, "length_norm": "token", "beta": 0.0}),
}


def _batch(make_policy):
    pol = make_policy(B=len(LENGTHS), T=5, seed=11)
    mask = torch.tensor([[1.0] * n + [0.0] * (5 - n) for n in LENGTHS])
    with torch.no_grad():
        old = pol.logp() + pol.noise  # an earlier policy: ratios off 1, some clipped
        ref = pol.logp() - 2 * pol.noise
    return pol, mask, old, ref, torch.tensor(REWARDS)


def _composable(pol, mask, old, ref, rewards, cfg):
    adv = group_advantages(cfg, rewards, G)
    loss, metrics = policy_loss(cfg, pol.logp(), old, adv, mask, ref if cfg.kl_coef > 0 else None)
    assert metrics["clip/frac"] > 0  # the clip binds somewhere: the comparison covers it
    return loss.detach(), pol.grad(loss)


def _reference(pol, mask, old, ref, rewards, **knobs):
    pol.W.grad = None
    loss = grpo_step(pol.logp(), old, ref, mask, rewards, G, **knobs)
    return loss, pol.W.grad.clone()


@pytest.mark.parametrize("preset", list(CASES))
def test_the_reference_step_is_the_composable_objective(preset, make_policy):
    knobs, reference_knobs = CASES[preset]
    pol, mask, old, ref, rewards = _batch(make_policy)
    want_loss, want_grad = _composable(pol, mask, old, ref, rewards, ObjectiveConfig.preset(preset, **knobs))
    loss, grad = _reference(pol, mask, old, ref, rewards, **reference_knobs)
    torch.testing.assert_close(loss, want_loss, rtol=0, atol=1e-6)
    torch.testing.assert_close(grad, want_grad, rtol=0, atol=1e-6)
    assert want_grad.abs().sum() > 1e-3


@pytest.mark.parametrize(
    "wrong", [{"length_norm": "token"}, {"scale_by_std": False}, {"eps_high": 0.28}, {"beta": 0.0}]
)
def test_a_flipped_switch_is_seen(wrong, make_policy):
    """The comparison can fail: GRPO's objective against the reference with one of its switches flipped."""
    pol, mask, old, ref, rewards = _batch(make_policy)
    want_loss, want_grad = _composable(pol, mask, old, ref, rewards, ObjectiveConfig.preset("grpo"))
    loss, grad = _reference(pol, mask, old, ref, rewards, **wrong)
    assert (loss - want_loss).abs() > 1e-6 or (grad - want_grad).abs().max() > 1e-6


def test_group_advantage_by_hand():
    # [1, 0, 0, 0]: mean 1/4, sample std 1/2: (r - 1/4) / (1/2 + 1e-6) = [1.5, -0.5, -0.5, -0.5] (x 1/(1+2e-6))
    got = group_advantage(torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0]), 4)
    torch.testing.assert_close(got[:4], torch.tensor([1.5, -0.5, -0.5, -0.5]) / (1 + 2e-6), rtol=0, atol=1e-12)
    assert torch.equal(got[4:], torch.zeros(4))
    assert group_advantage(torch.tensor([1.0, 0.0, 0.0, 0.0]), 4, scale_by_std=False).tolist() == [
        0.75,
        -0.25,
        -0.25,
        -0.25,
    ]
