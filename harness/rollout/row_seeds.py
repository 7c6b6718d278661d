"""`rollout.seeding: prompt` for the hf backend: every row of a generate call samples from its own seed.

With one seed per generate call (`batch`), torch.multinomial draws all rows from one generator, so
what a prompt samples depends on which other prompts share its batch: a run on 2 processes (each
generating half the prompts) would sample other tokens than the same run on 1. Here row j of prompt
i (its index in the whole batch, SamplingParams.first_prompt + its place in the shard) draws from a
generator seeded by (the call's seed, i, j), one uniform number per decoding step, and takes the token
at which the cumulative distribution first exceeds it (inverse-CDF sampling of the processed
distribution: after temperature and top-p). A prompt's samples are then the same on any number of
processes, up to float rounding of the logits when its batch is padded differently (a near-tie at a
CDF boundary can flip a token; docs/scale.md measures how often).

Shapes: b rows of one generate chunk, V vocabulary.
"""

from __future__ import annotations

import hashlib

import torch

from harness.rollout.samplers import TokenSampler


def row_seed(seed: int, prompt_index: int, sample: int) -> int:
    """The seed of sample `sample` of the prompt at `prompt_index` of a generate call seeded `seed`."""
    key = f"{seed}:{prompt_index}:{sample}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little") % (2**63 - 1)


class RowSampler(TokenSampler):
    """The token draw under per-row seeds (harness/rollout/samplers.py): row i draws its token with its own
    generator, one uniform number a step, by inverse CDF of the processed distribution."""

    def __init__(self, seeds: list[int]):
        super().__init__()
        self.gens = [torch.Generator().manual_seed(s) for s in seeds]

    def draw(self, scores: torch.Tensor) -> torch.Tensor:
        probs = torch.softmax(scores.float(), dim=-1)  # (b, V)
        cdf = probs.cumsum(-1)
        u = torch.cat([torch.rand(1, generator=g) for g in self.gens]).to(scores.device)  # (b,) in [0, 1)
        tok = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(1), right=True).squeeze(1)  # first cdf > u
        tok = tok.clamp(max=scores.shape[-1] - 1)
        zero = probs.gather(1, tok.unsqueeze(1)).squeeze(1) <= 0  # rounding past the last token with mass
        return torch.where(zero, probs.argmax(-1), tok)
