"""The verdict's statistics (harness/experiment/verdict/paired.py, plan.py) against values computed by hand.

With df = 2 the t distribution has closed forms: P(T >= t) = 1/2 - t / (2 sqrt(t^2 + 2)), and the quantile
t_q = (2q - 1) sqrt(2 / (1 - (2q - 1)^2)), so t_{0.95} = 0.9 sqrt(2 / 0.19) = 2.919986."""

import math

import numpy as np
import pytest

from harness.experiment.verdict import paired
from harness.experiment.verdict.plan import power, seeds_needed

D = [1.0, 2.0, 3.0]  # m = 2, s = 1, se = 1 / sqrt(3) = 0.577350, df = 2


def test_the_one_sided_paired_t_test():
    # t = 2 / 0.577350 = 3.464102; p = 1/2 - 3.464102 / (2 sqrt(14)) = 0.5 - 0.462910 = 0.037090
    r = paired.test(D, "greater", sesoi=1.0, alpha=0.05)
    assert r["estimate"] == pytest.approx(2.0)
    assert r["se"] == pytest.approx(0.577350, abs=1e-6)
    assert r["t"] == pytest.approx(3.464102, abs=1e-6)
    assert r["p"] == pytest.approx(0.037090, abs=1e-6)
    # the 90% interval: 2 -+ 2.919986 * 0.577350 = 2 -+ 1.685854 = [0.314146, 3.685854]
    assert r["interval"] == pytest.approx([0.314146, 3.685854], abs=1e-6)
    assert paired.test(D, "less", 1.0, 0.05)["p"] == pytest.approx(1 - 0.037090, abs=1e-6)


def test_the_two_sided_test_and_a_reference_value():
    # two-sided: 2 * 0.037090 = 0.074180
    assert paired.test(D, "two-sided", 1.0, 0.05)["p"] == pytest.approx(0.074180, abs=1e-6)
    # value 1: t = (2 - 1) / 0.577350 = 1.732051; p = 0.5 - 1.732051 / (2 sqrt(5)) = 0.5 - 0.387298 = 0.112702
    assert paired.test(D, "greater", 1.0, 0.05, value=1.0)["p"] == pytest.approx(0.112702, abs=1e-6)


def test_tost_takes_the_larger_of_its_two_one_sided_p():
    # sesoi 3: t_low = (2 + 3) / se = 8.660254, p_low = 0.5 - 8.660254 / (2 sqrt(77)) = 0.006536;
    # t_high = (2 - 3) / se = -1.732051, p_high = 0.5 - 1.732051 / (2 sqrt(5)) = 0.112702
    r = paired.test(D, "equivalent", sesoi=3.0, alpha=0.05)
    assert r["p_low"] == pytest.approx(0.006536, abs=1e-6)
    assert r["p_high"] == pytest.approx(0.112702, abs=1e-6)
    assert r["p"] == r["p_high"]
    assert r["level"] == pytest.approx(0.90)


def test_holm_steps_down_and_keeps_the_order():
    # sorted 0.01 (x3 = 0.03), 0.03 (x2 = 0.06), 0.04 (x1 = 0.04, raised to the running 0.06)
    assert paired.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert paired.holm([0.2, 0.9]) == pytest.approx([0.4, 0.9])
    assert paired.holm([0.01, None]) == pytest.approx([0.02, 1.0])  # a hypothesis without a p keeps the family's size
    assert paired.holm([0.6, 0.7]) == pytest.approx([1.0, 1.0])  # capped at 1


def test_differences_that_do_not_vary():
    r = paired.test([0.1, 0.1], "greater", 0.05, 0.05)
    assert r["p"] == 0.0 and r["interval"] == pytest.approx([0.1, 0.1])
    assert paired.test([0.0, 0.0], "greater", 0.05, 0.05)["p"] == 1.0  # 0 / 0: no evidence


@pytest.mark.parametrize(
    "direction, interval, out",
    [
        ("greater", [-0.1, 0.04], True),  # the upper bound below sesoi 0.05
        ("greater", [-0.1, 0.06], False),
        ("less", [-0.04, 0.1], True),
        ("less", [-0.06, 0.1], False),
        ("two-sided", [-0.04, 0.04], True),
        ("two-sided", [-0.04, 0.06], False),
        ("equivalent", [0.06, 0.2], True),  # wholly outside [-0.05, 0.05]
        ("equivalent", [0.04, 0.2], False),
    ],
)
def test_what_rules_a_claimed_effect_out(direction, interval, out):
    assert paired.ruled_out(direction, interval, 0.05) is out


def test_the_power_of_the_one_sided_test_matches_a_simulation():
    """sd 1, sesoi 1, alpha 0.05: 8 seeds reach 80% (power 0.815; 7 seeds: 0.754), and 40000 simulated
    experiments of 8 seeds (seed 0) reject as often."""
    assert seeds_needed(1.0, 1.0, 0.05, "greater") == 8
    rng = np.random.default_rng(0)
    x = rng.normal(1.0, 1.0, (40000, 8))
    t = x.mean(1) / (x.std(1, ddof=1) / math.sqrt(8))
    assert (t > 1.894579).mean() == pytest.approx(power(8, 1.0, 1.0, 0.05, "greater"), abs=0.01)  # t_{0.95, 7}


def test_the_power_of_tost_matches_a_simulation():
    """True difference 0, sd 1, sesoi 1, alpha 0.05: TOST over n seeds rejects both one-sided nulls."""
    rng = np.random.default_rng(0)
    for n, q in ((10, 1.833113), (12, 1.795885)):  # t_{0.95, n-1}
        x = rng.normal(0.0, 1.0, (40000, n))
        m, se = x.mean(1), x.std(1, ddof=1) / math.sqrt(n)
        both = ((m + 1) / se > q) & ((m - 1) / se < -q)
        assert both.mean() == pytest.approx(power(n, 1.0, 1.0, 0.05, "equivalent"), abs=0.01)
    assert seeds_needed(1.0, 1.0, 0.05, "equivalent") == 11
    assert seeds_needed(1.0, 1.0, 0.05 / 3, "greater") > 8  # Holm's worst case needs more seeds
