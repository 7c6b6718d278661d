"""token_weights (the aggregation's weight per token) and the end-token shares built on it,
with hand-computed values: rows of 2 and 4 response tokens (B = 2, T = 4)."""

import pytest
import torch

from harness.objective import ObjectiveConfig
from harness.objective.aggregation import aggregate, token_weights
from harness.train.diagnostics.metrics import eos_weight_shares

MASK = torch.tensor([[1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])


@pytest.mark.parametrize(
    "agg,row0,row1",
    [
        ("seq_mean_token_mean", 1 / (2 * 2), 1 / (2 * 4)),  # 1 / (B |o_i|)
        ("token_mean", 1 / 6, 1 / 6),  # 1 / sum M
        ("seq_mean_token_sum_norm", 1 / (2 * 8), 1 / (2 * 8)),  # 1 / (B C), C = 8
        ("seq_mean_token_sum", 1 / 2, 1 / 2),  # 1 / B
    ],
)
def test_token_weights_hand_values(agg, row0, row1):
    w = token_weights(agg, MASK, norm_constant=8.0)
    expected = torch.tensor([[row0, row0, 0, 0], [row1] * 4], dtype=torch.float64)
    torch.testing.assert_close(w, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("agg", ["seq_mean_token_mean", "token_mean", "seq_mean_token_sum_norm", "seq_mean_token_sum"])
def test_token_weights_reproduce_aggregate(agg):
    loss = torch.randn(2, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    w = token_weights(agg, MASK, norm_constant=8.0, num_seqs=3, num_tokens=9)
    agg_loss = aggregate(agg, loss, MASK, norm_constant=8.0, num_seqs=3, num_tokens=9)
    torch.testing.assert_close((w * loss).sum(), agg_loss, rtol=0, atol=1e-12)


def test_eos_shares_hand_values():
    adv = torch.tensor([1.0, -1.0])  # row 0 right (2 tokens), row 1 wrong (4 tokens)
    correct = torch.tensor([True, False])
    ended = torch.tensor([False, False])  # truncated flags: both ended with the end token
    grpo = ObjectiveConfig.preset("grpo")  # seq_mean_token_mean: total = 0.25*2 + 0.125*4 = 1
    s = eos_weight_shares(grpo, adv, MASK, ended, correct)
    assert s["agg/eos_share_correct"] == pytest.approx(0.25)
    assert s["agg/eos_share_incorrect"] == pytest.approx(0.125)  # the long wrong answer's end weighs half
    dapo = ObjectiveConfig.preset("grpo", agg="token_mean")  # every token 1/6, total 1
    s = eos_weight_shares(dapo, adv, MASK, ended, correct)
    assert s["agg/eos_share_correct"] == pytest.approx(1 / 6)
    assert s["agg/eos_share_incorrect"] == pytest.approx(1 / 6)
    s = eos_weight_shares(grpo, adv, MASK, torch.tensor([False, True]), correct)  # a truncated row has no end
    assert s["agg/eos_share_incorrect"] == 0.0
