"""Python's cyclic garbage collector, timed inside the steps.

    perf/gc_seconds  seconds in collections of any generation during the step (gc.callbacks)
    perf/gc_full     full (generation 2) collections during the step

Why it is measured: a run's first step builds most of the Python objects it will hold (the modules, the tokenizer,
on CUDA the compiled generation graphs), and a full collection scans all of them. On a lent H200
(benchmarks/README.md, "On a GPU", 2026-11-28) the update of steps 5 and 11 took 1.4-1.7 s instead of 0.15-0.2 s on
SmolLM2-135M and on a 1.17B Llama alike; this clock showed the collector was NOT the cause (0.5 ms of collection in
those steps; 6.5 s in step 0, where torch.compile builds the graphs; 1.3 s in the profiled step). gc.freeze() after
the first step, tried in the same run, left the spikes as they were, so it is not done.
"""

from __future__ import annotations

import gc
import time


class GcClock:
    """Times the collector through gc.callbacks while entered; `take()` returns what accrued since the last take."""

    def __init__(self) -> None:
        self.seconds, self.full, self._t0 = 0.0, 0, None

    def __enter__(self) -> GcClock:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        elif self._t0 is not None:
            self.seconds += time.perf_counter() - self._t0
            self.full += info.get("generation") == 2
            self._t0 = None

    def take(self) -> dict:
        out = {"perf/gc_seconds": self.seconds, "perf/gc_full": float(self.full)}
        self.seconds, self.full = 0.0, 0
        return out
