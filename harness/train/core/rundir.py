"""The run directory: config.yaml, metrics.jsonl, samples.jsonl, groups.jsonl, checkpoints, summary.json.

Crash safety. Metrics of the steps since the last checkpoint are kept inside the next
checkpoint and flushed (to metrics.jsonl and the tracker) only after that checkpoint is
on disk. A killed run therefore resumes from its last checkpoint k with every step <= k
logged exactly once, and redoes the steps > k, which were never logged. Every file and folder
that is replaced is written to a temp name and renamed (harness/atomic.py).

groups.jsonl (one line per prompt group and step, harness/train/diagnostics/group_stats.py) follows the
same path: a step's group records ride inside its metric record under GROUP_RECORDS, and
`flush` moves them to groups.jsonl (metrics.jsonl never holds them). samples.jsonl and
groups.jsonl hold several records per step; a step that a crash cut short in the middle of a
flush is rewritten whole on the next flush.

Checkpoints. The newest KEEP_CHECKPOINTS (2) stay on disk, each with a manifest (size and
CRC-32 of every file, written last: `write_manifest`, checked by `verify`); a rerun resumes from the newest one that verifies
and loads and falls back to the one before it (run/setup.py resume_point). A failed write (disk full) removes
its partial folder and raises CheckpointWriteError; the previous checkpoint stays the resume
point. docs/faults.md has every fault and what the run does.

Config lock. config.yaml ties the directory to one config once a step is complete (a
checkpoint, a logged step or summary.json: `has_completed_step`). An attempt that failed
before that holds nothing worth keeping, so a changed config may restart the directory:
`clear_attempt` removes what that attempt wrote (setup.check_same_config).
"""

from __future__ import annotations

import json
import os
import shutil
import zlib
from pathlib import Path

import torch

from harness.atomic import atomic_folder, atomic_write_text
from harness.faults import CheckpointWriteError
from harness.jsonl import read_jsonl

KEEP_CHECKPOINTS = 2  # the newest checkpoint and the one before it (a fallback if the newest is unreadable)
STALE = (".step_*.tmp-*", ".step_*.old-*", ".tmp_step_*")  # atomic_folder's temp names (and the older one)
GROUP_RECORDS = "_groups"  # key of a metric record that holds the step's per-group records (-> groups.jsonl)
MANIFEST = "manifest.json"  # a checkpoint's files: size and CRC-32 of each, written last
# besides *.safetensors; a LoRA checkpoint holds adapter_config.json in place of config.json
REQUIRED = ("config.json", "trainer_state.pt")


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
        self.run_json_path = self.root / "run.json"

    # ------------------------------------------------------------------ the machine on record
    def record_attempt(self, info: dict) -> None:
        """Append one attempt (start time, commit, machine: harness/machine.py) to run.json, so every
        number of the run can be traced to the machine and code that made it (a resumed run that moved
        to another machine lists both)."""
        try:
            data = json.loads(self.run_json_path.read_text())
        except (OSError, ValueError):
            data = {"attempts": []}
        data.setdefault("attempts", []).append(info)
        atomic_write_text(self.run_json_path, json.dumps(data, indent=1) + "\n")

    # ------------------------------------------------------------------ checkpoints
    def checkpoints(self) -> list[Path]:
        """Complete checkpoints on disk, newest first. A step_* folder is complete when it exists:
        it is written under a temp name and renamed. The `latest` marker is not needed to find them."""
        if not self.ckpt_root.is_dir():
            return []
        found = [p for p in self.ckpt_root.glob("step_*") if p.is_dir() and p.name[5:].isdigit()]
        return sorted(found, key=lambda p: int(p.name[5:]), reverse=True)

    def latest_checkpoint(self) -> Path | None:
        """The newest checkpoint on disk (with or without the `latest` marker)."""
        found = self.checkpoints()
        return found[0] if found else None

    def marker(self) -> str | None:
        """The name the `latest` marker holds, or None when it is missing."""
        path = self.ckpt_root / "latest"
        return path.read_text().strip() if path.is_file() else None

    def save_checkpoint(self, step: int, model, state: dict, tokenizer=None, weights: dict | None = None) -> Path:
        """model: a PreTrainedModel (saved as safetensors, with the tokenizer, so the checkpoint
        loads on its own); state: optimizer, pending metrics, ... Written under a temp name with a
        manifest (size and CRC-32 of every file), then renamed. The newest KEEP_CHECKPOINTS stay on
        disk, so a checkpoint found unreadable later has one to fall back to. An OSError (disk
        full, quota, I/O) removes the partial write and raises CheckpointWriteError. weights: the model's whole
        state dict when the model holds only its shards (FSDP: harness/parallel.py full_state); None: its own."""
        self.ckpt_root.mkdir(exist_ok=True)
        name = f"step_{step:06d}"
        try:
            with atomic_folder(self.ckpt_root / name) as tmp:  # replaces a step redone after a fallback
                model.save_pretrained(tmp, safe_serialization=True, **({"state_dict": weights} if weights else {}))
                if tokenizer is not None:
                    tokenizer.save_pretrained(tmp)
                torch.save(state, tmp / "trainer_state.pt")
                write_manifest(tmp)
            atomic_write_text(self.ckpt_root / "latest", name)
        except OSError as err:  # atomic_folder removed the partial write
            prev = [p.name for p in self.checkpoints() if p.name != name]
            kept = f"the previous checkpoint {prev[0]} is intact" if prev else "there is no earlier checkpoint"
            raise CheckpointWriteError(
                f"could not write checkpoint {name} to {self.ckpt_root}: {err.strerror or err} (errno {err.errno}); "
                f"the partial write was removed and {kept}. Free space (or fix the error), then rerun the same "
                f"command: it resumes from {prev[0] if prev else 'step 0'} (the steps after it are redone)."
            ) from err
        for old in self.checkpoints()[KEEP_CHECKPOINTS:]:
            shutil.rmtree(old, ignore_errors=True)
        for pattern in STALE:  # partial writes of a killed attempt
            for stale in self.ckpt_root.glob(pattern):
                shutil.rmtree(stale, ignore_errors=True)
        return self.ckpt_root / name

    def set_aside(self, ckpt: Path) -> Path:
        """Rename an unreadable checkpoint to unreadable_<name> (kept for inspection, never loaded)."""
        dest = ckpt.with_name(f"unreadable_{ckpt.name}")
        shutil.rmtree(dest, ignore_errors=True)
        os.replace(ckpt, dest)
        return dest

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

    # ------------------------------------------------------------------ attempts
    # what an attempt writes before its first checkpoint, all of it derived from its config
    ATTEMPT_FILES = (
        "config.yaml",
        "run.json",
        "metrics.jsonl",
        "samples.jsonl",
        "groups.jsonl",
        "mlflow_run_id",
        ".mlflow_run_id.tmp*",
        "mlflow_pending.jsonl",
        "pairs*.jsonl",
        "pairs_report*.json",
        "pairs_ref*.pt",
        ".pairs_ref*.pt.tmp*",
    )
    ATTEMPT_DIRS = ("checkpoints", "eval_prompts")

    def has_completed_step(self) -> bool:
        """Whether any training step of this directory is complete (checkpointed, logged or summarised)."""
        return (
            self.latest_checkpoint() is not None
            or any(self.ckpt_root.glob("*step_*"))
            or self.summary_path.exists()
            or bool(read_jsonl(self.metrics_path))
        )

    def clear_attempt(self) -> list[str]:
        """Remove what an attempt that completed no step left behind (config.yaml, pairs, its MLflow
        run id, the step-0 eval, ...); returns the names removed. Refuses a directory with a completed step."""
        if self.has_completed_step():
            raise RuntimeError(f"{self.root} holds a completed step; refusing to clear it")
        removed = []
        for pattern in self.ATTEMPT_FILES:
            for path in sorted(self.root.glob(pattern)):
                if path.is_file():
                    path.unlink()
                    removed.append(path.name)
        for name in self.ATTEMPT_DIRS:
            if (self.root / name).is_dir():
                shutil.rmtree(self.root / name)
                removed.append(name + "/")
        return removed


def _is_clean(path: Path, n_records: int) -> bool:
    """Whether the file is exactly n_records complete lines (no torn or unreadable tail)."""
    text = path.read_text()
    return (not text or text.endswith("\n")) and text.count("\n") == n_records


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
    if path.exists() and not _is_clean(path, len(old)):  # a torn last line: drop it before appending
        atomic_write_text(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in old))
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


# ---------------------------------------------------------------------- a checkpoint's manifest
# The size and CRC-32 of every file, written last (before the rename that publishes the checkpoint), so
# that a truncated or corrupted file is found before it is loaded (`verify`).
def _crc32(path: Path) -> int:
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            crc = zlib.crc32(chunk, crc)
    return crc


def write_manifest(folder: Path) -> None:
    """folder/manifest.json: the size and CRC-32 of every other file in it."""
    files = {
        p.relative_to(folder).as_posix(): {"size": p.stat().st_size, "crc32": _crc32(p)}
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != MANIFEST
    }
    (folder / MANIFEST).write_text(json.dumps({"files": files}, indent=1, sort_keys=True))


def verify(folder: Path) -> str | None:
    """None if the checkpoint is whole, else what is wrong with it (one phrase)."""
    required = [
        ("adapter_config.json" if n == "config.json" and (folder / "adapter_config.json").is_file() else n)
        for n in REQUIRED
    ]
    missing = [name for name in required if not (folder / name).is_file()]
    if not any(folder.glob("*.safetensors")):
        missing.append("*.safetensors")
    if missing:
        return f"missing {', '.join(missing)}"
    path = folder / MANIFEST
    if not path.is_file():
        return None  # written before manifests existed: loading it is the only check
    try:
        files = json.loads(path.read_text())["files"]
    except (ValueError, KeyError, TypeError):
        return f"unreadable {MANIFEST}"
    for name, want in files.items():
        f = folder / name
        if not f.is_file():
            return f"missing {name}"
        if f.stat().st_size != want["size"]:
            return f"{name} has {f.stat().st_size} bytes, {want['size']} were written (truncated?)"
        if _crc32(f) != want["crc32"]:
            return f"{name} does not match its checksum (corrupted)"
    return None
