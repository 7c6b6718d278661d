"""One profiled step per side (`harness bench --profile`): what a GPU engineer reads first, from torch.profiler.

The profiled step runs after the measured ones and is left out of the figures (the profiler slows a step).
summarize_profile gives, for that step:
    cpu_ops       aten operators the host dispatched (aten::*, nested ones included)
    kernels       device kernels launched (CUDA; 0 on a CPU)
    host_syncs    calls that make the host wait for the device: cudaDeviceSynchronize, cudaStreamSynchronize,
                  cudaEventSynchronize and the blocking cudaMemcpy (CUDA; 0 on a CPU). The bench's own
                  torch.cuda.synchronize at each phase edge counts too, on both sides (3-4 a step)
    item_reads    aten::_local_scalar_dense (a tensor's value read on the host: .item(), float(), int(), bool())
    nonzero       aten::nonzero (a host read of the result's size: boolean indexing, torch.nonzero)
    span_s        the step's span in the profiler's clock
    gpu_busy_s    the union of the kernels' intervals (CUDA)
    gpu_idle_share  1 - gpu_busy_s / span_s: the share of the step the GPU had nothing to run (None on a CPU)
    top_ops       the TOP_OPS operators with the most self time (device time on CUDA, host time on a CPU), each
                  [name, calls, self host ms, self device ms]: where a slow step's time went
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from torch.profiler import ProfilerActivity, profile

TOP_OPS = 12
SYNC_CALLS = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy")


@contextmanager
def profiled(out: dict):
    """Profile the block (CPU, and CUDA where torch sees a GPU); its summary goes into `out`."""
    cuda = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    prof = profile(activities=activities)
    with prof:
        yield
    out.update(summarize_profile(prof.events(), cuda))


def busy_seconds(intervals: list[tuple[float, float]]) -> float:
    """Total length (same unit) of the union of (start, end) intervals."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def summarize_profile(events, cuda: bool) -> dict:
    """The figures of the module doc from a profiler's events (torch.autograd.profiler_util.FunctionEvent)."""
    names = [e.name for e in events]
    kernels = [(e.time_range.start, e.time_range.end) for e in events if _on_device(e)]
    starts = [e.time_range.start for e in events]
    ends = [e.time_range.end for e in events]
    span_us = (max(ends) - min(starts)) if events else 0.0
    busy_us = busy_seconds(kernels)
    return {
        "cpu_ops": sum(n.startswith("aten::") for n in names),
        "kernels": len(kernels),
        "host_syncs": sum(n in SYNC_CALLS for n in names),
        "item_reads": names.count("aten::_local_scalar_dense"),
        "nonzero": names.count("aten::nonzero"),
        "span_s": span_us / 1e6,
        "gpu_busy_s": busy_us / 1e6 if cuda else None,
        "gpu_idle_share": (1.0 - busy_us / span_us) if cuda and span_us > 0 else None,
        "top_ops": top_ops(events, cuda),
    }


def top_ops(events, cuda: bool, n: int = TOP_OPS) -> list[list]:
    """[name, calls, self host ms, self device ms] of the n host-side operators with the most self time (device
    time where `cuda`, else host time), summed over their calls."""
    acc: dict[str, list] = {}
    for e in events:
        if _on_device(e):
            continue
        row = acc.setdefault(e.name, [e.name, 0, 0.0, 0.0])
        row[1] += 1
        row[2] += getattr(e, "self_cpu_time_total", 0.0) / 1e3
        row[3] += getattr(e, "self_device_time_total", 0.0) / 1e3  # torch >= 2.4's name (older: self_cuda_...)
    key = 3 if cuda else 2
    return [[r[0], r[1], round(r[2], 3), round(r[3], 3)] for r in sorted(acc.values(), key=lambda r: -r[key])[:n]]


def _on_device(event) -> bool:
    kind = getattr(event, "device_type", None)
    return kind is not None and kind != torch.autograd.DeviceType.CPU
