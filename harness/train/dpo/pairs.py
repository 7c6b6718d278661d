"""Preference pairs for DPO: built from the warm-started policy, or read from a JSONL file.

A pair is one prompt (the task text, WITHOUT the model template), a chosen and a rejected
completion (text, without EOS), and the prompt's difficulty bucket. On disk: one JSON
object per line with exactly these four string fields (other fields are ignored):

    {"prompt": "7*8-6=?\\n", "chosen": "7*8-6=56-6=50\\nAnswer: 50", "rejected": "...", "difficulty": "medium"}

Generated pairs (`dpo.pairs: generate`): sample G = dpo.samples_per_prompt completions for
each of dpo.num_prompts train-split prompts and score them with the task's verifier; the
k-th correct sample is paired with the k-th wrong one, for k < dpo.pairs_per_prompt (each
sample is used at most once). A prompt with no correct or no wrong answer gives no pair.
With dpo.rounds > 1 (iterative RPO), round r draws its own prompts and samples from the
policy at the start of round r. A truncated sample is never used: both completions are
scored as text + EOS, which for a truncated sample is not what the policy produced.
The file written is itself a valid `dpo.pairs` input for another run.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.atomic import atomic_write_text
from harness.config import ConfigError
from harness.rollout.base import RolloutBackend, SamplingParams
from harness.tasks.base import Task
from harness.tasks.dataset.read import not_a_file
from harness.train.core.collect import score, step_seed

FIELDS = ("prompt", "chosen", "rejected", "difficulty")
PAIRS_SALT = 4_321  # seeds of the pair-building prompts and samples (disjoint from the RL steps' salts)


class PairsFileError(ConfigError):
    """A preference-pairs file is missing or malformed; the message names the line and field."""


@dataclass(frozen=True)
class PreferencePair:
    prompt: str
    chosen: str
    rejected: str
    difficulty: str


def build_pairs(task: Task, backend: RolloutBackend, render, cfg, round_: int = 0) -> tuple[list[PreferencePair], dict]:
    """Pairs from the policy behind `backend` on the train-split prompts of round `round_`;
    -> (pairs, report of the counts). render: Problem -> prompt token ids."""
    d = cfg.dpo
    G = d.samples_per_prompt
    problems = task.problems(d.num_prompts, seed=step_seed(cfg.seed, round_, PAIRS_SALT), split="train")
    params = SamplingParams(
        max_new_tokens=cfg.rollout.max_new_tokens,
        temperature=cfg.rollout.temperature,
        top_p=cfg.rollout.top_p,
        seed=step_seed(cfg.seed, round_, PAIRS_SALT + 1),
    )
    rollout = backend.generate([render(p) for p in problems], G, params)  # B = N*G rows, groups contiguous
    ep = score(task, problems, rollout, G, cfg.objective, cfg.rollout.max_new_tokens)
    pairs: list[PreferencePair] = []
    counts = Counter()  # prompts by outcome
    for i, p in enumerate(problems):
        rows = range(i * G, (i + 1) * G)
        correct = [j for j in rows if ep.scores[j].correct]
        wrong = [j for j in rows if not ep.scores[j].correct]
        usable_wrong = [j for j in wrong if not bool(rollout.truncated[j])]
        if not correct:
            counts["no_correct"] += 1
        elif not wrong:
            counts["no_wrong"] += 1
        elif not usable_wrong:
            counts["only_truncated_wrong"] += 1
        else:
            counts["with_pairs"] += 1
            for c, w in list(zip(correct, usable_wrong))[: d.pairs_per_prompt]:
                pairs.append(PreferencePair(p.prompt, rollout.texts[c], rollout.texts[w], p.difficulty))
    report = {
        "source": "generate",
        "round": round_,
        "prompts": len(problems),
        "samples_per_prompt": G,
        "sample_accuracy": float(ep.correct.float().mean()),
        "pairs": len(pairs),
        "prompts_with_pairs": counts["with_pairs"],
        "skipped_no_correct": counts["no_correct"],
        "skipped_no_wrong": counts["no_wrong"],
        "skipped_only_truncated_wrong": counts["only_truncated_wrong"],
        "pairs_by_difficulty": dict(sorted(Counter(x.difficulty for x in pairs).items())),
    }
    return pairs, report


def file_report(path: Path, pairs: list[PreferencePair]) -> dict:
    return {
        "source": str(path),
        "pairs": len(pairs),
        "pairs_by_difficulty": dict(sorted(Counter(x.difficulty for x in pairs).items())),
    }


def write_pairs(path: Path, pairs: list[PreferencePair]) -> None:
    """Atomically write one JSON object per pair."""
    atomic_write_text(path, "".join(json.dumps(asdict(x), ensure_ascii=False) + "\n" for x in pairs))


def read_pairs(path: str | Path) -> list[PreferencePair]:
    """Validated pairs of a JSONL file; PairsFileError names the file, line and field of the first problem.
    Blank lines are skipped; fields other than prompt/chosen/rejected/difficulty are ignored."""
    path = Path(path)
    if (what := not_a_file(path)) is not None:  # checked without opening: a named pipe would wait for a writer
        raise PairsFileError(
            f"dpo.pairs={str(path)!r} is {what}, not a regular file; allowed: 'generate' or a JSONL file of "
            f"{{{', '.join(FIELDS)}}} objects"
        )
    if not path.is_file():
        raise PairsFileError(
            f"dpo.pairs={str(path)!r}: no such file (use 'generate' or a JSONL file of {{{', '.join(FIELDS)}}} objects)"
        )
    pairs = []
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}, line {n}"
        try:
            rec = json.loads(line)
        except ValueError as err:
            raise PairsFileError(f"{where}: not valid JSON ({err})") from None
        if not isinstance(rec, dict):
            raise PairsFileError(
                f"{where}: expected a JSON object with fields {list(FIELDS)}, got {type(rec).__name__}"
            )
        for f in FIELDS:
            if f not in rec:
                raise PairsFileError(f"{where}: field {f!r} is missing (required: {list(FIELDS)})")
            if not isinstance(rec[f], str) or not rec[f].strip():
                raise PairsFileError(f"{where}: field {f!r} must be a non-empty string, got {rec[f]!r}")
        if rec["chosen"] == rec["rejected"]:
            raise PairsFileError(f"{where}: field 'rejected' equals field 'chosen' (a pair must differ)")
        pairs.append(PreferencePair(*(rec[f] for f in FIELDS)))
    if not pairs:
        raise PairsFileError(f"{path}: holds no preference pairs")
    return pairs
