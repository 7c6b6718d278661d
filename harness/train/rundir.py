"""The run directory: config.yaml, metrics.jsonl, samples.jsonl, groups.jsonl, checkpoints, summary.json.

Crash safety. Metrics of the steps since the last checkpoint are kept inside the next
checkpoint and flushed (to metrics.jsonl and the tracker) only after that checkpoint is
on disk. A killed run therefore resumes from its last checkpoint k with every step <= k
logged exactly once, and redoes the steps > k, which were never logged. Every file that is
replaced is written to a temp name and renamed (atomic on POSIX).

groups.jsonl (one line per prompt group and step, harness/train/group_stats.py) follows the
same path: a step's group records ride inside its metric record under GROUP_RECORDS, and
`flush` moves them to groups.jsonl (metrics.jsonl never holds them). samples.jsonl and
groups.jsonl hold several records per step; a step that a crash cut short in the middle of a
flush is rewritten whole on the next flush.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch

GROUP_RECORDS = "_groups"  # key of a metric record that holds the step's per-group records (-> groups.jsonl)


def atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


class RunDir:
    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.ckpt_root = self.root / "checkpoints"
        self.metrics_path = self.root / "metrics.jsonl"
        self.samples_path = self.root / "samples.jsonl"
        self.groups_path = self.root / "groups.jsonl"
        self.config_path = self.root / "config.yaml"
        self.summary_path = self.root / "summary.json"

    # ------------------------------------------------------------------ checkpoints
    def latest_checkpoint(self) -> Path | None:
        marker = self.ckpt_root / "latest"
        if not marker.exists():
            return None
        path = self.ckpt_root / marker.read_text().strip()
        return path if path.is_dir() else None

    def save_checkpoint(self, step: int, model, state: dict, tokenizer=None) -> Path:
        """model: a PreTrainedModel (saved as safetensors, with the tokenizer, so the checkpoint
        loads on its own); state: optimizer, pending metrics, ..."""
        self.ckpt_root.mkdir(exist_ok=True)
        name = f"step_{step:06d}"
        tmp = self.ckpt_root / f".tmp_{name}"
        shutil.rmtree(tmp, ignore_errors=True)
        model.save_pretrained(tmp, safe_serialization=True)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        torch.save(state, tmp / "trainer_state.pt")
        final = self.ckpt_root / name
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        atomic_write_text(self.ckpt_root / "latest", name)
        for old in self.ckpt_root.glob("step_*"):
            if old.name != name:
                shutil.rmtree(old, ignore_errors=True)
        return final

    @staticmethod
    def load_state(ckpt: Path) -> dict:
        return torch.load(ckpt / "trainer_state.pt", weights_only=False)

    # ------------------------------------------------------------------ step-keyed logs
    def flush(self, metrics: list[dict], samples: list[dict]) -> None:
        """Append records whose step is not yet in the file (idempotent on re-flush). A metric
        record's GROUP_RECORDS list goes to groups.jsonl, the rest of it to metrics.jsonl."""
        _append_new(self.groups_path, [g for r in metrics for g in r.get(GROUP_RECORDS, ())])
        _append_new(self.metrics_path, [{k: v for k, v in r.items() if k != GROUP_RECORDS} for r in metrics])
        _append_new(self.samples_path, samples)

    def truncate_after(self, step: int) -> None:
        """Drop records of steps > step (never-checkpointed work of a killed run) and torn lines."""
        for path in (self.metrics_path, self.samples_path, self.groups_path):
            _truncate(path, step)

    def logged_steps(self) -> list[int]:
        return [int(r["step"]) for r in read_jsonl(self.metrics_path)]

    def write_summary(self, summary: dict) -> None:
        atomic_write_text(self.summary_path, json.dumps(summary, indent=2, sort_keys=True))


def read_jsonl(path: Path) -> list[dict]:
    """Records of a JSONL file, stopping at a torn last line."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            break
    return out


def _truncate(path: Path, step: int) -> None:
    if path.exists():
        kept = [r for r in read_jsonl(path) if int(r["step"]) <= step]
        atomic_write_text(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in kept))


def _append_new(path: Path, records: list[dict]) -> None:
    """Append the records of steps after the file's last step. Several records may share a step
    (samples, groups), and a flush always holds all of a step's records: when the file holds
    FEWER records of its last step than `records` do, a crash cut that step short, and it is
    rewritten whole."""
    old = read_jsonl(path)
    last = max((int(r["step"]) for r in old), default=-1)
    new = [r for r in records if int(r["step"]) > last]
    redo = [r for r in records if int(r["step"]) == last]
    if redo and len(redo) > sum(1 for r in old if int(r["step"]) == last):
        _truncate(path, last - 1)
        new = redo + new
    if new:
        with open(path, "a") as f:
            for r in new:
                f.write(json.dumps(r, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
