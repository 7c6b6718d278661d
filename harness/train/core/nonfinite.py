"""NaN / inf in a reward, a loss or a gradient (train.nan_policy).

`first_nonfinite` names the first non-finite tensor of a step; the update raises
NonFiniteUpdate before its optimizer step (so the weights never take a non-finite step), and
`on_nonfinite` applies the policy: `stop` raises NonFiniteError (the run ends, FAILED in MLflow,
its checkpoints, all from before this step, intact); `skip_step` prints a warning and the step
goes on without (the rest of) its update, logged with nonfinite/skipped = 1.
"""

from __future__ import annotations

import torch

from harness.faults import NonFiniteError


class NonFiniteUpdate(Exception):
    """Raised inside the policy update, before an optimizer step, with what was not finite."""


def describe(name: str, t: torch.Tensor) -> str | None:
    """None if every value of t is finite, else e.g. 'reward has 1 NaN and 0 inf of 32 values (first at index 5)'."""
    t = t.detach()
    bad = ~torch.isfinite(t)
    if not bool(bad.any()):
        return None
    if t.numel() == 1:
        return f"{name} is {float(t)}"
    first = tuple(int(i) for i in bad.nonzero()[0].tolist())
    where = first[0] if len(first) == 1 else first
    return (
        f"{name} has {int(torch.isnan(t).sum())} NaN and {int(torch.isinf(t).sum())} inf of {t.numel()} values "
        f"(first at index {where})"
    )


def first_nonfinite(tensors: dict[str, torch.Tensor | None]) -> str | None:
    for name, t in tensors.items():
        if t is not None and (msg := describe(name, t)):
            return msg
    return None


def on_nonfinite(policy: str, step: int, what: str, last_checkpoint: str | None) -> dict:
    """Apply train.nan_policy; returns the metrics of a skipped step (skip_step)."""
    if policy == "stop":
        intact = (
            f"checkpoint {last_checkpoint} (before this step) is intact: rerun the same command to resume from it"
            if last_checkpoint
            else "no checkpoint was written yet"
        )
        raise NonFiniteError(
            f"step {step}: {what}. Stopped (train.nan_policy=stop) before any update with it; "
            f"{intact}. Lower train.lr, check the reward function, or set train.nan_policy=skip_step "
            "to skip such steps."
        )
    print(
        f"[harness] WARNING: step {step}: {what}; the step's update is skipped (train.nan_policy=skip_step)", flush=True
    )
    return {"nonfinite/skipped": 1.0, "nonfinite/what": what}
