"""The rollout interface: every generation backend returns a RolloutBatch.

Shapes: N = number of prompts, G = samples per prompt (group size), B = N*G rows
(groups contiguous: rows [g*G, (g+1)*G) belong to prompt g), T = padded response length.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field

import torch


@dataclass
class SamplingParams:
    max_new_tokens: int
    temperature: float = 1.0  # 0 = greedy: each row's argmax token (ReMax's baseline response), on hf and vllm
    top_p: float = 1.0
    seed: int = 0
    stop: tuple[str, ...] = ()  # stop strings (rollout.stop): a response ends with the token that completes one
    # the index of prompts[0] in the whole batch: a process generating a shard of it (harness/rollout/sharded.py)
    # draws each prompt's samples from the seed of its index in the whole batch (rollout.seeding: prompt)
    first_prompt: int = 0


def stop_index(tokenizer, ids: list[int], stops: tuple[str, ...]) -> int | None:
    """Index of the token of `ids` at which the decoded text (special tokens skipped) first contains
    one of `stops`, None if it never does."""
    if not stops or not any(s in tokenizer.decode(ids, skip_special_tokens=True) for s in stops):
        return None
    lo, hi = 0, len(ids) - 1  # the prefix containing a stop string only grows: bisect for the first one
    while lo < hi:
        mid = (lo + hi) // 2
        if any(s in tokenizer.decode(ids[: mid + 1], skip_special_tokens=True) for s in stops):
            hi = mid
        else:
            lo = mid + 1
    return lo


def cut_at_stop(text: str, stops: tuple[str, ...]) -> str:
    """`text` up to the end of the first stop string in it (the stop string kept)."""
    ends = [text.index(s) + len(s) for s in stops if s in text]
    return text[: min(ends)] if ends else text


@dataclass
class RolloutBatch:
    """What a backend returns for N prompts x G samples (B = N*G rows, groups contiguous).

    prompt_ids: list of B token-id lists (the rendered prompt, no padding).
    response_ids: (B, T) long, right-padded with pad_token_id.
    response_mask: (B, T) float, 1 on generated tokens (EOS included when generated; with stop strings,
        up to the token that completes the first one).
    sampler_logp: (B, T) float, log-prob of each sampled token under the SAMPLER's
        distribution (after temperature), 0 on padding.
    truncated: (B,) bool, True when generation hit max_new_tokens without EOS or a stop string.
    texts: B decoded responses (special tokens stripped; up to and including the first stop string).
    extras: per-row tensors (first dim B) a backend adds. "routing": (B, S, L, k) long, the
        experts each of the L MoE layers chose for every token during generation, in the
        training forward's layout (prompt at positions [0, P_i), response token t at P_i + t;
        see harness.rollout.hf.assemble_routing), -1 where nothing was routed (hf backend, MoE).
    """

    prompt_ids: list[list[int]]
    response_ids: torch.Tensor
    response_mask: torch.Tensor
    sampler_logp: torch.Tensor
    truncated: torch.Tensor
    texts: list[str]
    extras: dict = field(default_factory=dict)

    @property
    def lengths(self) -> torch.Tensor:
        """(B,) number of response tokens."""
        return self.response_mask.sum(-1)


class RolloutBackend(abc.ABC):
    """Generation engine behind `rollout.backend=...`."""

    @abc.abstractmethod
    def generate(self, prompts: list[list[int]], group_size: int, params: SamplingParams) -> RolloutBatch:
        """Sample `group_size` responses for each tokenised prompt."""

    def sync_weights(self, model: torch.nn.Module) -> None:  # noqa: B027 - hf shares the module
        """Make the engine sample from `model`'s current weights (no-op when it shares them)."""

    def close(self) -> None:  # noqa: B027
        """Release engine resources."""
