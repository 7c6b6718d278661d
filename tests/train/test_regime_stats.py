"""harness/probes/regime.py on a hand-built episode: 2 groups of G = 4.

Group 0: right answers of 2 and 4 tokens, wrong of 6 and 8 (mixed; wrong - right = 7 - 3 = +4).
Group 1: all wrong, 5 tokens each (not mixed), one of them truncated."""

import pytest
import torch

from harness.probes.regime import regime_stats
from harness.rollout.base import RolloutBatch
from harness.tasks.base import Problem, RewardBreakdown
from harness.train.core.episode import Episode


def _episode() -> Episode:
    correct = [1, 1, 0, 0, 0, 0, 0, 0]
    lengths = [2, 4, 6, 8, 5, 5, 5, 5]
    T = 8
    mask = torch.tensor([[1.0] * n + [0.0] * (T - n) for n in lengths])
    problems = [Problem(uid=f"p{i}", prompt="q", answer="a", difficulty="easy") for i in range(2)]
    scores = [RewardBreakdown(total=float(c), correct=bool(c), format=1.0, parsed="a") for c in correct]
    rb = RolloutBatch(
        prompt_ids=[[1]] * 8,
        response_ids=torch.ones(8, T, dtype=torch.long),
        response_mask=mask,
        sampler_logp=torch.zeros(8, T),
        truncated=torch.tensor([0, 0, 0, 0, 1, 0, 0, 0]).bool(),
        texts=[""] * 8,
    )
    return Episode(problems, rb, scores, torch.tensor([float(c) for c in correct]), torch.zeros(8), 4)


def test_regime_stats_hand_values():
    s = regime_stats(_episode())
    assert s["accuracy"] == pytest.approx(2 / 8)
    assert s["mixed_groups"] == pytest.approx(1 / 2)
    assert s["truncated"] == pytest.approx(1 / 8)
    assert s["length_right"] == pytest.approx(3.0)
    assert s["length_wrong"] == pytest.approx((6 + 8 + 5 * 4) / 6)
    assert s["wrong_minus_right"] == pytest.approx(4.0)  # only the mixed group counts
    assert s["within_group_std"] == pytest.approx((5**0.5 + 0.0) / 2)  # population std of [2,4,6,8] = sqrt(5)
    assert s["p_extreme"] == pytest.approx(1 / 2)  # p = 0.5 (not extreme), p = 0 (extreme)
