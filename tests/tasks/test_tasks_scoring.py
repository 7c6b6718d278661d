"""Answer parsing and verification edge cases."""

from fractions import Fraction

import pytest

from harness.tasks import make_task
from harness.tasks.base import Problem
from harness.tasks.countdown import evaluate

ARITH = make_task("arithmetic")
P33 = Problem(
    uid="a",
    prompt="12+7*3=?\n",
    answer="33",
    difficulty="medium",
    meta={"operands": [12, 7, 3], "ops": ["+", "*"], "expression": "12+7*3"},
)
PNEG = Problem(
    uid="b",
    prompt="3-9+1=?\n",
    answer="-5",
    difficulty="medium",
    meta={"operands": [3, 9, 1], "ops": ["-", "+"], "expression": "3-9+1"},
)


@pytest.mark.parametrize(
    "completion, parsed, correct",
    [
        ("12+7*3=12+21=33\nAnswer: 33", "33", True),
        ("Answer: 33", "33", True),
        ("  answer :   33  ", "33", True),
        ("Answer:33\n", "33", True),
        ("Answer: 033", "33", True),
        ("Answer: +33", "33", True),
        ("Answer: 1\nAnswer: 33", "33", True),  # the last answer line wins
        ("Answer: 33\nAnswer: 1", "1", False),
        ("Answer: 33\nAnswer: 3x", None, False),  # a malformed last line is not skipped
        ("Answer: 33\nsome trailing text", "33", True),
        ("Answer: 33.", None, False),
        ("Answer: 3 3", None, False),
        ("Answer:", None, False),
        ("the Answer: 33", None, False),  # must start the line
        ("33", None, False),
        ("", None, False),
        ("@@@\n\n%%", None, False),
        ("Answer: \u0663\u0663", None, False),  # non-ASCII digits
    ],
)
def test_arithmetic_parser(completion, parsed, correct):
    reward = ARITH.score(P33, completion, truncated=False)
    assert reward.parsed == parsed and reward.correct is correct
    assert reward.format == (0.0 if parsed is None else 1.0)
    assert reward.total == float(correct)


@pytest.mark.parametrize(
    "completion, correct",
    [
        ("Answer: -5", True),
        ("Answer: - 5", True),
        ("Answer:-5", True),
        ("Answer: 5", False),
    ],
)
def test_arithmetic_negative_answers(completion, correct):
    assert ARITH.score(PNEG, completion, truncated=False).correct is correct


def test_truncated_is_never_correct_and_format_weight_adds():
    weighted = make_task("arithmetic", format_weight=0.25)
    assert weighted.score(P33, "Answer: 33", truncated=False).total == 1.25
    assert weighted.score(P33, "Answer: 34", truncated=False).total == 0.25
    assert weighted.score(P33, "garbage", truncated=False).total == 0.0
    cut = weighted.score(P33, "12+7*3=12+21=33\nAnswer: 33", truncated=True)
    assert (cut.correct, cut.format, cut.total, cut.parsed) == (False, 0.0, 0.0, "33")


CD = make_task("countdown")
P23 = Problem(
    uid="c",
    prompt="Make 23 from 3 5 4\n",
    answer="23",
    difficulty="medium",
    meta={"numbers": [3, 5, 4], "target": 23, "solution": "5*4+3"},
)
P24 = Problem(
    uid="d",
    prompt="Make 24 from 1 3 4 6\n",
    answer="24",
    difficulty="hard",
    meta={"numbers": [1, 3, 4, 6], "target": 24, "solution": "(1+3)*6*4"},
)


@pytest.mark.parametrize(
    "completion, parsed, correct",
    [
        ("3+5+4=12 no\n5*4+3=23 yes\nAnswer: 5*4+3", "5*4+3", True),
        ("Answer: 3+4*5", "3+4*5", True),  # any valid expression, any order
        ("Answer:  ( 5 * 4 ) + 3 ", "(5*4)+3", True),
        ("Answer: 5*4+3\nAnswer: 5*4", "5*4", False),  # last line wins
        ("Answer: 23", "23", False),  # the target is not a given number
        ("Answer: 5*4+3+3", "5*4+3+3", False),  # 3 used twice
        ("Answer: 5*5-2", "5*5-2", False),  # numbers not given
        ("Answer: 5*4+3=23", None, False),
        ("Answer: -3+5*4+6", None, False),  # no unary minus
        ("Answer: (5*4+3", None, False),
        ("Answer: 5*4)+3", None, False),
        ("Answer: 5 4+3", None, False),
        ("Answer: 5*/4+3", None, False),
        ("Answer: 5/(4-4)+3", None, False),  # division by zero
        ("Answer: 5*4+3x", None, False),
        ("no answer here", None, False),
    ],
)
def test_countdown_parser(completion, parsed, correct):
    reward = CD.score(P23, completion, truncated=False)
    assert reward.parsed == parsed and reward.correct is correct
    assert reward.format == (0.0 if parsed is None else 1.0)


def test_countdown_rules():
    assert CD.score(P24, "Answer: 6/(1-3/4)", False).correct  # rational intermediates are fine
    assert CD.score(P24, "Answer: 4*6", False).correct  # each number AT MOST once
    assert not CD.score(P24, "Answer: (1+3)*6*4", True).correct  # truncated
    assert not CD.score(P24, "Answer: 4*6*1*1", False).correct  # 1 given once


def test_evaluate():
    assert evaluate("6/(1-3/4)") == (Fraction(24), [6, 1, 3, 4])
    assert evaluate("((2))") == (Fraction(2), [2])
    assert evaluate("7/2") == (Fraction(7, 2), [7, 2])
    for bad in ["", "()", "2+", "2++3", "(2)(3)", "2**3", "1" * 65, "(" * 40 + "1" + ")" * 40]:
        assert evaluate(bad) is None, bad
