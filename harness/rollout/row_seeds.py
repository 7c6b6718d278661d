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


def row_seed(seed: int, prompt_index: int, sample: int) -> int:
    """The seed of sample `sample` of the prompt at `prompt_index` of a generate call seeded `seed`."""
    key = f"{seed}:{prompt_index}:{sample}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little") % (2**63 - 1)


class RowSampler:
    """The last logits processor of a sampling `generate`: draws each row's token with its own generator and
    returns scores that put all mass on it (0 there, -inf elsewhere: generate's greedy argmax takes it, no
    multinomial draw over the vocabulary); keeps the processed scores it sampled from (`scores`: one (b, V)
    tensor per step) for the sampler's log-probs. Use with generate(do_sample=False) and the warpers in front
    of this (`processors`)."""

    def __init__(self, seeds: list[int]):
        self.gens = [torch.Generator().manual_seed(s) for s in seeds]
        self.scores: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        self.scores.append(scores)
        probs = torch.softmax(scores.float(), dim=-1)  # (b, V)
        cdf = probs.cumsum(-1)
        u = torch.cat([torch.rand(1, generator=g) for g in self.gens]).to(scores.device)  # (b,) in [0, 1)
        tok = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(1), right=True).squeeze(1)  # first cdf > u
        tok = tok.clamp(max=scores.shape[-1] - 1)
        zero = probs.gather(1, tok.unsqueeze(1)).squeeze(1) <= 0  # rounding past the last token with mass
        tok = torch.where(zero, probs.argmax(-1), tok)
        out = torch.full_like(scores, float("-inf"))
        return out.scatter_(1, tok.unsqueeze(1), 0.0)


def processors(temperature: float, top_p: float, sampler: RowSampler) -> list:
    """The logits processors of a per-row seeded `generate`: transformers' own temperature and top-p warpers
    (the same classes, in the same order, generate applies), then the sampler."""
    from transformers.generation.logits_process import TemperatureLogitsWarper, TopPLogitsWarper

    out = []
    if temperature != 1.0:
        out.append(TemperatureLogitsWarper(temperature))
    if top_p < 1.0:
        out.append(TopPLogitsWarper(top_p))
    return [*out, sampler]
