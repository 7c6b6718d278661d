"""Normalising one reward's values before the weighted sum (task.rewards[i].normalize; OpenRLHF #693).

    norm = Normalizer("running")
    values = norm(raw, update=True)      # a training batch: the running statistics learn from it first
    values = norm(raw, update=False)     # an eval: the statistics as they stand

none     the values as they are
batch    whitened over the batch: (x - mean) / (std + eps), mean and std of this batch's values
running  (x - mean) / (std + eps) with the mean and std of every training batch so far, this one included
         (Chan et al.'s parallel update of count, mean and M2); its state is part of the checkpoint, so a
         resumed run normalises as the uninterrupted one. Before any training batch: the values as they are.

A reward model's scale is arbitrary (a Bradley-Terry head is defined up to a shift): without
normalisation its weight against a 0/1 verifier means nothing.
"""

from __future__ import annotations

import math

MODES = ("none", "batch", "running")
EPS = 1e-6


def _moments(values: list[float]) -> tuple[int, float, float]:
    """(count, mean, M2 = sum of squared deviations) of values."""
    n = len(values)
    if n == 0:
        return 0, 0.0, 0.0
    mean = math.fsum(values) / n
    return n, mean, math.fsum((v - mean) ** 2 for v in values)


class Normalizer:
    def __init__(self, mode: str = "none"):
        if mode not in MODES:
            raise ValueError(f"normalize={mode!r}; allowed: {list(MODES)}")
        self.mode = mode
        self.count, self.mean, self.m2 = 0, 0.0, 0.0

    def __call__(self, values: list[float], update: bool = False) -> list[float]:
        if self.mode == "none" or not values:
            return list(values)
        if self.mode == "batch":
            n, mean, m2 = _moments(values)
            return [(v - mean) / (math.sqrt(m2 / n) + EPS) for v in values]
        if update:
            self._update(values)
        if self.count == 0:
            return list(values)
        std = math.sqrt(self.m2 / self.count)
        return [(v - self.mean) / (std + EPS) for v in values]

    def _update(self, values: list[float]) -> None:
        n, mean, m2 = _moments(values)
        total = self.count + n
        delta = mean - self.mean
        self.m2 += m2 + delta * delta * self.count * n / total
        self.mean += delta * n / total
        self.count = total

    def state_dict(self) -> dict:
        return {"count": self.count, "mean": self.mean, "m2": self.m2}

    def load_state_dict(self, state: dict) -> None:
        self.count, self.mean, self.m2 = int(state["count"]), float(state["mean"]), float(state["m2"])
