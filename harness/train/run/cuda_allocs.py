"""The CUDA caching allocator's work inside the steps, from torch.cuda.memory_stats() (counts since the process
started, taken as differences step to step):

    perf/cuda_mallocs        cudaMalloc calls during the step (the allocator found no cached block of the size)
    perf/cuda_frees          cudaFree calls during the step (it released cached blocks, e.g. to retry a malloc)
    perf/cuda_alloc_retries  allocations that failed, freed the whole cache and retried (each a device sync and a
                             burst of cudaFree/cudaMalloc: a known cause of a step that takes seconds)
    perf/cuda_reserved_mb    memory the allocator holds at the end of the step

Why it is measured: on a lent H200 (benchmarks/README.md, "On a GPU", 2026-11-28) our update took 1.4-1.7 s at steps
5 and 11 instead of 0.13-0.35 s, on two models that share the workload's prompts (so the same prompt widths a step);
Python's collector was ruled out (gc_pauses.py). A step whose batch is wider than any before asks the allocator for
blocks of new sizes; these counts, beside perf/batch_width, say whether the slow steps are those. On a CPU (no such
allocator) none of these keys is recorded.
"""

from __future__ import annotations

import torch

COUNTS = {
    "perf/cuda_mallocs": "num_device_alloc",
    "perf/cuda_frees": "num_device_free",
    "perf/cuda_alloc_retries": "num_alloc_retries",
}


class AllocClock:
    """`take()`: the allocator's counts since the last take (COUNTS) and its reserved memory, on CUDA; {} elsewhere."""

    def __init__(self, device: torch.device | str) -> None:
        self.on = torch.device(device).type == "cuda" and torch.cuda.is_available()
        self._last = self._counts() if self.on else {}

    def _counts(self) -> dict[str, int]:
        stats = torch.cuda.memory_stats()
        return {key: int(stats.get(name, 0)) for key, name in COUNTS.items()}

    def take(self) -> dict:
        if not self.on:
            return {}
        now = self._counts()
        out = {key: float(now[key] - self._last[key]) for key in COUNTS}
        out["perf/cuda_reserved_mb"] = torch.cuda.memory_reserved() / 2**20
        self._last = now
        return out
