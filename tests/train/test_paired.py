"""Paired bootstrap of a pass@1 rise (harness/train/eval/paired.py), on cases computed by hand."""

import pytest
import torch

from harness.train.eval.paired import paired_bootstrap


def test_identical_policies_give_a_zero_interval():
    x = torch.tensor([0.0, 0.25, 1.0, 0.5])
    out = paired_bootstrap(x, x)
    assert out == {"delta": 0.0, "lo": 0.0, "hi": 0.0, "p_le_0": 1.0}


def test_a_constant_rise_has_no_spread():
    x = torch.tensor([0.0, 0.25, 0.5, 0.125])
    out = paired_bootstrap(x, x + 0.125)
    assert (
        out["delta"] == pytest.approx(0.125) and out["lo"] == pytest.approx(0.125) and out["hi"] == pytest.approx(0.125)
    )
    assert out["p_le_0"] == 0.0


def test_two_prompts_by_hand():
    """d = [1, 0]: a resample of 2 prompts has mean 0 (p 1/4), 1/2 (p 1/2) or 1 (p 1/4), so the
    95% interval is [0, 1] and P(mean <= 0) = 1/4."""
    out = paired_bootstrap(torch.tensor([0.0, 0.5]), torch.tensor([1.0, 0.5]), n_boot=20000)
    assert out["delta"] == pytest.approx(0.5)
    assert out["lo"] == 0.0 and out["hi"] == 1.0
    assert out["p_le_0"] == pytest.approx(0.25, abs=0.01)


def test_a_rise_on_few_prompts_is_not_clear_but_on_many_it_is():
    """The same per-prompt gain pattern (+0.1 on 30% of prompts): P = 10 prompts cannot exclude 0
    (3 of 10 prompts carry it: a resample misses all 3 with probability 0.7^10 = 2.8%), P = 1000 can."""
    few = paired_bootstrap(torch.zeros(10), torch.tensor([0.1] * 3 + [0.0] * 7), n_boot=20000)
    assert few["lo"] == 0.0 and few["p_le_0"] == pytest.approx(0.7**10, abs=0.005)
    many = paired_bootstrap(torch.zeros(1000), torch.tensor([0.1] * 300 + [0.0] * 700))
    assert many["lo"] > 0.02 and many["p_le_0"] == 0.0


def test_shape_errors_are_named():
    with pytest.raises(ValueError, match=r"same P > 0 prompts, got \(3,\) and \(2,\)"):
        paired_bootstrap(torch.zeros(3), torch.zeros(2))
    with pytest.raises(ValueError, match="same P > 0"):
        paired_bootstrap(torch.zeros(0), torch.zeros(0))
