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
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int = 0


@dataclass
class RolloutBatch:
    """What a backend returns for N prompts x G samples (B = N*G rows, groups contiguous).

    prompt_ids: list of B token-id lists (the rendered prompt, no padding).
    response_ids: (B, T) long, right-padded with pad_token_id.
    response_mask: (B, T) float, 1 on generated tokens (EOS included when generated).
    sampler_logp: (B, T) float, log-prob of each sampled token under the SAMPLER's
        distribution (after temperature), 0 on padding.
    truncated: (B,) bool, True when generation hit max_new_tokens without EOS.
    texts: B decoded responses (special tokens stripped).
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
