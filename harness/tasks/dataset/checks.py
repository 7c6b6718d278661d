"""The check before training that a task's verifier reads its data's answers.

The first `task.data.check_answers` train rows' reference answers (the answer field, as the
file stores it; a bare number, and nothing else, gets gsm8k's "#### " first) are scored as if
they were completions by the reward that defines "correct"; each must come out correct. A verifier
that cannot read the file's answer format (gsm8k on bare numbers is fine, math on "#### 72" is
fine, choice on "72" is not, gsm8k on "\\boxed{72}" is not) fails here, in one line,
before hours of training give every completion 0. A regex verifier is not checked (its pattern
reads a completion's format, which a reference answer need not have); a function is called as
it will be in training, so one that raises, exits or returns a wrong type fails here too. A reward
that runs over task.reward_timeout on a reference answer fails as hanging (not as one that cannot
read the answers).
"""

from __future__ import annotations

from harness.tasks.dataset.task import HINTS, DatasetTask
from harness.tasks.rewards.functions import RewardFunctionError
from harness.tasks.rewards.scorer import ScoreTimeout, call_with_timeout
from harness.tasks.rewards.verifiers import VERIFIERS, is_number


def as_completion(verifier: str, reference: str) -> str:
    """A reference answer written as a completion the verifier reads: a bare number gets gsm8k's "#### "
    (verl's ground_truth "72"); every other reference, and every other verifier's, is read as it stands
    (a MATH solution's "\\boxed{72}" is not gsm8k's answer line: the check fails on it, as training would)."""
    if verifier == "gsm8k" and "####" not in reference and is_number(reference):
        return f"#### {reference.strip()}"
    return reference


def check_reference_answers(task: DatasetTask, n: int) -> None:
    """ValueError (one line, naming the task.rewards entry and the row) unless the first n train
    rows' answers, scored as completions by the `correct` reward, are correct."""
    index = next(i for i, s in enumerate(task.specs) if s.name == task.correct)
    spec = task.specs[index]
    if n <= 0 or spec.verifier == "regex" or spec.model:  # a reward model's verdict (score > 0) is not a check
        return
    rows = sorted(task.rows("train"), key=lambda p: p.meta["row"])[:n]
    what = f"verifier {spec.verifier}" if spec.verifier else f"function {spec.function}"
    skip = "task.data.check_answers=0 skips this check"
    for p in rows:
        item = task.item(p, p.answer, False)
        if spec.verifier:
            verdict = _verify(task, spec, p, f"task.rewards[{index}] ({what})", skip)
            ok, read = verdict.correct, verdict.parsed
        else:
            try:
                scored = task.scorer.score(item)
            except RewardFunctionError as err:
                raise ValueError(
                    f"task.rewards[{index}] ({what}), scoring the reference answers as completions: {err} ({skip})"
                ) from None
            if scored.timed_out:
                raise ValueError(_hangs(task, p, f"task.rewards[{index}] ({what})", skip))
            ok, read = scored.correct, None
        if not ok:
            hint = f"; {HINTS[spec.verifier]}" if spec.verifier else ""
            if spec.verifier == "gsm8k" and "####" not in p.answer:
                hint += " (a reference without one is read as its answer line only when it is a bare number)"
            shown = p.answer if len(p.answer) <= 60 else p.answer[:28] + " ... " + p.answer[-27:]
            raise ValueError(
                f"task.rewards[{index}] ({what}) does not read the data's answers: {p.meta['file']} row "
                f"{p.meta['row']}'s reference answer {shown!r} (task.data.answer_key="
                f"{task.data['answer_key']!r}), scored as a completion, is not correct"
                f"{'' if spec.function else f' (it read {read!r})'}{hint}; check answer_key or pick "
                f"another verifier ({' | '.join(VERIFIERS)}) ({skip})"
            )


def _verify(task: DatasetTask, spec, p, what: str, skip: str):
    """The verifier's verdict on row p's reference answer, under the task's time limit."""
    try:
        completion = as_completion(spec.verifier, p.answer)
        return call_with_timeout(VERIFIERS[spec.verifier], task.scorer.timeout, completion, p.answer, spec.options)
    except ScoreTimeout:
        raise ValueError(_hangs(task, p, what, skip)) from None


def _hangs(task: DatasetTask, p, what: str, skip: str) -> str:
    """The one line for a reward that ran over its time limit on a reference answer: it hangs, whatever it reads."""
    return (
        f"{what} ran over task.reward_timeout={task.scorer.timeout:g} s scoring {p.meta['file']} row "
        f"{p.meta['row']}'s reference answer as a completion: does it hang? Fix it, or raise task.reward_timeout "
        f"if it is only slow ({skip})"
    )
