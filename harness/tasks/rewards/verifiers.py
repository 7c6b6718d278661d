"""Built-in verifiers: read the final answer of a completion and compare it with a reference.

    verdict = VERIFIERS["gsm8k"](completion, reference, {})   # -> Verdict(correct, parsed)

Every verifier takes (completion, reference, options) and returns a `Verdict`: whether the
completion's final answer equals the reference, and the answer it read (None: none found).
The reference is the row's answer field as the dataset stores it; each verifier reads it the
same way it reads a completion where that makes sense (a GSM8K answer "... #### 72" is 72 to
`gsm8k` and to `number`; a MATH solution's last `\\boxed{}` is its answer to `math` and
`exact`), so a file's reference answers, scored as completions, come out correct (the check
before training, harness/tasks/dataset/checks.py).

When a completion states several answers, the LAST one counts (so hedging is never rewarded).
A truncated completion is never correct: the scorer (scorer.py) decides that, not these.

    math    math-verify (the parser TRL's and verl's math rewards use): LaTeX, \\boxed{} (nested
            braces), fractions, percentages, equivalent forms (1/2 = 0.5 = \\frac{1}{2}). The
            last \\boxed{} is taken alone (math-verify would read all of them as a set).
    gsm8k   the number after the last "####" (GSM8K's answer line); "1,000" = "1000" = "1000.0".
    number  the last number anywhere (thousands separators, sign, decimals, a/b).
    exact   the final answer (last \\boxed{}, else the text after the last "answer:" line, else
            the last non-empty line) equals the reference's, as strings after trimming;
            options: case_sensitive (false).
    regex   the last match of options.pattern (its group `group`, default 1 if it has groups
            else the whole match) equals the reference (as numbers when both are numbers,
            else as trimmed strings); options: pattern (required), group, ignore_case (false).
    choice  a multiple-choice letter: \\boxed{B}, "answer: (B)", "(B)", or a line that is only
            the letter, the last one counting; options: choices (default "ABCDE").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any


@dataclass(frozen=True)
class Verdict:
    correct: bool
    parsed: str | None  # the answer read from the completion; None when it has none


# ----------------------------------------------------------------------------- shared readers

# a number: sign, digits with optional thousands separators ("1,000"), decimals, optional /denominator;
# not glued to a letter or a dot before it (x3, v1.2), not a prefix of a longer digit run
_NUMBER = re.compile(r"(?<![\w.])([-\u2212]?)((?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)(?:/(\d+))?(?![\d])")
_GSM8K_MARK = "####"
_ANSWER_LINE = re.compile(
    r"^[ \t*_]*(?:final[ \t]+)?answer[ \t*_]*(?:is)?[ \t]*[:=][ \t]*(.*?)[ \t]*$", re.IGNORECASE | re.MULTILINE
)


def numbers(text: str) -> list[Fraction]:
    """Every number in `text`, in order, as exact fractions ("1,000" -> 1000, "-2.5" -> -5/2, "3/4")."""
    out = []
    for sign, body, denom in _NUMBER.findall(text):
        value = Fraction(body.replace(",", ""))
        if denom:
            if int(denom) == 0:
                continue
            value /= int(denom)
        out.append(-value if sign else value)
    return out


def is_number(text: str) -> bool:
    """Whether `text` is one number and nothing else ("72", " -1,000.5 ", "3/4"; not "\\boxed{72}")."""
    return _NUMBER.fullmatch(text.strip()) is not None


def last_number(text: str) -> Fraction | None:
    found = numbers(text)
    return found[-1] if found else None


def show(value: Fraction) -> str:
    """A fraction as the number a person writes: 72, -2.5, 1/3."""
    if value.denominator == 1:
        return str(value.numerator)
    as_float = float(value)
    if Fraction(repr(as_float)) == value:
        return repr(as_float)
    return f"{value.numerator}/{value.denominator}"


def last_boxed(text: str) -> str | None:
    """The innermost content of the last top-level \\boxed{} ("\\boxed{\\boxed{2}}" -> "2"), None if none."""
    top = _top_level_boxes(text)
    if not top:
        return None
    inner = top[-1]
    while True:
        nested = _top_level_boxes(inner)
        if len(nested) == 1 and inner.strip().startswith(("\\boxed", "\\fbox")):
            inner = nested[0]
        else:
            return inner.strip()


def _top_level_boxes(text: str) -> list[str]:
    """Contents of the \\boxed{} that are not inside another one."""
    out, pos = [], 0
    pattern = re.compile(r"\\(?:boxed|fbox)\s*\{")
    while True:
        m = pattern.search(text, pos)
        if m is None:
            return out
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth:  # unclosed: look for a later, closed one
            pos = m.end()
            continue
        out.append(text[m.end() : i - 1])
        pos = i


def final_answer_text(text: str) -> str | None:
    """The last \\boxed{} content, else the text after the last "answer:" line, else the last
    non-empty line (None for an empty text)."""
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed
    lines = _ANSWER_LINE.findall(text)
    if lines:
        return lines[-1].strip()
    rest = [line.strip() for line in text.splitlines() if line.strip()]
    return rest[-1] if rest else None


def _norm(text: str, case_sensitive: bool) -> str:
    text = " ".join(text.split()).strip().rstrip(".").strip()
    text = re.sub(r"^\$+|\$+$", "", text).strip()
    return text if case_sensitive else text.casefold()


# ----------------------------------------------------------------------------- the verifiers


def gsm8k_answer(text: str) -> Fraction | None:
    """The number after the last "####" (None if there is none or no number follows it)."""
    at = text.rfind(_GSM8K_MARK)
    if at < 0:
        return None
    found = numbers(text[at + len(_GSM8K_MARK) :].split("\n", 1)[0])
    return found[0] if found else None


def reference_number(reference: str) -> Fraction | None:
    """A numeric reference: its "####" number (a GSM8K solution), else its last number."""
    ref = gsm8k_answer(reference)
    return last_number(reference) if ref is None else ref


def _number_verdict(got: Fraction | None, reference: str) -> Verdict:
    return Verdict(got is not None and got == reference_number(reference), None if got is None else show(got))


def verify_gsm8k(completion: str, reference: str, options: dict) -> Verdict:
    return _number_verdict(gsm8k_answer(completion), reference)


def verify_number(completion: str, reference: str, options: dict) -> Verdict:
    return _number_verdict(last_number(completion), reference)


def verify_exact(completion: str, reference: str, options: dict) -> Verdict:
    case = bool(options.get("case_sensitive", False))
    got = final_answer_text(completion)
    ref = last_boxed(reference)
    ref = reference if ref is None else ref
    return Verdict(got is not None and _norm(got, case) == _norm(ref, case), got)


def verify_regex(completion: str, reference: str, options: dict) -> Verdict:
    pattern = compile_pattern(options)
    matches = list(pattern.finditer(completion))
    if not matches:
        return Verdict(False, None)
    group = options.get("group", 1 if pattern.groups else 0)
    got = (matches[-1].group(group) or "").strip()
    ref = reference.strip()
    if _NUMBER.fullmatch(got) and _NUMBER.fullmatch(ref):
        return Verdict(last_number(got) == last_number(ref), got)
    return Verdict(_norm(got, True) == _norm(ref, True), got)


def compile_pattern(options: dict) -> re.Pattern:
    flags = re.IGNORECASE if options.get("ignore_case") else 0
    return re.compile(options["pattern"], flags | re.MULTILINE)


def verify_choice(completion: str, reference: str, options: dict) -> Verdict:
    letters = str(options.get("choices", "ABCDE"))
    ref = choice_letter(reference, letters) or reference.strip()
    got = choice_letter(completion, letters)
    return Verdict(got is not None and got == ref, got)


def choice_letter(text: str, letters: str = "ABCDE") -> str | None:
    """The last stated choice letter of `text` (see the module docstring), None if none."""
    cls = "[" + re.escape(letters) + "]"
    boxed = last_boxed(text)
    if boxed is not None:
        m = re.fullmatch(rf"\s*(?:\\text\s*\{{)?\s*\(?\s*({cls})\s*\)?\s*\}}?\s*\.?\s*", boxed)
        if m:
            return m.group(1)
    patterns = (
        rf"answer(?:\s+is)?\s*[:=]?\s*\(?\s*({cls})\b\)?",  # "Answer: (B)", "the answer is B"
        rf"\(({cls})\)",  # "(B)"
        rf"^\s*({cls})\s*[).:]?\s*$",
    )  # a line that is only "B" / "B." / "B)"
    for p in patterns:
        found = re.findall(p, text, flags=re.MULTILINE | (re.IGNORECASE if p.startswith("answer") else 0))
        found = [f for f in found if f in letters]
        if found:
            return found[-1]
    return None


def verify_math(completion: str, reference: str, options: dict) -> Verdict:
    """math-verify on the last \\boxed{} alone when the completion has one, else on the whole text
    (math-verify takes the rightmost expression it can parse). Timeouts are the scorer's: math-verify's
    own signal-based ones are off, so it runs in any thread."""
    parse, verify = _math_verify()
    gold = parse(_math_text(reference, wrap=True), parsing_timeout=None)
    if not gold:
        return Verdict(False, None)
    box = last_boxed(completion)
    pred = parse(f"$\\boxed{{{box}}}$" if box is not None else completion, parsing_timeout=None)
    if not pred and box is None and "\\" in completion:  # bare LaTeX without $ delimiters: its last line
        lines = [line for line in completion.splitlines() if line.strip()]
        pred = parse(f"${lines[-1]}$", parsing_timeout=None) if lines else []
    if not pred:
        return Verdict(False, None)
    parsed = next((p for p in pred if isinstance(p, str)), str(pred[0]))  # [sympy value, extracted text]
    return Verdict(bool(verify(gold, pred, timeout_seconds=None)), parsed)


def _math_verify():
    """math-verify's parse and verify, its "timeout is disabled" warning silenced (ours is the scorer's)."""
    import math_verify.grader
    import math_verify.parser

    math_verify.parser.TIMEOUT_WARNING_SHOWN = math_verify.grader.TIMEOUT_WARNING_SHOWN = True
    return math_verify.parse, math_verify.verify


def _math_text(text: str, wrap: bool) -> str:
    """A reference for math-verify: its last \\boxed{} alone if it has one; a bare answer ("1/2",
    "\\frac{1}{2}") inside $...$ so it is read as LaTeX; anything else (a worked solution) as is."""
    box = last_boxed(text)
    if box is not None:
        return f"$\\boxed{{{box}}}$"
    if wrap and "$" not in text and "\n" not in text.strip():
        return f"${text.strip()}$"
    return text


VERIFIERS: dict[str, Callable[[str, str, dict], Verdict]] = {
    "math": verify_math,
    "gsm8k": verify_gsm8k,
    "number": verify_number,
    "exact": verify_exact,
    "regex": verify_regex,
    "choice": verify_choice,
}

# options each verifier reads: name -> (type(s), required)
OPTIONS: dict[str, dict[str, tuple[tuple[type, ...], bool]]] = {
    "math": {},
    "gsm8k": {},
    "number": {},
    "exact": {"case_sensitive": ((bool,), False)},
    "regex": {"pattern": ((str,), True), "group": ((int, str), False), "ignore_case": ((bool,), False)},
    "choice": {"choices": ((str,), False)},
}


def check_options(verifier: str, options: dict[str, Any]) -> None:
    """ValueError naming a wrong option of `verifier` (unknown, missing, wrong type, bad pattern)."""
    allowed = OPTIONS[verifier]
    for key, value in options.items():
        if key not in allowed:
            raise ValueError(
                f"options.{key} is not an option of verifier {verifier!r}; allowed: {sorted(allowed) or 'none'}"
            )
        types = allowed[key][0]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise ValueError(f"options.{key}={value!r} must be {' or '.join(t.__name__ for t in types)}")
    for key, (_, required) in allowed.items():
        if required and key not in options:
            raise ValueError(f"verifier {verifier!r} needs options.{key}")
    if verifier == "regex":
        try:
            pattern = compile_pattern(options)
        except re.error as err:
            raise ValueError(f"options.pattern={options['pattern']!r} is not a regular expression: {err}") from None
        group = options.get("group", 1 if pattern.groups else 0)
        if (
            isinstance(group, int)
            and not 0 <= group <= pattern.groups
            or isinstance(group, str)
            and group not in pattern.groupindex
        ):
            raise ValueError(
                f"options.group={group!r}: options.pattern has {pattern.groups} group(s)"
                f"{' named ' + str(sorted(pattern.groupindex)) if pattern.groupindex else ''}"
            )
    if verifier == "choice" and "choices" in options:
        letters = options["choices"]
        if not letters or len(set(letters)) != len(letters) or not all(c.isalnum() for c in letters):
            raise ValueError(f"options.choices={letters!r} must be distinct letters or digits, e.g. 'ABCD'")
