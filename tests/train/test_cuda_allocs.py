"""perf/cuda_* (harness/train/run/cuda_allocs.py): the allocator's counts as differences step to step on CUDA,
nothing on a CPU. No GPU here: torch.cuda's counters are replaced by a scripted allocator (the only mock), whose
counts are the ones torch.cuda.memory_stats() names."""

import torch

from harness.train.run.cuda_allocs import AllocClock


def test_a_cpu_run_records_nothing():
    clock = AllocClock("cpu")
    assert clock.take() == {} and clock.take() == {}


def test_cuda_counts_are_taken_as_differences(monkeypatch):
    stats = {"num_device_alloc": 10, "num_device_free": 2, "num_alloc_retries": 0}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "memory_stats", lambda: dict(stats))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda: 3 * 2**20)
    clock = AllocClock("cuda")  # counts before the first step are not the first step's
    stats.update(num_device_alloc=17, num_device_free=5, num_alloc_retries=1)
    first = clock.take()
    assert first == {
        "perf/cuda_mallocs": 7.0,
        "perf/cuda_frees": 3.0,
        "perf/cuda_alloc_retries": 1.0,
        "perf/cuda_reserved_mb": 3.0,
    }
    stats.update(num_device_alloc=18)
    second = clock.take()
    assert (second["perf/cuda_mallocs"], second["perf/cuda_frees"], second["perf/cuda_alloc_retries"]) == (
        1.0,
        0.0,
        0.0,
    )
