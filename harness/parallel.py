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

import torch
import torch.distributed as dist

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
