"""Rollout/train mismatch metrics of one step (docs/studies.md (c); GSPO 2507.18071, R3 2510.11370).

Shapes: B rows, T response length, b rows of one micro-batch, W its packed width
(harness.models.logprobs.pack), L MoE layers, k experts per token.

Log-prob mismatch, on the response tokens the loss sees (mask > 0), between the sampler
(rollout_logp: what the rollout engine drew the token with) and the trainer's OLD policy
(train_logp: the policy at the start of the update, recomputed by the training forward):
    mismatch/k3_kl          mean_t k3 = (r - 1) - log r,  r = p_train / p_rollout
                            (Schulman's k3 with samples from the rollout: an unbiased, >= 0
                            estimate of KL(rollout || train) per token)
    mismatch/max_abs_dp     max_t |p_train - p_rollout| of the sampled tokens
    mismatch/ratio_gt2_frac share of tokens with r > 2 or r < 1/2 (|log r| > log 2)
Router mismatch (MoE), as sets of the k experts per (layer, token), over the prompt and
response positions both forwards routed:
    router/disagree_rollout_train  share of the rollout's (layer, token, slot) choices that are
                            not among the experts the training forward of the old policy
                            actually used (its router's own top-k, or the replayed choices
                            under objective.routing_replay -- which makes this exactly 0)
    router/disagree_old_new share of the old policy's own (layer, token, slot) choices not among
                            the updated policy's own top-k on the same batch (one extra no-grad
                            forward after the update, under the same replay as training)
"""

from __future__ import annotations

import math

import torch

from harness.models.logprobs import response_logprobs
from harness.objective.deferred import Deferred, read, scalar
from harness.parallel import full_params, gather_objects, world
from harness.train.core.batch import Batch
from harness.train.core.routing import capture_routing, one_forward, set_disagreement

LOG2 = math.log(2.0)


def routed_positions(prompt_ids: list[list[int]], mask: torch.Tensor, width: int) -> torch.Tensor:
    """(b, W) bool: the positions of a packed forward that hold a prompt or response token."""
    lens = torch.tensor([len(p) for p in prompt_ids]) + mask.detach().cpu().sum(-1).long()
    return torch.arange(width).unsqueeze(0) < lens.unsqueeze(1)


def _fit(routing: torch.Tensor, width: int) -> torch.Tensor:
    """(b, S, L, k) -> (b, width, L, k), cut or padded with -1."""
    if routing.shape[1] < width:
        return torch.nn.functional.pad(routing, (0, 0, 0, 0, 0, width - routing.shape[1]), value=-1)
    return routing[:, :width]


class MismatchStats:
    """Accumulates the mismatch metrics over the micro-batches of the old policy's forwards."""

    def __init__(self):
        self.tokens = 0.0
        self.k3_sum = 0.0
        self.gt2 = 0.0
        self.max_dp = 0.0
        self.rt_diff = self.rt_total = 0.0
        self.on_diff = self.on_total = 0.0
        # per captured forward: rows, own choices (b, W, L, k), valid positions (b, W), packed mask (b, T)
        self.old_routing: list[tuple[list[int], torch.Tensor, torch.Tensor, torch.Tensor]] = []
        # per add_logprobs, still on the device: (tokens, k3 sum, count of r > 2 or < 1/2, max |dp|): read at once
        self.pending: list[tuple[int, Deferred, Deferred, Deferred]] = []

    @torch.no_grad()
    def add_logprobs(
        self,
        train_logp: torch.Tensor,
        rollout_logp: torch.Tensor,
        mask: torch.Tensor,
        tokens: int | None = None,
    ) -> None:
        """(b, T) each: the old policy's log-probs, the sampler's, the loss mask; tokens: the count of mask > 0 if
        known on the host (sum of Batch.mask_lens; None: read from the device). The sums stay on the device until
        `result` (or `reduce`)."""
        keep = (mask > 0).reshape(-1)
        n = int(keep.sum()) if tokens is None else tokens
        if n == 0:
            return
        at = torch.nonzero_static(keep, size=n).squeeze(1)  # the tokens x[mask > 0] takes, in its order

        def masked(x: torch.Tensor) -> torch.Tensor:
            return x.reshape(-1).index_select(0, at)

        log_r = masked(train_logp.detach().float() - rollout_logp.float())  # log r, r = p_train / p_rollout
        k3 = scalar((torch.expm1(log_r) - log_r).sum())  # k3 = (r - 1) - log r
        gt2 = scalar((log_r.abs() > LOG2).sum())  # r > 2 or r < 1/2
        dp = masked(train_logp.detach().float().exp() - rollout_logp.float().exp()).abs()  # |p_train - p_rollout|
        self.pending.append((n, k3, gt2, scalar(dp.max())))

    def mark(self) -> int:
        """How many add_logprobs calls are held: `drop_after` forgets those after."""
        return len(self.pending)

    def drop_after(self, mark: int) -> None:
        del self.pending[mark:]

    def _settle(self) -> None:
        """The held sums read from the device in one copy and added in the order they came."""
        for n, k3, gt2, dp in read(self.pending):
            self.tokens += n
            self.k3_sum += k3
            self.gt2 += gt2
            self.max_dp = max(self.max_dp, dp)
        self.pending = []

    def add_routing(
        self,
        rows: list[int],
        prompt_ids: list[list[int]],
        mask: torch.Tensor,
        calls,
        rollout_routing: torch.Tensor | None,
    ) -> None:
        """The routing `capture_routing` saw in one forward of the old policy on `rows`
        (mask: the response mask that forward packed); rollout_routing: (b, S, L, k) or None."""
        own, used = one_forward(calls, len(rows))  # (b, W, L, k) each
        own, used = own.cpu(), used.cpu()
        valid = routed_positions(prompt_ids, mask, own.shape[1])  # (b, W)
        if rollout_routing is not None:
            rr = _fit(rollout_routing.cpu(), own.shape[1])
            v = valid.unsqueeze(-1) & (rr[..., 0] >= 0)  # (b, W, L)
            d, n = set_disagreement(rr, used, v)
            self.rt_diff, self.rt_total = self.rt_diff + d, self.rt_total + n
        self.old_routing.append((list(rows), own, valid, mask.detach()))

    def add_new_routing(self, i: int, calls) -> None:
        """The updated policy's routing on the rows of the i-th `add_routing` call."""
        rows, old_own, valid, _ = self.old_routing[i]
        new_own, _ = one_forward(calls, len(rows))
        d, n = set_disagreement(old_own, new_own.cpu(), valid.unsqueeze(-1).expand(old_own.shape[:-1]))
        self.on_diff, self.on_total = self.on_diff + d, self.on_total + n

    SUMS = ("tokens", "k3_sum", "gt2", "rt_diff", "rt_total", "on_diff", "on_total")

    def reduce(self) -> None:
        """On N processes (each fed by the forwards of its rows): every count summed over the processes, the
        max over them (harness/parallel.py); a no-op on one."""
        self._settle()
        if world() == 1:
            return
        parts = gather_objects({k: getattr(self, k) for k in (*self.SUMS, "max_dp")})
        for k in self.SUMS:
            setattr(self, k, sum(p[k] for p in parts))
        self.max_dp = max(p["max_dp"] for p in parts)

    def result(self) -> dict[str, float]:
        self._settle()
        out = {}
        if self.tokens:
            out["mismatch/k3_kl"] = self.k3_sum / self.tokens
            out["mismatch/max_abs_dp"] = self.max_dp
            out["mismatch/ratio_gt2_frac"] = self.gt2 / self.tokens
        if self.rt_total:
            out["router/disagree_rollout_train"] = self.rt_diff / self.rt_total
        if self.on_total:
            out["router/disagree_old_new"] = self.on_diff / self.on_total
        return out


@torch.no_grad()
def router_old_new(model, batch: Batch, stats: MismatchStats, pad_id: int, temperature: float, replay: bool) -> None:
    """After the update: one no-grad forward of the updated policy over the same row groups
    the old policy's routing was captured on (same packing), under the same replay."""
    with full_params(model):  # FSDP: the whole weights, for this process's own number of forwards
        for i, (rows, _, _, mask) in enumerate(stats.old_routing):
            part = batch.rows(rows)
            with capture_routing(model) as calls:
                response_logprobs(
                    model,
                    part.prompt_ids,
                    part.response_ids,
                    mask,
                    pad_id,
                    temperature,
                    routing=part.routing if replay else None,
                )
            stats.add_new_routing(i, calls)
