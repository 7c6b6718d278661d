"""objective.no_positive_resampling (ScaleRL, arXiv 2510.13786 §3.2 "No-Positive-Resampling"): a training prompt
whose running pass rate reaches the threshold (the paper: 0.9) leaves the pool for the rest of the run, so the
steps spend their samples on prompts the policy does not yet solve.

    pass_rate(x) = (correct samples of x) / (samples of x), over every group of x the run has sampled (every
                   refill round of dynamic sampling included); x retired once pass_rate(x) >= threshold

A prompt is known by its text. The draw of a step (harness/train/core/collect.py `draw`) drops retired prompts and
tops the batch up from further seeded draws (at most MAX_REDRAWS), so a run stays a function of its seed; the
counts are in the checkpoint (a resumed run draws the same prompts). Logged: pool/retired (prompts retired so far).
"""

from __future__ import annotations

import torch

MAX_REDRAWS = 8  # extra seeded draws that top a step's prompts up past retired ones


class PromptPool:
    def __init__(self, threshold: float):
        self.threshold = threshold
        self.counts: dict[str, list[int]] = {}  # prompt text -> [correct, samples]
        self.retired: set[str] = set()

    def allowed(self, problem) -> bool:
        return problem.prompt not in self.retired

    def record(self, problems: list, correct: torch.Tensor, group_size: int) -> None:
        """One collection round's groups: problems (N), correct (N * G,) bool, groups contiguous."""
        per_group = correct.view(-1, group_size).sum(-1).tolist()
        for p, c in zip(problems, per_group, strict=True):
            n = self.counts.setdefault(p.prompt, [0, 0])
            n[0], n[1] = n[0] + int(c), n[1] + group_size
            if n[0] >= self.threshold * n[1]:
                self.retired.add(p.prompt)

    def metrics(self) -> dict[str, float]:
        return {"pool/retired": float(len(self.retired))}

    def state_dict(self) -> dict:
        return {"counts": {k: list(v) for k, v in self.counts.items()}, "retired": sorted(self.retired)}

    def load_state_dict(self, state: dict) -> None:
        self.counts = {k: list(v) for k, v in state["counts"].items()}
        self.retired = set(state["retired"])
