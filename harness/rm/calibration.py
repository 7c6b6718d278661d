"""Held-out pair accuracy and calibration of a Bradley–Terry reward model.

The model says P(chosen preferred) = σ(r_c - r_r). Top-label calibration: each pair's confidence is
c = max(p, 1 - p) in [0.5, 1] and it is right when r_c > r_r; the pairs are put in `bins` equal bins of
c over [0.5, 1]; the reliability table holds each bin's count, mean confidence and accuracy, and the
expected calibration error is ECE = Σ_b (n_b / N) |accuracy_b - confidence_b| (Guo et al., arXiv
1706.04599). A tie (r_c == r_r) is a wrong pair of confidence 0.5.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def reliability(chosen: torch.Tensor, rejected: torch.Tensor, bins: int) -> list[dict]:
    """One row per bin with pairs: {lo, hi, pairs, confidence, accuracy}. chosen, rejected: (P,) rewards."""
    diff = (chosen - rejected).double()
    conf = torch.sigmoid(diff.abs())  # max(σ(d), 1 - σ(d)) = σ(|d|)
    right = (diff > 0).double()
    idx = ((conf - 0.5) * 2 * bins).floor().clamp(0, bins - 1).long()  # c = 1 falls in the last bin
    rows = []
    for b in range(bins):
        sel = idx == b
        n = int(sel.sum())
        if n:
            lo = 0.5 + 0.5 * b / bins
            rows.append(
                {
                    "lo": lo,
                    "hi": lo + 0.5 / bins,
                    "pairs": n,
                    "confidence": float(conf[sel].mean()),
                    "accuracy": float(right[sel].mean()),
                }
            )
    return rows


def pair_metrics(chosen: torch.Tensor, rejected: torch.Tensor, margin: torch.Tensor | None, bins: int) -> dict:
    """accuracy, loss (the Bradley–Terry NLL without regulariser), mean margin, mean reward, ECE and the
    reliability table."""
    if chosen.numel() == 0:
        return {"pairs": 0}
    diff = chosen - rejected
    table = reliability(chosen, rejected, bins)
    n = chosen.numel()
    return {
        "pairs": n,
        "accuracy": float((diff > 0).float().mean()),
        "loss": float(-F.logsigmoid(diff - (margin if margin is not None else 0.0)).mean()),
        "margin": float(diff.mean()),
        "mean_reward": float(torch.cat([chosen, rejected]).mean()),
        "ece": sum(r["pairs"] / n * abs(r["accuracy"] - r["confidence"]) for r in table),
        "reliability": table,
    }


def format_table(rows: list[dict]) -> str:
    """The reliability table as aligned text lines."""
    head = "  confidence bin   pairs  mean conf  accuracy"
    lines = [
        f"  [{r['lo']:.3f}, {r['hi']:.3f})  {r['pairs']:6d}  {r['confidence']:9.3f}  {r['accuracy']:8.3f}" for r in rows
    ]
    return "\n".join([head, *lines])
