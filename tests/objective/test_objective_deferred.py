"""Metrics left on the device and read at once (harness/objective/deferred.py): the same floats, bit for bit, as
the eager `.item()`s they replace, from one device->host copy however many there are."""

import math

import torch

from harness.objective.aggregation import masked_mean, seq_mean
from harness.objective.deferred import Deferred, mean_of, read, scalar


def _eager_masked_mean(x, mask):  # the formula before deferral
    m = mask > 0
    n = int(m.sum().item())
    return float("nan") if n == 0 else float(torch.where(m, x, torch.zeros_like(x)).sum().item() / n)


def _eager_seq_mean(x, mask):
    m = mask > 0
    lengths = m.sum(-1)
    has = lengths > 0
    if not bool(has.any()):
        return float("nan")
    return float((torch.where(m, x, torch.zeros_like(x)).sum(-1)[has] / lengths[has].to(x.dtype)).mean().item())


def test_deferred_means_are_the_eager_floats_bit_for_bit():
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        x = torch.randn(7, 13, generator=g) * 10 ** torch.randint(-3, 4, (1,), generator=g).item()
        mask = (torch.rand(7, 13, generator=g) > 0.4).float()
        mask[torch.randint(0, 7, (1,), generator=g)] = 0  # a row without tokens
        assert masked_mean(x, mask) == _eager_masked_mean(x, mask)
        assert seq_mean(x, mask) == _eager_seq_mean(x, mask)
    empty = torch.zeros(2, 3)
    assert math.isnan(masked_mean(torch.ones(2, 3), empty)) and math.isnan(seq_mean(torch.ones(2, 3), empty))


def test_read_finishes_nested_values_in_one_copy(monkeypatch):
    calls = []
    real = torch.Tensor.tolist
    monkeypatch.setattr(torch.Tensor, "tolist", lambda t: calls.append(t.shape) or real(t))
    t = torch.tensor([1.5, 2.0, 4.0])
    values = {
        "a": scalar(t.sum()),
        "b": [mean_of(t.sum(), torch.tensor(3)), 0.25],
        "c": (Deferred(lambda v: max(v), t), mean_of(t.sum(), torch.tensor(0))),
    }
    out = read(values)
    assert out["a"] == 7.5 and out["b"] == [2.5, 0.25] and out["c"][0] == 4.0 and math.isnan(out["c"][1])
    assert len(calls) == 1  # every tensor of every value in one read
