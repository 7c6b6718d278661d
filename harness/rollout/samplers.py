"""The token draw of the hf backend: the last logits processor of a `generate(do_sample=False)` call.

transformers' sampling `generate` keeps every step's processed scores for the caller when asked
(`output_scores`): b x T x V floats (1.6 GB twice over for 64 rows x 64 tokens of a 49k vocabulary,
20 GB for 512 tokens of a 152k one), stacked once generation ends to take one log-prob a token. Here
the draw is a logits processor of our own that records the sampled token's log-prob at its step and
keeps nothing of size V: it draws the token, takes log_softmax of the scores it drew from at that
token, and returns scores with all mass on the token, which generate's greedy argmax then takes.

- `BatchSampler` (rollout.seeding: batch): torch.multinomial over softmax(scores) on the global
  generator, the draw transformers' own sampling `generate` makes (same call, same generator), so the
  tokens are those of `generate(do_sample=True)` under the same seed.
- `RowSampler` (rollout.seeding: prompt; harness/rollout/row_seeds.py): each row from its own generator.

The log-prob is log_softmax over one step's (b, V) scores at the drawn token: the same per-row
computation, bit for bit, as over the stacked (b, T, V) scores (tests/rollout/test_samplers.py).

Shapes: b rows of one generate chunk, V vocabulary, T decoding steps.
"""

from __future__ import annotations

import torch


class TokenSampler:
    """Subclasses draw (b,) tokens from (b, V) processed scores (`draw`). Calling it records each row's
    log-prob of its token (`logps`: one (b,) tensor a step) and returns (b, V) scores, 0 at the token and
    -inf elsewhere."""

    def __init__(self):
        self.logps: list[torch.Tensor] = []

    def draw(self, scores: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        tok = self.draw(scores)  # (b,)
        logp = torch.log_softmax(scores.float(), dim=-1)  # (b, V) the distribution it drew from
        self.logps.append(logp.gather(1, tok.unsqueeze(1)).squeeze(1))
        out = torch.full_like(scores, float("-inf"))
        return out.scatter_(1, tok.unsqueeze(1), 0.0)

    def sampled_logp(self) -> torch.Tensor:
        """(b, T) each step's log-prob of the token drawn (rows already ended included: generate pads them)."""
        return torch.stack(self.logps, dim=1)


class BatchSampler(TokenSampler):
    """generate's own draw: one multinomial sample a row from softmax(scores), on the global generator."""

    def draw(self, scores: torch.Tensor) -> torch.Tensor:
        probs = torch.nn.functional.softmax(scores, dim=-1)
        return torch.multinomial(probs, num_samples=1).squeeze(1)


class GreedySampler(TokenSampler):
    """Temperature 0 (SamplingParams.temperature=0, ReMax's baseline response): the argmax of each row's scores
    (the first index at a tie, as transformers' greedy search); its log-prob is under softmax(logits)."""

    def draw(self, scores: torch.Tensor) -> torch.Tensor:
        return scores.argmax(dim=-1)


def processors(temperature: float, top_p: float, sampler: TokenSampler) -> list:
    """The logits processors of a sampling `generate` with our draw: transformers' own temperature and top-p
    warpers (the same classes, in the same order, its sampling generate applies), then the sampler.
    Temperature 0 (greedy) warps nothing: the sampler takes the argmax of the raw logits."""
    from transformers.generation.logits_process import TemperatureLogitsWarper, TopPLogitsWarper

    if temperature == 0:
        return [sampler]
    out = []
    if temperature != 1.0:
        out.append(TemperatureLogitsWarper(temperature))
    if top_p < 1.0:
        out.append(TopPLogitsWarper(top_p))
    return [*out, sampler]
