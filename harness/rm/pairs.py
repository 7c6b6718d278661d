"""Preference pairs of a reward model: read from a file, or built from a run directory's scored samples.

A pair is (prompt, chosen, rejected, margin). prompt, chosen and rejected are each plain text or a list
of chat messages ({"role", "content"}); the reward model reads them through
harness/models/reward_template.py. margin (TRL's optional column) is a number or None.

A file (`--pairs`, read with `datasets`: .jsonl / .json / .parquet / .csv / a save_to_disk folder) has
one pair a row:
    {"prompt": "...", "chosen": "...", "rejected": "..."}             the DPO pairs format of this project
                                                                      (harness/train/dpo/pairs.py; other
                                                                      columns such as difficulty ignored)
    {"prompt": [msgs], "chosen": [msgs], "rejected": [msgs]}          TRL's conversational form
    {"chosen": [msgs], "rejected": [msgs]}                            implicit prompt: whole conversations
    + "margin": 0.5                                                   optional, on every row or on none
Text chosen/rejected need a prompt.

A run directory (`--run`): its samples.jsonl holds, per step, the FIRST completion of each of the first
train.samples_to_log prompt groups (harness/train/rl/step.py) with the verifier's `correct`; the other
completions of a group are not logged. Completions of the same prompt text (over all steps) are
grouped; the k-th distinct correct completion is paired with the k-th distinct incorrect one (each
completion used once, as `dpo.pairs: generate` does). A prompt with no correct or no incorrect
completion gives no pair. A DPO run logs no samples: its pairs.jsonl is a pairs file.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from harness.config import ConfigError
from harness.jsonl import read_jsonl
from harness.tasks.dataset.read import FORMATS, format_of, not_a_file, read_rows

ALLOWED_FILES = ".jsonl, .json, .parquet, .csv or a save_to_disk folder"
SAMPLE_FIELDS = {"prompt": str, "completion": str, "correct": bool}


class PairsError(ConfigError):
    """A pairs file or run directory that cannot give pairs; the message names the file, row and field."""


@dataclass(frozen=True)
class RMPair:
    prompt: str | list[dict]
    chosen: str | list[dict]
    rejected: str | list[dict]
    margin: float | None = None

    def prompt_key(self) -> str:
        """The prompt as one string (pairs of the same prompt stay on one side of the held-out split); an
        implicit prompt is the turns that chosen and rejected share."""
        if isinstance(self.prompt, str):
            return self.prompt
        if self.prompt:
            return repr(self.prompt)
        shared = []
        for a, b in zip(self.chosen, self.rejected):
            if a != b:
                break
            shared.append(a)
        return repr(shared)


def _is_messages(value) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in value
        )
    )


def _field(row: dict, name: str, where: str, required: bool = True):
    """A row's text-or-messages field, validated."""
    value = row.get(name)
    if value is None and not required:
        return []  # an implicit prompt: the conversations hold it
    if isinstance(value, str) and value.strip():
        return value
    if _is_messages(value):
        return [{"role": m["role"], "content": m["content"]} for m in value]
    shown = repr(value)[:80]
    raise PairsError(
        f"{where}: field {name!r} is {shown}; allowed: a non-empty string or a list of chat messages "
        '[{"role": ..., "content": ...}]'
    )


def _margin(row: dict, where: str) -> float | None:
    value = row.get("margin")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise PairsError(f"{where}: field 'margin' is {value!r}; allowed: a finite number (or no margin column)")
    return float(value)


def pair_of_row(row: dict, where: str) -> RMPair:
    """One validated pair of a file's row; PairsError names `where` (file and row), the field and the value."""
    for name in ("chosen", "rejected"):
        if name not in row or row[name] is None:
            raise PairsError(f"{where}: field {name!r} is missing (required: chosen, rejected; and prompt for text)")
    chosen, rejected = _field(row, "chosen", where), _field(row, "rejected", where)
    texts = isinstance(chosen, str) or isinstance(rejected, str)
    prompt = _field(row, "prompt", where, required=texts)  # text completions need their prompt
    if chosen == rejected:
        raise PairsError(f"{where}: field 'rejected' equals field 'chosen' (a pair must differ)")
    return RMPair(prompt, chosen, rejected, _margin(row, where))


def read_pairs_file(path: str | Path) -> list[RMPair]:
    """Every pair of a pairs file (format from its name); PairsError on the first bad row or an empty file."""
    p = Path(path)
    if not p.exists():
        raise PairsError(f"--pairs={str(p)!r}: no such file ({ALLOWED_FILES})")
    if format_of(p) is None:
        raise PairsError(f"--pairs={str(p)!r}: cannot tell its format from the name; allowed: {ALLOWED_FILES}")
    try:
        rows, columns = read_rows(str(p), "auto", "train", key="--pairs", split_key="--pairs")
    except ValueError as err:
        raise PairsError(str(err)) from None
    if not rows:
        raise PairsError(f"--pairs={str(p)!r}: holds no rows (one pair a row: prompt, chosen, rejected)")
    pairs = [pair_of_row(r, f"{p}, row {i + 1}") for i, r in enumerate(rows)]
    with_margin = [x.margin is not None for x in pairs]
    if any(with_margin) and not all(with_margin):
        row = with_margin.index(False) + 1
        raise PairsError(f"{p}, row {row}: field 'margin' is missing; allowed: a margin on every row or on none")
    return pairs


def _sample_records(run_dir: Path) -> list[dict]:
    """The validated records of a run directory's samples.jsonl."""
    path = run_dir / "samples.jsonl"
    if not run_dir.is_dir():
        raise PairsError(f"--run={str(run_dir)!r}: not a folder (a run directory of `harness train`)")
    if (what := not_a_file(path)) is not None:  # checked without opening: a named pipe would wait for a writer
        raise PairsError(f"--run={str(run_dir)!r}: {path} is {what}, not a regular file (the run's samples log)")
    records = read_jsonl(path)
    if not records:
        hint = (
            "; it holds pairs.jsonl (a DPO run's pairs): pass that with --pairs"
            if (run_dir / "pairs.jsonl").is_file()
            else ""
        )
        raise PairsError(f"--run={str(run_dir)!r}: no samples in {path} (train.samples_to_log > 0 logs them){hint}")
    for n, rec in enumerate(records, start=1):
        for name, kind in SAMPLE_FIELDS.items():
            if not isinstance(rec, dict) or not isinstance(rec.get(name), kind):
                got = rec.get(name) if isinstance(rec, dict) else rec
                raise PairsError(f"{path}, line {n}: field {name!r} is {got!r}; allowed: a {kind.__name__}")
    return records


def pairs_from_run(run_dir: str | Path) -> tuple[list[RMPair], dict]:
    """Pairs of a run directory's logged samples (module docstring) -> (pairs, counts)."""
    records = _sample_records(Path(run_dir))
    by_prompt: dict[str, dict[bool, list[str]]] = defaultdict(lambda: {True: [], False: []})
    for rec in records:
        seen = by_prompt[rec["prompt"]][rec["correct"]]
        if rec["completion"] not in seen:
            seen.append(rec["completion"])
    pairs = [
        RMPair(prompt, good, bad) for prompt, sides in by_prompt.items() for good, bad in zip(sides[True], sides[False])
    ]
    counts = {
        "samples": len(records),
        "prompts": len(by_prompt),
        "prompts_with_pairs": sum(1 for s in by_prompt.values() if s[True] and s[False]),
        "pairs": len(pairs),
    }
    if not pairs:
        raise PairsError(
            f"--run={str(run_dir)!r}: its {len(records)} logged samples give no pair (no prompt has both a correct "
            "and an incorrect logged completion; a longer run, or a larger train.samples_to_log, logs more)"
        )
    return pairs, counts


def split_pairs(pairs: list[RMPair], eval_fraction: float, seed: int) -> tuple[list[RMPair], list[RMPair]]:
    """(train, held-out): round(eval_fraction * prompts) whole prompts, drawn with `seed`, are held out (at least
    one when eval_fraction > 0), so no prompt is on both sides. PairsError when a side would be empty."""
    prompts = sorted({x.prompt_key() for x in pairs})
    random.Random(seed).shuffle(prompts)
    n_eval = max(1, round(eval_fraction * len(prompts))) if eval_fraction > 0 else 0
    held = set(prompts[:n_eval])
    train = [x for x in pairs if x.prompt_key() not in held]
    held_out = [x for x in pairs if x.prompt_key() in held]
    if not train:
        raise PairsError(
            f"--eval-fraction={eval_fraction}: the {len(pairs)} pairs have {len(prompts)} distinct prompts; holding "
            f"out {n_eval} leaves none to train on (lower --eval-fraction, or give more pairs)"
        )
    return train, held_out


__all__ = ["FORMATS", "PairsError", "RMPair", "pairs_from_run", "read_pairs_file", "split_pairs"]
