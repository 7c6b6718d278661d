"""The rows a training step works on, typed, and the one place that splits them into micro-batches.

Shapes: B rows, T padded response length, S packed prompt+response width, L MoE layers, k experts
per token. `Batch.rows(idx)` selects rows (a mini-batch, a group subset); `micro_batches(size)`
walks them `size` rows at a time: every forward of the trainers over a step's rows goes through
`micro_slices`, so the micro-batch boundaries (and hence the numbers) are defined here once.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, fields, replace

import torch

from harness.models.spans import span_lengths
from harness.parallel import bounds, gather_rows, shard


def micro_slices(n: int, size: int | None) -> Iterator[list[int]]:
    """Row indices 0..n-1 in consecutive runs of `size` (None or 0: one run of all n); none when n = 0."""
    size = size or max(n, 1)
    for s in range(0, n, size):
        yield list(range(s, min(s + size, n)))


@dataclass
class Batch:
    """One step's rows as the update reads them."""

    prompt_ids: list[list[int]]  # B prompt id lists
    response_ids: torch.Tensor  # (B, T) long
    response_mask: torch.Tensor  # (B, T) 1 on the tokens the sampler generated
    mask: torch.Tensor  # (B, T) the loss mask (the objective's, e.g. truncated rows zeroed)
    rollout_logp: torch.Tensor  # (B, T) the sampler's log-probs
    routing: torch.Tensor | None = None  # (B, S, L, k) the rollout's expert choices (MoE), or None
    adv: torch.Tensor | None = None  # (B,) or (B, T)
    old_logp: torch.Tensor | None = None  # (B, T) pi_old; None: the update's first forward is pi_old
    ref_logp: torch.Tensor | None = None  # (B, T) pi_ref
    # what the active modes need beyond these, by name, each with B rows (harness/objective/extensions.py):
    # a value model's predictions at rollout time and its targets (old_values, returns), a reward model's
    # labels (outcomes), each row's group lengths (group_lengths, group_pos), pi_old's top-K (topk_index, ...)
    extras: dict[str, torch.Tensor] = field(default_factory=dict)
    index: list[int] = field(default_factory=list)  # the step's row number of each row (empty: 0..B-1)
    # each row's count of response_mask > 0 and of mask > 0, read from the device once (empty: read at creation):
    # the packing widths and the denominators of every micro-batch then wait on nothing there
    response_lens: list[int] = field(default_factory=list)
    mask_lens: list[int] = field(default_factory=list)
    # each row's span of response_mask and of mask (1 + the last position > 0: harness/models/spans.py), the widths
    # packed for a forward: a multi-turn trajectory's tool tokens (mask 0) lie inside it. Single-turn: the counts
    response_spans: list[int] = field(default_factory=list)
    mask_spans: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.index:
            self.index = list(range(len(self.prompt_ids)))
        lists = (self.response_lens, self.mask_lens, self.response_spans, self.mask_spans)
        if any(len(x) != len(self.prompt_ids) for x in lists):
            self.response_lens, self.mask_lens, self.response_spans, self.mask_spans = row_lengths(
                self.response_mask, self.mask
            )

    def denominators(self) -> tuple[int, int]:
        """(num_seqs, num_tokens) of the rows (objective.aggregation.batch_denominators), from the row lengths."""
        lens = self.mask_lens
        return sum(n > 0 for n in lens), sum(lens)

    @classmethod
    def from_rollout(cls, r, mask: torch.Tensor, device=None) -> Batch:
        """The rows of a RolloutBatch `r` with the loss mask `mask` (B, T); device: where the
        tensors the loss reads go (None: where they are)."""

        def to(t):
            return t if device is None else t.to(device)

        return cls(
            r.prompt_ids, to(r.response_ids), r.response_mask, to(mask), to(r.sampler_logp), r.extras.get("routing")
        )

    def __len__(self) -> int:
        return len(self.prompt_ids)

    def rows(self, idx: list[int]) -> Batch:
        """The rows `idx` (positions in this batch), every field selected alike: a run of consecutive rows as a
        view (a micro-batch, a shard), others by one index copied to each device without waiting."""
        take = _row_selector(idx)
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if v is None:
                out[f.name] = None
            elif isinstance(v, list):
                out[f.name] = [v[i] for i in idx]
            elif isinstance(v, dict):
                out[f.name] = {k: take(t) for k, t in v.items()}
            else:
                out[f.name] = take(v)
        return Batch(**out)

    def shard(self) -> Batch:
        """This process's contiguous share of the rows (harness/parallel.py shard; all of them on one process)."""
        mine = shard(len(self))
        return self if len(mine) == len(self) else self.rows(list(mine))

    def micro_batches(self, size: int | None) -> Iterator[Batch]:
        """The batch `size` rows at a time (None: whole)."""
        for idx in micro_slices(len(self), size):
            yield self.rows(idx)

    def my_micro_batches(self, size: int | None, lockstep: bool = False) -> list[Batch | None]:
        """This process's share of the rows (`shard`), `size` rows at a time (None: its whole share). lockstep
        (FSDP): followed by None up to the count of the process with the most, so that every process runs
        the same number of forwards."""
        parts: list[Batch | None] = list(self.shard().micro_batches(size))
        if lockstep:
            b = bounds(len(self))
            widest = max(b[r + 1] - b[r] for r in range(len(b) - 1))
            parts += [None] * (len(list(micro_slices(widest, size or widest))) - len(parts))
        return parts

    def with_(self, **changes) -> Batch:
        if "mask" in changes or "response_mask" in changes:  # their row lengths are read again
            changes = {"response_lens": [], "mask_lens": [], "response_spans": [], "mask_spans": [], **changes}
        return replace(self, **changes)


def row_lengths(response_mask: torch.Tensor, mask: torch.Tensor) -> list[list[int]]:
    """Each row's count of response_mask > 0 and of mask > 0, and the span of each (harness/models/spans.py), read
    to the host in one copy."""
    rows = [(response_mask > 0).sum(-1).to(mask.device), (mask > 0).sum(-1)]
    rows += [span_lengths(response_mask).to(mask.device), span_lengths(mask)]
    return torch.stack(rows).tolist()


def _row_selector(idx: list[int]):
    """t -> t's rows `idx`: a slice (a view) for consecutive rows, else index_select by an index sent to t's
    device once per device without waiting (list indexing would copy it there and wait, for every tensor)."""
    if idx and idx == list(range(idx[0], idx[0] + len(idx))):
        return lambda t: t[idx[0] : idx[0] + len(idx)]
    host, on = torch.tensor(idx, dtype=torch.long), {}

    def take(t: torch.Tensor) -> torch.Tensor:
        if t.device not in on:
            on[t.device] = host.to(t.device, non_blocking=True)
        return t.index_select(0, on[t.device])

    return take


def gather_shard(outs: list[torch.Tensor], whole: Batch) -> torch.Tensor:
    """(B, T): a forward's outputs on this process's rows of `whole` (whole.shard(), micro-batch by micro-batch)
    -> on every row of `whole`, gathered from every process in row order (one process: their concatenation)."""
    local = torch.cat(outs) if outs else whole.rollout_logp.new_zeros((0, whole.response_ids.shape[1]))
    return gather_rows(local, len(whole))
