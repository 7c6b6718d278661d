"""Episode: the rollout/learner boundary. Rewards and advantages are SEPARATE fields.

Shapes: N prompts, G group size, B = N*G rows (groups contiguous), T response length.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from harness.rollout.base import RolloutBatch
from harness.tasks.base import Problem, RewardBreakdown


def _cat_padded(tensors: list[torch.Tensor]) -> torch.Tensor:
    """Concatenate per-row extras along rows, padding every other dim to the widest part
    (with -1 for integer tensors, e.g. the -1 = "not routed" of extras["routing"], else 0)."""
    shape = [max(t.shape[d] for t in tensors) for d in range(1, tensors[0].dim())]
    out = []
    for t in tensors:
        pad = [x for d in reversed(range(1, t.dim())) for x in (0, shape[d - 1] - t.shape[d])]
        fill = 0 if t.is_floating_point() or t.dtype == torch.bool else -1
        out.append(torch.nn.functional.pad(t, pad, value=fill) if any(pad) else t)
    return torch.cat(out)


@dataclass
class Episode:
    problems: list[Problem]  # N
    rollout: RolloutBatch  # B rows
    scores: list[RewardBreakdown]  # B, from the task's verifier
    rewards: torch.Tensor  # (B,) task reward + overlong shaping (what the objective sees)
    overlong: torch.Tensor  # (B,) the overlong shaping term alone (<= 0)
    group_size: int
    greedy_rewards: torch.Tensor | None = None  # (N,) the reward of each prompt's greedy response (ReMax), or None

    @property
    def correct(self) -> torch.Tensor:
        """(B,) bool."""
        return torch.tensor([s.correct for s in self.scores], dtype=torch.bool)

    @property
    def difficulties(self) -> list[str]:
        """B labels, one per row."""
        return [p.difficulty for p in self.problems for _ in range(self.group_size)]

    def select_groups(self, keep: torch.Tensor) -> Episode:
        """Keep the groups where keep (N,) is True."""
        G = self.group_size
        groups = keep.nonzero().flatten().tolist()
        rows = [g * G + j for g in groups for j in range(G)]
        r = self.rollout
        idx = torch.tensor(rows, dtype=torch.long)
        rb = RolloutBatch(
            prompt_ids=[r.prompt_ids[i] for i in rows],
            response_ids=r.response_ids[idx],
            response_mask=r.response_mask[idx],
            sampler_logp=r.sampler_logp[idx],
            truncated=r.truncated[idx],
            texts=[r.texts[i] for i in rows],
            extras={k: v[idx] for k, v in r.extras.items()},
        )
        return Episode(
            [self.problems[g] for g in groups],
            rb,
            [self.scores[i] for i in rows],
            self.rewards[idx],
            self.overlong[idx],
            G,
            None if self.greedy_rewards is None else self.greedy_rewards[keep.nonzero().flatten()],
        )

    @staticmethod
    def concat(parts: list[Episode]) -> Episode:
        parts = [p for p in parts if p.problems]
        T = max(p.rollout.response_ids.shape[1] for p in parts)

        def pad(t: torch.Tensor, v) -> torch.Tensor:
            return torch.nn.functional.pad(t, (0, T - t.shape[1]), value=v)

        rb = RolloutBatch(
            prompt_ids=[x for p in parts for x in p.rollout.prompt_ids],
            response_ids=torch.cat([pad(p.rollout.response_ids, 0) for p in parts]),  # padding is masked
            response_mask=torch.cat([pad(p.rollout.response_mask, 0.0) for p in parts]),
            sampler_logp=torch.cat([pad(p.rollout.sampler_logp, 0.0) for p in parts]),
            truncated=torch.cat([p.rollout.truncated for p in parts]),
            texts=[x for p in parts for x in p.rollout.texts],
            extras={k: _cat_padded([p.rollout.extras[k] for p in parts]) for k in parts[0].rollout.extras},
        )
        return Episode(
            [x for p in parts for x in p.problems],
            rb,
            [x for p in parts for x in p.scores],
            torch.cat([p.rewards for p in parts]),
            torch.cat([p.overlong for p in parts]),
            parts[0].group_size,
            None if parts[0].greedy_rewards is None else torch.cat([p.greedy_rewards for p in parts]),
        )
