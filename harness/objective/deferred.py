"""Metrics left on the device until a step reads them all at once.

A loss's metrics are scalars computed on the device; turning each into a Python float (`.item()`) makes the
host wait for the device there, in every micro-batch, before its backward is even queued. A `Deferred`
holds the tensors a metric's value comes from and the host arithmetic that finishes it; `read` copies the
tensors of any number of them to the host in one transfer (per device) and finishes each. The host arithmetic
is the one the eager code did after its `.item()`s (a float32 sum read as a Python float, divided by an
int count in Python), so a deferred metric is bit for bit the eager one.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


class Deferred:
    """A metric's value: `finish(*values)` of `tensors`, each read as a list of Python floats (a 0-dim tensor: one
    float, as `.item()` gives it); finish returns a float, or a 0-dim host tensor (read with the others)."""

    __slots__ = ("tensors", "finish")

    def __init__(self, finish: Callable[..., float], *tensors: torch.Tensor):
        self.tensors = tuple(t.detach() for t in tensors)
        self.finish = finish


def scalar(t: torch.Tensor) -> Deferred:
    """float(t) of a 0-dim tensor, later."""
    return Deferred(lambda v: v[0], t)


def mean_of(total: torch.Tensor, count: torch.Tensor) -> Deferred:
    """total / count (count an integer tensor); NaN when count is 0."""
    return Deferred(lambda s, n: float("nan") if int(n[0]) == 0 else s[0] / int(n[0]), total, count)


def read(values):
    """values: a Deferred, a float, or a dict / list of them -> the same with every Deferred finished; the
    tensors of all are copied to the host together (one copy per device)."""
    found: list[Deferred] = []
    _collect(values, found)
    got = _host_values([t for d in found for t in d.tensors])
    done, at = {}, 0
    for d in found:
        n = len(d.tensors)
        done[id(d)] = d.finish(*got[at : at + n])
        at += n
    on_host = [k for k, v in done.items() if isinstance(v, torch.Tensor)]  # finished by torch on the host
    if on_host:
        for k, v in zip(on_host, torch.stack([done[k].double() for k in on_host]).tolist()):
            done[k] = v
    return _finish(values, {k: float(v) for k, v in done.items()})


def _collect(values, found: list[Deferred]) -> None:
    if isinstance(values, Deferred):
        found.append(values)
    elif isinstance(values, dict):
        for v in values.values():
            _collect(v, found)
    elif isinstance(values, (list, tuple)):
        for v in values:
            _collect(v, found)


def _finish(values, done: dict):
    if isinstance(values, Deferred):
        return done[id(values)]
    if isinstance(values, dict):
        return {k: _finish(v, done) for k, v in values.items()}
    if isinstance(values, (list, tuple)):
        return type(values)(_finish(v, done) for v in values)
    return values


def _host_values(tensors: list[torch.Tensor]) -> list[list[float]]:
    """Each tensor's values as Python floats (float64 holds every float32, integer count and flag exactly)."""
    out: list[list[float] | None] = [None] * len(tensors)
    by_device: dict[torch.device, list[int]] = {}
    for i, t in enumerate(tensors):
        by_device.setdefault(t.device, []).append(i)
    for idx in by_device.values():
        flat = torch.cat([tensors[i].reshape(-1).to(torch.float64) for i in idx]).tolist()  # the one read
        at = 0
        for i in idx:
            n = tensors[i].numel()
            out[i] = flat[at : at + n]
            at += n
    return out
