"""FSDP2 (`train.parallel: fsdp`): the run's models sharded over the processes with torch's `fully_shard`.

Each process then holds 1/N of every parameter, of its gradient and of its AdamW moments (DTensors sharded
on dim 0). What the run computes does not change (docs/scale.md, the contract of several processes):

    every decoder layer is one FSDP unit, the rest of the model (embeddings, final norm, head, a value
    head) the root unit; a module without layers (lambda-GRPO's scalar) stays whole on every process and
    its gradient is summed as in data parallel (harness/parallel.py all_reduce_grads);
    the gradients are reduce-scattered as a SUM, not a mean (divide factor 1): the objective already
    divides by the whole mini-batch's denominators, so the sum is the 1-process gradient;
    the optimizer then steps the sharded parameters, with the state it held (a checkpoint's, on a resume)
    cut into this process's shards.

Sharding happens once the run is built and restored (harness/train/run/shell.py): the weights, the
optimizers' states and the frozen reference are loaded whole, then sharded. Checkpoints gather them whole
again (harness/parallel.py full_state), so a checkpoint is the same files whatever the process count or
`train.parallel`, and a run resumes on any of them.

Shapes: a parameter of shape (d0, ...) is held as (ceil(d0 / N), ...) on each of N processes (the last
shard may be shorter or empty).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor, distribute_tensor

from harness import parallel
from harness.train.core.components import Trained

# fp32 gradient reduction whatever the compute precision (train.autocast computes in bf16 inside the forward;
# the parameters FSDP gathers stay fp32, so the sampler and the trainer see the same weights)
MIXED_PRECISION = MixedPrecisionPolicy(param_dtype=None, reduce_dtype=torch.float32)


def layer_classes(module: nn.Module) -> set[str]:
    """Class names of the decoder layers inside `module` (transformers' `_no_split_modules` of every model in it)."""
    names: set[str] = set()
    for m in module.modules():
        names.update(getattr(m, "_no_split_modules", None) or ())
    return names


def shard_module(module: nn.Module) -> bool:
    """fully_shard each decoder layer of `module`, then `module` itself (the root unit); gradients reduced as a
    sum. Returns False (and leaves it whole) for a module without decoder layers."""
    layers = layer_classes(module)
    units = [m for m in module.modules() if type(m).__name__ in layers]
    if not units:
        return False
    for unit in units:
        fully_shard(unit, reshard_after_forward=True, mp_policy=MIXED_PRECISION)
    fully_shard(module, reshard_after_forward=True, mp_policy=MIXED_PRECISION)
    for unit in parallel.sharded_parts(module):
        unit.set_gradient_divide_factor(1.0)  # a sum over processes (the loss has the whole batch's denominators)
        unit.set_force_sum_reduction_for_comms(True)  # SUM, not PREMUL_SUM: gloo has no PREMUL_SUM
    return True


def shard_optimizer_state(state: dict, optimizer: torch.optim.Optimizer) -> dict:
    """A whole optimizer state dict (a 1-process run's, a checkpoint's) -> the same with each tensor of a
    parameter's shape cut into this process's shard of that (now sharded) parameter."""
    params = [p for g in optimizer.param_groups for p in g["params"]]
    out = {"param_groups": state["param_groups"], "state": {}}
    for i, s in state["state"].items():
        p = params[i]
        out["state"][i] = {
            k: distribute_tensor(v, p.device_mesh, p.placements, src_data_rank=None)
            if isinstance(p, DTensor) and isinstance(v, torch.Tensor) and v.dim() > 0 and v.shape == p.shape
            else v
            for k, v in s.items()
        }
    return out


def shard_trained(trained: list[Trained], frozen: list[nn.Module]) -> None:
    """Shard every trained module that has decoder layers (its optimizer moved onto the shards, with its state
    cut alike) and every frozen one (the reference policy)."""
    for t in trained:
        whole, before = t.optimizer.state_dict(), list(t.module.parameters())
        if not shard_module(t.module):
            continue
        sharded = dict(zip(map(id, before), t.module.parameters(), strict=True))  # fully_shard keeps the order
        for group in t.optimizer.param_groups:
            group["params"] = [sharded[id(p)] for p in group["params"]]
        t.optimizer.state.clear()
        t.optimizer.load_state_dict(shard_optimizer_state(whole, t.optimizer))
    for m in frozen:
        shard_module(m)
