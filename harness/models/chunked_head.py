"""`train.chunked_head`: the response tokens' statistics from the final hidden states, a chunk of positions at a
time, so that the whole (N, V) logits are never held.

The plain forward (harness/models/logprobs.py) takes the model's logits (B, T, V) and keeps them for the backward:
at T = 8192 tokens of one row and Qwen2.5's 151,936-word vocabulary, 5 GB of fp32, and a copy for their gradient.
Here the model's output head is made the identity for the forward (`hidden_instead_of_logits`: `out.logits` is
then the final hidden states, (..., d)), and the head runs on chunks of C positions (train.head_chunk_tokens):

    logits_c = head(h_c)                      (C, V)    h_c the chunk's hidden states (C, d)
    log p, log Z, H = token_stats(logits_c)   (C,)      the formulas of harness/models/token_stats.py

each chunk under torch.utils.checkpoint, so that its logits are freed after the forward and recomputed in the
backward: the memory of the head grows with the hidden states (N x d), not with N x V. The cost is one more head
matmul a chunk in the backward (benchmarks/README.md, "The chunked output head"). The values are those of the
plain path up to the head matmul's rounding on fewer rows (tests/models/test_chunked_head.py: 1e-6).

What an extension reads from the logits (SimKO's top-K tokens and their log-probs) goes through the view's
`topk_index` and `logprobs_at`, each a chunked pass of its own (`ChunkedTokenLogits`).

Shapes: N positions (B x T flattened), d hidden size, V vocabulary, C chunk positions, K indices per position.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Callable, Iterator

import torch
from torch.utils.checkpoint import checkpoint

from harness.models.lora import AdaptersOff
from harness.models.token_stats import near_equal_spans, token_stats

Head = Callable[[torch.Tensor], torch.Tensor]  # hidden (..., d) -> logits (..., V)


def output_head(model) -> torch.nn.Module:
    """The output embedding (LM head) of `model`: a transformers causal LM, peft's (its base's) or AdaptersOff's."""
    owner = model.model if isinstance(model, AdaptersOff) else model
    head = owner.get_output_embeddings() if hasattr(owner, "get_output_embeddings") else None
    if not isinstance(head, torch.nn.Module):
        raise ValueError(f"train.chunked_head=true: {type(owner).__name__} exposes no output head (an nn.Module)")
    return head


def _identity(self, hidden: torch.Tensor) -> torch.Tensor:
    return hidden


@contextlib.contextmanager
def hidden_instead_of_logits(model) -> Iterator[Head]:
    """Inside, `model(...)`'s logits are its final hidden states (the head's input, (..., d)); yields the head's
    own forward (hidden (..., d) -> logits (..., V), model.lm_head_fp32's fp32 one included) for the chunks."""
    head = output_head(model)
    own = head.__dict__.get("forward")  # an instance's replaced forward (lm_head_fp32), else the class's
    compute = own if own is not None else types.MethodType(type(head).forward, head)
    head.forward = types.MethodType(_identity, head)
    try:
        yield compute
    finally:
        if own is not None:
            head.forward = own
        else:
            del head.forward


def chunk_spans(n: int, chunk_tokens: int) -> list[tuple[int, int]]:
    """[start, end) spans covering n positions in near-equal chunks of at most chunk_tokens positions, but never
    one of a single position where n > 1 (one row alone is reduced by several threads in another order:
    token_stats.py `chunk_bounds`)."""
    if n == 0:
        return []
    return near_equal_spans(n, max(1, min(-(-n // chunk_tokens), n // 2)))


def _scaled(head: Head, hidden: torch.Tensor, temperature: float) -> torch.Tensor:
    """(C, d) -> the chunk's logits at the temperature (C, V) fp32, as logprobs.py's keep_logits path."""
    return head(hidden).float() / temperature


def _run(fn: Callable, *args):
    """fn(*args), under a non-reentrant checkpoint where a gradient is taken (its tensors recomputed in the
    backward, not kept)."""
    if torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
        return checkpoint(fn, *args, use_reentrant=False)
    return fn(*args)


def head_stats(
    head: Head, hidden: torch.Tensor, tokens: torch.Tensor, temperature: float, with_entropy: bool, chunk_tokens: int
):
    """hidden (..., d), tokens (...) -> (log p(token) (...), log Z (...), H (...) or None), as
    token_stats(head(hidden), tokens, temperature, with_entropy) but a chunk of positions at a time."""
    lead = hidden.shape[:-1]
    flat, toks = hidden.reshape(-1, hidden.shape[-1]), tokens.reshape(-1).to(hidden.device)

    def chunk(h, t):
        logp, logz, entropy = token_stats(head(h), t, temperature, with_entropy)
        return (logp, logz, entropy) if with_entropy else (logp, logz)

    parts = [_run(chunk, flat[s:e], toks[s:e]) for s, e in chunk_spans(flat.shape[0], chunk_tokens)]
    if not parts:
        empty = flat.new_zeros(0, dtype=torch.float32)
        parts = [(empty,) * (3 if with_entropy else 2)]
    logp, logz = torch.cat([p[0] for p in parts]).view(lead), torch.cat([p[1] for p in parts]).view(lead)
    entropy = torch.cat([p[2] for p in parts]).view(lead) if with_entropy else None
    return logp, logz, entropy


class ChunkedTokenLogits:
    """One forward's view of the response tokens without its logits (the interface of
    harness/objective/extensions.py's TokenLogits): the hidden states (B, T, d) and the head, log Z (B, T), the
    mask (B, T), the sampled tokens (B, T). `topk_index` and `logprobs_at` each run the head again, by chunks."""

    def __init__(self, head: Head, hidden, logz, mask, response_ids, temperature: float, chunk_tokens: int):
        self.head, self.hidden, self.logz, self.mask, self.response_ids = head, hidden, logz, mask, response_ids
        self.temperature, self.chunk_tokens = temperature, chunk_tokens

    @property
    def logits(self) -> torch.Tensor:
        raise ValueError(
            "train.chunked_head=true keeps no (B, T, V) logits: a forward hook reading view.logits must use "
            "view.topk_index(k) / view.logprobs_at(index), or set train.chunked_head=false"
        )

    def detached(self) -> ChunkedTokenLogits:
        h, z = self.hidden.detach(), self.logz.detach()
        return ChunkedTokenLogits(self.head, h, z, self.mask, self.response_ids, self.temperature, self.chunk_tokens)

    def _chunks(self, fn: Callable, extra: torch.Tensor | None = None) -> torch.Tensor:
        """fn(hidden chunk (C, d)[, extra chunk (C, ...)]) -> (C, K), over every position -> (B, T, K)."""
        B, T, d = self.hidden.shape
        flat = self.hidden.reshape(-1, d)
        rest = None if extra is None else extra.reshape(B * T, *extra.shape[2:]).to(flat.device)
        spans = chunk_spans(B * T, self.chunk_tokens)
        parts = [_run(fn, flat[s:e], *(() if rest is None else (rest[s:e],))) for s, e in spans]
        return torch.cat(parts).view(B, T, -1) if parts else flat.new_zeros(B, T, 0)

    def topk_index(self, k: int) -> torch.Tensor:
        """(B, T, K = k) the k most likely tokens at each position (no gradient)."""
        with torch.no_grad():
            return self._chunks(lambda h: _scaled(self.head, h, self.temperature).topk(k, dim=-1).indices)

    def logprobs_at(self, index: torch.Tensor) -> torch.Tensor:
        """(B, T, K) log-probs of the tokens `index` (B, T, K), 0 on padding; gradients flow (each chunk's logits
        recomputed in the backward)."""
        picked = self._chunks(lambda h, i: _scaled(self.head, h, self.temperature).gather(-1, i), index)
        return (picked - self.logz.unsqueeze(-1)) * self.mask.unsqueeze(-1)
