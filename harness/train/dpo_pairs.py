"""Preference pairs for DPO: built from the warm-started policy, or read from a JSONL file.

A pair is one prompt (the task text, WITHOUT the model template), a chosen and a rejected
completion (text, without EOS), and the prompt's difficulty bucket. On disk: one JSON
object per line with exactly these four string fields (other fields are ignored):

    {"prompt": "7*8-6=?\\n", "chosen": "7*8-6=56-6=50\\nAnswer: 50", "rejected": "...", "difficulty": "medium"}

Generated pairs (`dpo.pairs: generate`): sample G = dpo.samples_per_prompt completions for
each of dpo.num_prompts train-split prompts and score them with the task's verifier; the
first correct sample is chosen, the first wrong one rejected. A prompt with no correct or
no wrong answer gives no pair. A truncated sample is never used: both completions are
scored as text + EOS, which for a truncated sample is not what the policy produced.
The file written is itself a valid `dpo.pairs` input for another run.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.config import ConfigError
from harness.rollout.base import RolloutBackend, SamplingParams
from harness.tasks.base import Task
from harness.train.collect import score, step_seed
from harness.train.rundir import atomic_write_text

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


def build_pairs(task: Task, backend: RolloutBackend, render, cfg) -> tuple[list[PreferencePair], dict]:
    """Pairs from the policy behind `backend` on train-split prompts; -> (pairs, report of the counts).
    render: Problem -> prompt token ids."""
    d = cfg.dpo
    G = d.samples_per_prompt
    problems = task.problems(d.num_prompts, seed=step_seed(cfg.seed, 0, PAIRS_SALT), split="train")
    params = SamplingParams(max_new_tokens=cfg.rollout.max_new_tokens, temperature=cfg.rollout.temperature,
                            top_p=cfg.rollout.top_p, seed=step_seed(cfg.seed, 0, PAIRS_SALT + 1))
    rollout = backend.generate([render(p) for p in problems], G, params)  # B = N*G rows, groups contiguous
    ep = score(task, problems, rollout, G, cfg.objective, cfg.rollout.max_new_tokens)
    pairs: list[PreferencePair] = []
    skipped = Counter()
    for i, p in enumerate(problems):
        rows = range(i * G, (i + 1) * G)
        correct = [j for j in rows if ep.scores[j].correct]
        wrong = [j for j in rows if not ep.scores[j].correct]
        usable_wrong = [j for j in wrong if not bool(rollout.truncated[j])]
        if not correct:
            skipped["no_correct"] += 1
        elif not wrong:
            skipped["no_wrong"] += 1
        elif not usable_wrong:
            skipped["only_truncated_wrong"] += 1
        else:
            pairs.append(PreferencePair(p.prompt, rollout.texts[correct[0]], rollout.texts[usable_wrong[0]], p.difficulty))
    report = {
        "source": "generate",
        "prompts": len(problems),
        "samples_per_prompt": G,
        "sample_accuracy": float(ep.correct.float().mean()),
        "pairs": len(pairs),
        "skipped_no_correct": skipped["no_correct"],
        "skipped_no_wrong": skipped["no_wrong"],
        "skipped_only_truncated_wrong": skipped["only_truncated_wrong"],
        "pairs_by_difficulty": dict(sorted(Counter(x.difficulty for x in pairs).items())),
    }
    return pairs, report


def file_report(path: Path, pairs: list[PreferencePair]) -> dict:
    return {"source": str(path), "pairs": len(pairs),
            "pairs_by_difficulty": dict(sorted(Counter(x.difficulty for x in pairs).items()))}


def write_pairs(path: Path, pairs: list[PreferencePair]) -> None:
    """Atomically write one JSON object per pair."""
    atomic_write_text(path, "".join(json.dumps(asdict(x), ensure_ascii=False) + "\n" for x in pairs))


def read_pairs(path: str | Path) -> list[PreferencePair]:
    """Validated pairs of a JSONL file; PairsFileError names the file, line and field of the first problem.
    Blank lines are skipped; fields other than prompt/chosen/rejected/difficulty are ignored."""
    path = Path(path)
    if not path.is_file():
        raise PairsFileError(f"dpo.pairs={str(path)!r}: no such file (use 'generate' or a JSONL file of "
                             f"{{{', '.join(FIELDS)}}} objects)")
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
            raise PairsFileError(f"{where}: expected a JSON object with fields {list(FIELDS)}, got {type(rec).__name__}")
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
