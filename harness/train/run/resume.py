"""Where a rerun resumes: the newest checkpoint that verifies and loads, falling back to the
one before it (KEEP_CHECKPOINTS are kept on disk) and saying so. Never a silent restart: a
missing `latest` marker is not needed to find a checkpoint, and a directory whose checkpoints
are all unreadable, or that holds logged steps but no checkpoint, stops with a message instead
of training from step 0 over them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.faults import NoReadableCheckpoint, OrphanMetrics
from harness.train.core.rundir import RunDir, verify


def resume_point(run: RunDir, load: Callable[[Path], Any]) -> tuple[Path | None, Any]:
    """(checkpoint, load(checkpoint)) of the newest usable checkpoint, or (None, None) for a
    fresh directory. An unreadable checkpoint is renamed unreadable_step_* (kept, never loaded)."""
    found = run.checkpoints()
    if not found:
        steps = run.logged_steps()
        if steps:
            aside = sorted(p.name for p in run.ckpt_root.glob("unreadable_step_*")) if run.ckpt_root.is_dir() else []
            why = f" (unreadable checkpoints set aside: {', '.join(aside)})" if aside else ""
            raise OrphanMetrics(
                f"{run.metrics_path} holds steps {steps[0]}..{steps[-1]} but {run.ckpt_root} has no checkpoint to "
                f"resume them from{why}; refusing to restart at step 0 over them. Restore the checkpoints, or use "
                "another --out (or delete this directory) to start afresh."
            )
        return None, None
    marker = run.marker()
    if marker != found[0].name:
        what = "is missing" if marker is None else f"names {marker!r}"
        print(f"[harness] {run.ckpt_root}/latest {what}; the newest checkpoint on disk is {found[0].name}", flush=True)
    for i, ckpt in enumerate(found):
        reason = verify(ckpt)
        if reason is None:
            try:
                return ckpt, load(ckpt)
            except Exception as err:  # noqa: BLE001 -- any load failure: try the previous checkpoint
                reason = f"{type(err).__name__}: {str(err)[:200]}"
        aside = run.set_aside(ckpt)
        nxt = f"falling back to {found[i + 1].name}" if i + 1 < len(found) else "no earlier checkpoint is left"
        print(
            f"[harness] WARNING: checkpoint {ckpt.name} is unreadable ({reason}); kept as {aside.name}; {nxt}",
            flush=True,
        )
    raise NoReadableCheckpoint(
        f"no checkpoint in {run.ckpt_root} loads ({', '.join(p.name for p in found)} were set aside as "
        "unreadable_step_*); refusing to restart at step 0 over this run. Use another --out to start afresh."
    )
