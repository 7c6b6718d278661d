"""Rollout-side metrics (docs/objective.md, "Metrics") and the per-step accumulator of update metrics."""

from __future__ import annotations

from collections import defaultdict

import torch

from harness.objective.aggregation import token_weights
from harness.objective.deferred import read
from harness.train.core.episode import Episode


def _mean(x: torch.Tensor) -> float:
    return float(x.float().mean()) if x.numel() else float("nan")


def rollout_metrics(ep: Episode, prefix: str = "") -> dict[str, float]:
    """reward/*, length/* (correct and incorrect separately), groups/* of one episode; a dataset task's
    rewards each as reward/<name> (unweighted mean) and reward/timeouts (calls over the time limit per completion)."""
    r = ep.rewards
    lengths = ep.rollout.lengths
    correct = ep.correct
    G = ep.group_size
    groups_std = r.view(-1, G).std(dim=1, unbiased=False) if G > 1 else torch.zeros(len(ep.problems))
    len_std = lengths.float().view(-1, G).std(dim=1, unbiased=False) if G > 1 else torch.zeros(len(ep.problems))
    parts = {
        f"{prefix}reward/{name}": _mean(torch.tensor([s.parts.get(name, 0.0) for s in ep.scores]))
        for name in dict.fromkeys(k for s in ep.scores for k in s.parts)
    }  # a dataset task's named rewards
    return {
        **parts,
        f"{prefix}reward/mean": _mean(r),
        f"{prefix}reward/std": float(r.std(unbiased=False)) if r.numel() else float("nan"),
        f"{prefix}reward/accuracy": _mean(correct),
        f"{prefix}reward/format": _mean(torch.tensor([s.format for s in ep.scores])),
        f"{prefix}reward/overlong": _mean(ep.overlong),
        f"{prefix}groups/std_mean": _mean(groups_std),
        f"{prefix}length/mean": _mean(lengths),
        f"{prefix}length/correct": _mean(lengths[correct]),
        f"{prefix}length/incorrect": _mean(lengths[~correct]),
        f"{prefix}length/truncated_frac": _mean(ep.rollout.truncated),
        f"{prefix}length/group_std_mean": _mean(len_std),  # spread of lengths within a group (tokens)
        **turn_metrics(ep, prefix),
    }


def turn_metrics(ep: Episode, prefix: str = "") -> dict[str, float]:
    """turns/* of multi-turn trajectories (harness/rollout/turns.py extras), {} for single-turn rows: per
    trajectory, the model's turns, the tool calls, the tool errors (failed or unparsed calls), the observation
    tokens and the observations cut at rollout.max_tool_tokens; and turns/model_frac, the model's share of the
    batch's trajectory tokens (model / (model + observation))."""
    x = ep.rollout.extras
    if "turns" not in x:
        return {}
    model, obs = float(ep.rollout.response_mask.sum()), float(x["obs_tokens"].sum())
    return {
        f"{prefix}turns/mean": _mean(x["turns"]),
        f"{prefix}turns/tool_calls": _mean(x["tool_calls"]),
        f"{prefix}turns/tool_errors": _mean(x["tool_errors"]),
        f"{prefix}turns/obs_tokens": _mean(x["obs_tokens"]),
        f"{prefix}turns/obs_truncated": _mean(x["obs_truncated"]),
        f"{prefix}turns/model_frac": model / (model + obs) if model + obs else float("nan"),
    }


class UpdateMetrics:
    """Combines the metrics of micro-batches into one value per step.

    loss/*: summed within a mini-batch (each micro-batch's loss is already normalised by the
    mini-batch's denominators), then averaged over mini-batches; */max: max; everything else:
    token-weighted mean.
    """

    def __init__(self):
        self.pending: list[tuple[dict, object, dict | None]] = []  # add()'s arguments, still on the device
        self.sums: dict[str, float] = defaultdict(float)
        self.weights: dict[str, float] = defaultdict(float)
        self.maxes: dict[str, float] = {}
        self.loss_sums: dict[str, float] = defaultdict(float)
        self.minibatches = 0

    def add(self, metrics: dict, tokens, weights: dict[str, float] | None = None) -> None:
        """One micro-batch's metrics; each mean weighs `tokens` (its response tokens) unless `weights` gives
        the metric its own (the number of sequences, for a mean over sequences): then the merged value is the
        mean over the whole batch, however it was cut into micro-batches or processes. A mean with weight 0
        (a micro-batch with no token) and a NaN maximum add nothing. Values (and tokens) may be left on the
        device (objective/deferred.py): they are read, all at once, by `settle` (`result` settles)."""
        self.pending.append((metrics, tokens, weights))

    def settle(self) -> None:
        """Read what `add` held from the device in one copy, and combine it in the order it came."""
        for metrics, tokens, weights in read(self.pending):
            self._combine(metrics, tokens, weights)
        self.pending = []

    def _combine(self, metrics: dict[str, float], tokens: float, weights: dict[str, float] | None) -> None:
        for k, v in metrics.items():
            v = float(v)
            w = (weights or {}).get(k, tokens)
            if k.startswith("loss/"):
                self.loss_sums[k] += v
            elif k.endswith("/max"):
                if v == v:  # not NaN
                    self.maxes[k] = max(self.maxes.get(k, v), v)
            elif w > 0:
                self.sums[k] += v * w
                self.weights[k] += w

    def end_minibatch(self) -> None:
        self.minibatches += 1

    @classmethod
    def merged(cls, parts: list[UpdateMetrics]) -> UpdateMetrics:
        """The accumulators of the processes of one update (each over its rows) -> the whole update's: sums and
        weights add, maxima take the max, the losses add (each process's is normalised by the whole mini-batch's
        denominators); every process went through the same mini-batches."""
        out = cls()
        for p in parts:
            p.settle()
            for k, v in p.sums.items():
                out.sums[k] += v
                out.weights[k] += p.weights[k]
            for k, v in p.maxes.items():
                out.maxes[k] = max(out.maxes.get(k, v), v)
            for k, v in p.loss_sums.items():
                out.loss_sums[k] += v
        out.minibatches = parts[0].minibatches
        return out

    def result(self) -> dict[str, float]:
        self.settle()
        out = {k: self.sums[k] / self.weights[k] for k in self.sums if self.weights[k] > 0}
        out.update(self.maxes)
        out.update({k: v / max(self.minibatches, 1) for k, v in self.loss_sums.items()})
        return out


def eos_weight_shares(
    obj, adv: torch.Tensor, mask: torch.Tensor, truncated: torch.Tensor, correct: torch.Tensor
) -> dict[str, float]:
    """How much of the update's gradient weight the aggregation puts on the END token of correct
    and of incorrect responses (the length-bias mechanism, Dr.GRPO arXiv 2503.20783 §3.1).

    adv (B,) or (B, T); mask (B, T); truncated, correct (B,) bool. With w_it the aggregation's
    token weight (objective.aggregation.token_weights) and |A_it| the advantage magnitude,
        agg/eos_share_incorrect = sum_{i wrong, ended} |A_i| w_i,end / sum_{i,t} |A_it| w_it
    (same for correct): a share in [0, 1], free of the global scale that Adam divides out.
    Under token_mean every token weighs the same; under seq_mean_token_mean a long wrong
    answer's end token weighs 1/|o_i| of it, so ending is discouraged less the longer it ran.
    Truncated rows have no end token. NaN when no token carries an advantage."""
    m = (mask > 0).double().cpu()
    w = token_weights(obj.agg, m, obj.norm_constant)
    a = adv.detach().double().cpu().abs()
    a = a.unsqueeze(1).expand_as(m) if a.dim() == 1 else a
    total = float((a * w * m).sum())
    last = (m.sum(-1).long() - 1).clamp(min=0)  # (B,) index of each row's last response token
    ended = (~truncated.cpu()) & (m.sum(-1) > 0)
    at_end = (a * w).gather(1, last.unsqueeze(1)).squeeze(1) * ended.double()  # (B,)
    c = correct.cpu()
    if total <= 0:
        return {"agg/eos_share_correct": float("nan"), "agg/eos_share_incorrect": float("nan")}
    return {
        "agg/eos_share_correct": float(at_end[c].sum()) / total,
        "agg/eos_share_incorrect": float(at_end[~c].sum()) / total,
    }
