"""Held-out accuracy, ECE and the reliability table (harness/rm/calibration.py) on hand-computed pairs."""

import math

import pytest
import torch

from harness.rm.calibration import format_table, pair_metrics


def test_ece_and_reliability_hand_computed():
    # r_c - r_r = ln 3 (p 0.75, right), -ln 3 (confidence 0.75, wrong), ln 19 (p 0.95, right), 0 (a tie: 0.5, wrong)
    diff = torch.tensor([math.log(3), -math.log(3), math.log(19), 0.0])
    m = pair_metrics(diff, torch.zeros(4), None, bins=5)  # bins of width 0.1 over [0.5, 1]
    assert m["pairs"] == 4 and m["accuracy"] == 0.5
    table = {round(r["lo"], 3): r for r in m["reliability"]}
    assert sorted(table) == [0.5, 0.7, 0.9]
    assert table[0.5]["pairs"] == 1 and table[0.5]["accuracy"] == 0.0
    assert table[0.7]["pairs"] == 2 and table[0.7]["confidence"] == pytest.approx(0.75)
    assert table[0.7]["accuracy"] == 0.5
    assert table[0.9]["confidence"] == pytest.approx(0.95)
    # ECE = 1/4 |0 - 0.5| + 2/4 |0.5 - 0.75| + 1/4 |1 - 0.95|
    assert m["ece"] == pytest.approx(0.125 + 0.125 + 0.0125)
    assert m["loss"] == pytest.approx(-torch.nn.functional.logsigmoid(diff).mean().item())
    assert "[0.700, 0.800)" in format_table(m["reliability"])


def test_a_perfectly_confident_right_model_is_calibrated():
    m = pair_metrics(torch.full((5,), 50.0), torch.zeros(5), None, bins=10)
    assert m["accuracy"] == 1.0 and m["ece"] == pytest.approx(0.0, abs=1e-12)
    assert m["reliability"][0]["lo"] == pytest.approx(0.95)  # confidence 1 falls in the last bin


def test_no_pairs():
    assert pair_metrics(torch.zeros(0), torch.zeros(0), None, 10) == {"pairs": 0}
