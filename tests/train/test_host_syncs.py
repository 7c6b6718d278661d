"""The update waits on the device a constant number of times, whatever its rows and micro-batches
(harness/train/rl/update.py): nothing inside the micro-batch loop reads a device value (the packing widths and
denominators come from the batch's lengths, read once; the metrics and the losses stay on the device and are read
once, after the last backward). benchmarks/host_syncs.py counts a whole step's, against TRL's.

A sync is counted as benchmarks/host_syncs.py counts it: an aten op that makes the host wait for the device's
value (`_local_scalar_dense`: .item(), float(t), bool(t); `nonzero`, `masked_select`, `_unique2`: their output's
size), or a call of Tensor.tolist / numpy / cpu. Not ours, and not counted here: transformers' check of the
attention mask in every forward (masking_utils._ignore_causal_mask_sdpa: may SDPA skip the mask; 1 or 2 reads a forward,
which every trainer handing transformers a padding mask pays, TRL's too; the bench counts them on both sides)."""

import contextlib

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import masking_utils

from harness.train.core.batch import Batch
from harness.train.core.components import Trained
from harness.train.core.mismatch import MismatchStats
from harness.train.core.step_context import StepContext
from harness.train.rl import update as update_mod
from harness.train.rl.update import policy_update
from tests.train.test_update_unit import PAD, _cfg, _model

SYNC_OPS = {"_local_scalar_dense", "nonzero", "masked_select", "_unique2"}


class SyncCounter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.n, self.paused = 0, False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.__name__.split(".")[0] in SYNC_OPS and not self.paused:
            self.n += 1
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def counting_syncs(monkeypatch):
    counter = SyncCounter()
    for name in ("tolist", "numpy", "cpu"):
        real = getattr(torch.Tensor, name)

        def method(t, *a, _real=real, **k):
            counter.n += 1
            return _real(t, *a, **k)

        monkeypatch.setattr(torch.Tensor, name, method)

    def uncounted(*a, _real=masking_utils._ignore_causal_mask_sdpa, **k):  # the mask check (the docstring)
        counter.paused = True
        try:
            return _real(*a, **k)
        finally:
            counter.paused = False

    monkeypatch.setattr(masking_utils, "_ignore_causal_mask_sdpa", uncounted)
    with counter:
        yield counter
    monkeypatch.undo()


def _rows(n: int) -> Batch:
    g = torch.Generator().manual_seed(n)
    prompts = [[1, 5 + i % 7, 6] for i in range(n)]
    lengths = torch.randint(1, 6, (n,), generator=g)
    mask = (torch.arange(5).unsqueeze(0) < lengths.unsqueeze(1)).float()  # (n, 5), rows of 1 to 5 tokens
    resp = torch.randint(3, 30, (n, 5), generator=g) * mask.long()
    lp = -torch.rand(n, 5, generator=g) * mask
    adv = torch.randn(n, generator=g)
    return Batch(prompts, resp, mask, mask, lp, adv=adv)


def _update_syncs(monkeypatch, rows: int, micro: int, objective: str = "grpo") -> int:
    """Syncs of one policy_update (a single pass, SGD: no optimizer state) over `rows` rows in micro-batches of
    `micro`; the batch (and its lengths, read once a step) made before."""
    cfg = _cfg(
        f"objective.preset={objective}",
        "train.mini_batches=1",
        f"train.prompts_per_step={rows // 2}",
        f"train.micro_batch_size={micro}",
        "train.grad_clip=1.0",
    )
    batch, model = _rows(rows), _model()
    policy = Trained("policy", model, torch.optim.SGD(model.parameters(), lr=0.1))
    with counting_syncs(monkeypatch) as counter:  # a single pass: the mismatch metrics are fed here too
        sc = StepContext(cfg, policy, (), None, torch.device("cpu"), PAD, True, MismatchStats())
        policy_update(sc, batch, torch.Generator().manual_seed(0))
    return counter.n


@pytest.mark.parametrize("objective, syncs", [("grpo", 4), ("gspo", 5)])
def test_an_update_waits_on_the_device_the_same_few_times_for_any_rows_and_micro_batches(monkeypatch, objective, syncs):
    counts = {
        (rows, micro): _update_syncs(monkeypatch, rows, micro, objective)
        for rows, micro in ((4, 4), (4, 1), (8, 2), (16, 1))  # 1 to 16 micro-batches of 1 to 4 rows
    }
    # per update: the shuffle's order (a host tensor), the losses' finiteness, the metrics, the grad norm; GSPO's
    # sequence means are finished on the host by torch (their mean over the non-empty rows), read in one more
    assert set(counts.values()) == {syncs}, counts


def test_a_read_inside_the_micro_batch_loop_is_caught(monkeypatch):
    """The count is not blind: an .item() added to every micro-batch's loss (as `float(loss)` for a log line
    would) makes it grow with the micro-batches."""
    real = update_mod.forward_loss

    def reading(*a, **k):
        loss, metrics = real(*a, **k)
        loss.item()
        return loss, metrics

    monkeypatch.setattr(update_mod, "forward_loss", reading)
    assert _update_syncs(monkeypatch, 4, 4) == 4 + 1
    monkeypatch.setattr(update_mod, "forward_loss", reading)
    assert _update_syncs(monkeypatch, 16, 1) == 4 + 16


def test_the_gpu_grad_norm_formula_is_the_float64_total():
    """On CUDA the grad norm is torch._foreach_norm in float64 (no float64 copy of a gradient), squared and summed
    (components.squared_norm); on a CPU each gradient's float64 copy squared and summed, the recorded bits. Here
    the GPU's formula on CPU tensors: the same total up to float64 rounding, and the same float32 clip factor."""
    g = torch.Generator().manual_seed(0)
    grads = [torch.randn(n, generator=g) * s for n, s in ((5000, 1e-3), (37, 10.0), (1, 0.5), (20000, 1e-6))]
    exact = sum(t.double().pow(2).sum() for t in grads)
    fused = torch.stack(torch._foreach_norm(grads, 2.0, dtype=torch.float64)).pow(2).sum()
    assert fused.dtype == torch.float64 and float(fused) == pytest.approx(float(exact), rel=1e-14)
    coef = [torch.tensor(1.0 / (float(x) ** 0.5 + 1e-6), dtype=torch.float32) for x in (exact, fused)]
    assert torch.equal(coef[0], coef[1])
