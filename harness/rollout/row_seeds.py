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
    generator, one uniform number a step, by inverse CDF of the processed distribution. The numbers are drawn
    `block` steps at a time and sent to the device in one copy: a CPU generator's rand(k) is its k successive
    rand(1)s, so the tokens are those of a draw a step (tests/train/test_parallel_parts.py), without a host to
    device copy per row and step."""

    def __init__(self, seeds: list[int], block: int = 256):
        super().__init__()
        self.gens = [torch.Generator().manual_seed(s) for s in seeds]
        self.block = block
        self.uniforms: torch.Tensor | None = None  # (b, block) the block's numbers, on the scores' device
        self.at = 0  # this step's column of the block

    def _uniforms(self, device) -> torch.Tensor:
        """(b,) this step's uniform number of each row, in [0, 1)."""
        if self.uniforms is None or self.at == self.block:
            block = torch.stack([torch.rand(self.block, generator=g) for g in self.gens])  # (b, block)
            self.uniforms, self.at = block.to(device, non_blocking=True), 0
        self.at += 1
        return self.uniforms[:, self.at - 1]

    def draw(self, scores: torch.Tensor) -> torch.Tensor:
        probs = torch.softmax(scores.float(), dim=-1)  # (b, V)
        cdf = probs.cumsum(-1)
        u = self._uniforms(scores.device)  # (b,) in [0, 1)
        tok = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(1), right=True).squeeze(1)  # first cdf > u
        tok = tok.clamp(max=scores.shape[-1] - 1)
        zero = probs.gather(1, tok.unsqueeze(1)).squeeze(1) <= 0  # rounding past the last token with mass
        return torch.where(zero, probs.argmax(-1), tok)
