"""One run on several processes: the process group and the few collectives a step needs.

A run launched by `torchrun --nproc_per_node N` (or `harness train CONFIG --nproc N`, which calls
it) has N processes, each with the environment torchrun sets (RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT). `init_from_env` joins them into one process group: `gloo` on CPU,
`nccl` on CUDA. With one process (no WORLD_SIZE, or WORLD_SIZE=1) nothing here communicates and
every helper returns its input: the single-process run computes exactly what it did before.

The contract (docs/scale.md): an update does not depend on how many processes computed it.
Rows are split into contiguous shards (`shard`), a group of G rows is never split at generation
(harness/rollout/sharded.py), every no-grad forward's outputs are gathered back into the whole
batch (`gather_rows`), and the gradients of the rows each process back-propagated are summed
(`all_reduce_grads`): the objective divides by the whole mini-batch's denominators, so the sum is
the 1-process gradient (up to the order of a float sum).

Shapes: B rows of a batch; a shard holds B_r rows, sum_r B_r = B.
"""

from __future__ import annotations

import datetime
import os
from contextlib import contextmanager

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FSDPModule
from torch.distributed.tensor import DTensor

TIMEOUT_MINUTES = 60  # a collective waits this long (rank 0 may build a warm start while the others wait)


def world() -> int:
    """Number of processes of the run (1 when it is not distributed)."""
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def rank() -> int:
    """This process's rank (0 when it is not distributed)."""
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def is_main() -> bool:
    """Rank 0: the process that writes the run directory, the tracker and prints the steps."""
    return rank() == 0


def launched_world() -> int:
    """WORLD_SIZE torchrun set for this process (1 when it did not launch it)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def init_from_env(device: torch.device) -> None:
    """Join torchrun's process group (gloo on CPU, nccl on CUDA) when WORLD_SIZE > 1; a no-op otherwise."""
    if launched_world() <= 1 or dist.is_initialized():
        return
    backend = "nccl" if device.type == "cuda" else "gloo"
    if device.type == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend, timeout=datetime.timedelta(minutes=TIMEOUT_MINUTES))


def barrier() -> None:
    if world() > 1:
        dist.barrier()


def bounds(n: int, parts: int | None = None) -> list[int]:
    """Shard boundaries of n items over `parts` (default: the world): shard r is [b[r], b[r+1]), sizes differ by <= 1."""
    parts = parts or world()
    return [n * r // parts for r in range(parts + 1)]


def shard(n: int) -> range:
    """This process's contiguous share of n items (all of them on one process)."""
    b = bounds(n)
    return range(b[rank()], b[rank() + 1])


def map_shards(fn, items: list) -> list:
    """fn (a list -> a list of as many results) over this process's contiguous shard of items, the results of
    every process gathered back in the items' order: each process computes its own rows (one process: fn(items))."""
    if world() == 1:
        return fn(items)
    mine = shard(len(items))
    parts = gather_objects(fn([items[i] for i in mine]))
    return [x for part in parts for x in part]


def gather_objects(obj) -> list:
    """[obj of rank 0, obj of rank 1, ...] on every process (pickled; for small things)."""
    if world() == 1:
        return [obj]
    out = [None] * world()
    dist.all_gather_object(out, obj)
    return out


def broadcast_object(obj):
    """Rank 0's obj, on every process."""
    if world() == 1:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def _padded_gather(local: torch.Tensor, n: int) -> list[torch.Tensor]:
    """Every process's rows of a batch of n rows (this one's `local`, rows shard(n)), in rank order."""
    b = bounds(n)
    width = max(b[r + 1] - b[r] for r in range(world()))
    pad = torch.zeros((width - local.shape[0], *local.shape[1:]), dtype=local.dtype, device=local.device)
    buf = torch.cat([local.detach(), pad]).contiguous()
    if buf.device.type == "cpu" or dist.get_backend() == "nccl":
        parts = [torch.empty_like(buf) for _ in range(world())]
        dist.all_gather(parts, buf)
    else:  # a CUDA tensor under gloo: gather on the CPU
        parts = [torch.empty_like(buf, device="cpu") for _ in range(world())]
        dist.all_gather(parts, buf.cpu())
        parts = [p.to(local.device) for p in parts]
    return [parts[r][: b[r + 1] - b[r]] for r in range(world())]


def gather_rows(local: torch.Tensor, n: int) -> torch.Tensor:
    """(B_r, ...) this process's rows -> (B, ...) the whole batch (B = n), identical on every process."""
    if world() == 1:
        return local
    return torch.cat(_padded_gather(local, n))


def gather_rows_keep_grad(local: torch.Tensor, n: int) -> torch.Tensor:
    """gather_rows whose own rows keep their autograd graph (the others' are constants): a loss of the
    whole batch then back-propagates into this process's rows only, and summing every process's
    gradient (all_reduce_grads) gives the gradient of the loss."""
    if world() == 1:
        return local
    parts = _padded_gather(local, n)
    parts[rank()] = local
    return torch.cat(parts)


def all_reduce_grads(modules: list[torch.nn.Module]) -> None:
    """Sum every trained parameter's gradient over the processes (torch.distributed.all_reduce on one
    flat buffer per module, as DDP's buckets do once per optimizer step). A parameter no process gave
    a gradient keeps None (AdamW skips it, as in the 1-process run)."""
    if world() == 1:
        return
    for module in modules:
        if is_sharded(module):  # FSDP2 reduce-scattered its gradients (summed: sharding.py) in the backward
            continue
        params = [p for p in module.parameters() if p.requires_grad]
        if not params:
            continue
        has = torch.tensor([p.grad is not None for p in params], dtype=torch.float32)
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
        if flat.device.type == "cuda" and dist.get_backend() != "nccl":
            flat = flat.cpu()
        dist.all_reduce(flat)
        dist.all_reduce(has, op=dist.ReduceOp.MAX)
        at = 0
        for p, h in zip(params, has.tolist()):
            n = p.numel()
            p.grad = flat[at : at + n].view_as(p).to(p.device).clone() if h else None
            at += n


# ---------------------------------------------------------------------------------- FSDP2 (train.parallel=fsdp)
# A module sharded by torch's fully_shard (harness/train/core/sharding.py) holds only its share of every
# parameter (a DTensor). Its forwards all-gather each layer's parameters, so every process must run the same
# forwards in the same order: the update does (harness/train/rl/update.py pads the micro-batches); the
# forwards whose count differs per process (generation, the no-grad forwards over this process's rows) run
# inside `full_params`, and whatever reads the weights (checkpoints, a rollout engine's sync) reads
# `full_state`'s whole tensors. On unsharded modules every helper here is a no-op.


def sharded_parts(module: torch.nn.Module) -> list[FSDPModule]:
    """The FSDP2 units of `module` (itself and its layers), in module order; [] when it is not sharded (or not a
    module: a LoRA policy's reference, harness/models/lora.py AdaptersOff)."""
    if not isinstance(module, torch.nn.Module):
        return []
    return [m for m in module.modules() if isinstance(m, FSDPModule)]


def is_sharded(module: torch.nn.Module) -> bool:
    return isinstance(module, FSDPModule)


@contextmanager
def full_params(*modules: torch.nn.Module | None):
    """Within the block the sharded `modules` hold their whole parameters (one all-gather of each unit on
    entry, a reshard on exit), so each process may run forwards of its own number and shape (no
    collective in them). A no-op for unsharded modules. Memory: the whole parameters for the block."""
    units = [u for m in modules if m is not None for u in sharded_parts(m)]
    for u in units:
        u.unshard()
        u.set_reshard_after_forward(False, recurse=False)
    try:
        yield
    finally:
        for u in units:
            u.set_reshard_after_forward(True, recurse=False)
            u.reshard()


def full_tensor(t: torch.Tensor) -> torch.Tensor:
    """A DTensor's whole tensor (all-gathered: every process must call it in the same order); `t` otherwise."""
    return t.full_tensor() if isinstance(t, DTensor) else t


def map_tensors(obj, fn, other=lambda x: x):
    """`obj` (a state dict, an optimizer's, nested dicts, lists and tuples) with fn(t) in place of every tensor t,
    called once per tensor object (the same object twice gives one result: a tied weight in
    `state_dict(keep_vars=True)`), and other(x) in place of anything else (default: x itself)."""
    seen: dict[int, object] = {}

    def walk(x):
        if isinstance(x, torch.Tensor):
            if id(x) not in seen:
                seen[id(x)] = fn(x)
            return seen[id(x)]
        if isinstance(x, dict):
            return {k: walk(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return type(x)(walk(v) for v in x)
        return other(x)

    return walk(obj)


def full_state(obj, keep: bool = True):
    """`obj` (a state dict, an optimizer's, nested dicts and lists) with every DTensor replaced by its whole
    tensor on the CPU, in one walk every process takes alike (map_tensors: a tied weight's DTensor gathered
    once). keep=False (a process that writes nothing): the whole tensors are dropped as they come."""

    def whole(t: torch.Tensor):
        if not isinstance(t, DTensor):
            return t
        with torch.no_grad():
            gathered = t.full_tensor()
        return gathered.detach().cpu() if keep else None

    return map_tensors(obj, whole)


def set_gradient_sync(module: torch.nn.Module, on: bool) -> None:
    """FSDP2: whether this backward reduce-scatters the gradients (off: they accumulate unsharded until the
    backward that has it on, as DDP's no_sync). A no-op for unsharded modules."""
    if is_sharded(module):
        module.set_requires_gradient_sync(on)
