"""glibc's allocator for torch's CPU tensors: keep freed memory for the next step's tensors.

torch allocates every CPU tensor with posix_memalign (64-byte aligned) and frees it when the last
reference goes. glibc serves a request above its mmap threshold (128 KiB at start, raised by
itself up to 32 MiB as it sees such blocks freed) with a fresh mmap, and hands the top of its heap
back to the kernel once more than the trim threshold (twice the mmap threshold) lies free there. A
training step allocates and frees the same activations, gradients and KV caches, megabytes each,
step after step: each fresh mapping is zero-filled by the kernel one 4 KiB page fault at a time
(4.1 million minor faults in two SmolLM2 rollouts of 64 rows x 64 tokens, benchmarks/README.md).

`tune()` fixes the mmap threshold at its largest (32 MiB: smaller blocks come from the heap), keeps
up to 2 GiB free at the heap's top instead of returning it, and grows the heap 256 MiB at a time
(the pages are only touched when used). The process's resident memory then stays near its peak
between steps. What is computed does not change: torch aligns every tensor to 64 bytes either way
(tests/test_malloc.py checks a training run's metrics bit for bit with and without).

It runs at the start of every training run (harness/train/run/shell.py). `HARNESS_MALLOC=off` leaves
glibc's defaults; so does setting any of glibc's own `MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_`,
`MALLOC_TOP_PAD_` (yours are respected). Without glibc (macOS, musl) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

# mallopt parameters (glibc malloc.h)
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
SETTINGS = {M_MMAP_THRESHOLD: 32 << 20, M_TRIM_THRESHOLD: (1 << 31) - 1, M_TOP_PAD: 256 << 20}
# the environment variable glibc reads each of them from at a process's start
ENV_NAMES = {
    M_MMAP_THRESHOLD: "MALLOC_MMAP_THRESHOLD_",
    M_TRIM_THRESHOLD: "MALLOC_TRIM_THRESHOLD_",
    M_TOP_PAD: "MALLOC_TOP_PAD_",
}
GLIBC_ENV = tuple(ENV_NAMES.values())

_state = {"tuned": False}


def _mallopt():
    """glibc's mallopt, or None where there is none."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        fn = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return fn


def tune() -> bool:
    """Apply SETTINGS once per process (see the module's text); True when they are in force."""
    if _state["tuned"]:
        return True
    if os.environ.get("HARNESS_MALLOC", "").lower() == "off" or any(k in os.environ for k in GLIBC_ENV):
        return False
    mallopt = _mallopt()
    if mallopt is None:
        return False
    _state["tuned"] = all(mallopt(param, value) == 1 for param, value in SETTINGS.items())
    return _state["tuned"]


def glibc_env() -> dict[str, str]:
    """SETTINGS as glibc's environment variables: another process (TRL's, in `harness bench --trl-malloc
    ours`) gets the same allocator from its start."""
    return {ENV_NAMES[k]: str(v) for k, v in SETTINGS.items()}


def describe() -> str:
    """One line for a report's header: what a training run started from this process's environment runs its
    allocator with."""
    env = os.environ
    mine = [f"{k}={env[k]}" for k in GLIBC_ENV if k in env]
    if mine:
        return "glibc malloc from " + ", ".join(mine)
    if env.get("HARNESS_MALLOC", "").lower() == "off":
        return "malloc defaults (HARNESS_MALLOC=off)"
    return "glibc malloc tuned (harness/malloc.py)"
