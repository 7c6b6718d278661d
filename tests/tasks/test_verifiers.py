"""Built-in verifiers on hand-written completions: what each reads as the final answer and
whether it equals the reference (harness/tasks/rewards/verifiers.py)."""

from __future__ import annotations

import pytest

from harness.tasks.rewards.verifiers import VERIFIERS, check_options, last_boxed, numbers


def v(name, completion, reference, **options):
    return VERIFIERS[name](completion, reference, options)


@pytest.mark.parametrize(
    "completion, reference, correct, parsed",
    [
        ("She has 1,000 beads.\n#### 1,000", "1000", True, "1000"),  # thousands separator
        ("#### 1000", "Natalia sold 48/2 = <<48/2=24>>24 clips.\n#### 1,000", True, "1000"),  # GSM8K reference
        ("#### 72.0", "72", True, "72"),  # 72.0 == 72
        ("#### $18.", "18", True, "18"),  # currency sign, trailing period
        ("#### 5\nwait, no\n#### 7", "7", True, "7"),  # several answers: the last counts
        ("#### 5\nwait, no\n#### 7", "5", False, "7"),
        ("The answer is 72.", "72", False, None),  # no #### line: no answer
        ("####", "3", False, None),
        ("#### -4", "-4", True, "-4"),
    ],
)
def test_gsm8k(completion, reference, correct, parsed):
    out = v("gsm8k", completion, reference)
    assert (out.correct, out.parsed) == (correct, parsed)


@pytest.mark.parametrize(
    "completion, reference, correct, parsed",
    [
        ("The total is 1,000 dollars.", "1000", True, "1000"),
        ("1000", "1,000", True, "1000"),
        ("So 12 + 30 = 42, then 42 - 2 = 40.", "40", True, "40"),  # the last number counts
        ("So 12 + 30 = 42, then 42 - 2 = 40.", "42", False, "40"),
        ("It is 0.5 of the cake", "1/2", True, "0.5"),  # fractions and decimals are exact
        ("3/4", "0.75", True, "0.75"),
        ("x3 and v1.2", "3", False, None),  # a digit glued to a letter is no number
        ("temperature fell to -7", "-7", True, "-7"),
        ("5-3=2", "2", True, "2"),  # "-3" in "5-3" is not negative
        ("no numbers here", "4", False, None),
        ("#### 18", "Janet makes 9 * 2 = <<9*2=18>>$18.\n#### 18", True, "18"),  # a GSM8K reference: its #### value
    ],
)
def test_number(completion, reference, correct, parsed):
    out = v("number", completion, reference)
    assert (out.correct, out.parsed) == (correct, parsed)


@pytest.mark.parametrize(
    "completion, reference, correct",
    [
        ("So the answer is $\\boxed{\\frac{1}{2}}$.", "0.5", True),  # \frac{1}{2} vs 0.5
        ("the answer is 0.5", "\\frac{1}{2}", True),
        ("$\\boxed{\\boxed{2}}$", "2", True),  # nested \boxed{}
        ("$\\boxed{\\frac{\\sqrt{2}}{2}}$", "\\frac{1}{\\sqrt{2}}", True),  # equivalent forms
        ("First \\boxed{2}, no: \\boxed{3}", "3", True),  # several boxes: the last counts
        ("First \\boxed{2}, no: \\boxed{3}", "2", False),
        ("The answer is 1,000", "1000", True),
        ("$\\boxed{50\\%}$", "0.5", True),  # percentages
        ("So $x = 3$", "3", True),
        ("I have no idea", "7", False),
        ("\\boxed{7", "7", False),  # an unclosed box is no answer
        ("The sum is \\boxed{12}.", "So the total is $6+6=\\boxed{12}$.", True),  # a MATH solution as reference
    ],
)
def test_math(completion, reference, correct):
    assert v("math", completion, reference).correct is correct


def test_math_reads_nothing_from_text_without_math():
    assert v("math", "I have no idea", "7").parsed is None


@pytest.mark.parametrize(
    "completion, reference, correct, parsed",
    [
        ("Answer: Paris", "paris", True, "Paris"),
        ("The capital.\nAnswer: Paris.", "Paris", True, "Paris."),
        ("\\boxed{Paris}", "Paris", True, "Paris"),
        ("I think it is Lyon\nAnswer: Paris", "Paris", True, "Paris"),  # the answer line wins over the last line
        ("Paris\nLyon", "Paris", False, "Lyon"),  # no answer line: the last line
        ("Answer: Paris", "The answer is $\\boxed{Paris}$", True, "Paris"),  # a boxed reference: its box
    ],
)
def test_exact(completion, reference, correct, parsed):
    out = v("exact", completion, reference)
    assert (out.correct, out.parsed) == (correct, parsed)


def test_exact_case_sensitive_option():
    assert v("exact", "Answer: paris", "Paris").correct
    assert not v("exact", "Answer: paris", "Paris", case_sensitive=True).correct


@pytest.mark.parametrize(
    "completion, reference, correct, parsed",
    [
        ("result=42; result=43", "43", True, "43"),  # the last match counts
        ("result=42", "42.0", True, "42"),  # numbers compare as numbers
        ("result=forty", "40", False, None),
        ("nothing", "1", False, None),
    ],
)
def test_regex(completion, reference, correct, parsed):
    out = v("regex", completion, reference, pattern=r"result=(\d+)")
    assert (out.correct, out.parsed) == (correct, parsed)


def test_regex_named_group_and_whole_match():
    assert v("regex", "<answer>B</answer>", "B", pattern=r"<answer>(?P<a>.*?)</answer>", group="a").correct
    assert v("regex", "CODE-17", "CODE-17", pattern=r"CODE-\d+").correct


@pytest.mark.parametrize(
    "completion, reference, correct, parsed",
    [
        ("The answer is (B).", "B", True, "B"),
        ("Answer: C", "(C)", True, "C"),
        ("$\\boxed{D}$", "D", True, "D"),
        ("\\boxed{\\text{(A)}}", "A", True, "A"),
        ("(A) looks right but (C) is correct", "C", True, "C"),  # the last stated choice
        ("A nice day. B-movies are fun.", "A", False, None),  # words are not choices
        ("B", "B", True, "B"),  # a line that is only the letter
        ("The answer is (E)", "E", False, None),  # not among options.choices
    ],
)
def test_choice(completion, reference, correct, parsed):
    out = v("choice", completion, reference, choices="ABCD")
    assert (out.correct, out.parsed) == (correct, parsed)


def test_numbers_and_boxes():
    assert [str(x) for x in numbers("1,000 and 2,5 and -3.5 and 7/2 and 1/0")] == ["1000", "2", "5", "-7/2", "7/2"]
    assert last_boxed("a \\boxed{x^{2}} b \\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert last_boxed("\\boxed{\\boxed{2}}") == "2"
    assert last_boxed("\\boxed{3") is None


@pytest.mark.parametrize(
    "verifier, options, needle",
    [
        ("regex", {}, "needs options.pattern"),
        ("regex", {"pattern": "("}, "not a regular expression"),
        ("regex", {"pattern": "(a)", "group": 2}, "options.group=2"),
        ("choice", {"choices": "AAB"}, "options.choices"),
        ("gsm8k", {"pattern": "x"}, "options.pattern is not an option of verifier 'gsm8k'"),
        ("exact", {"case_sensitive": "yes"}, "options.case_sensitive='yes' must be bool"),
    ],
)
def test_check_options(verifier, options, needle):
    with pytest.raises(ValueError) as e:
        check_options(verifier, options)
    assert needle in str(e.value)
