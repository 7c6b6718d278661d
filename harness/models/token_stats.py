"""Each response token's log-prob, its position's log-partition and entropy, from the forward's logits, a few
rows at a time.

Shapes: N positions (B x T flattened), V vocabulary. The formulas are the plain ones, op for op:

    x = logits / temperature                      (N, V)
    log Z = logsumexp(x)                          (N,)
    log p(token) = x[token] - log Z               (N,)
    H = log Z - sum_v softmax(x)_v x_v            (N,)   the entropy, H = log Z - E_p[x]

Run on all N rows at once, each of those lines makes an (N, V) fp32 tensor (the scaled logits, the
exponentials inside logsumexp, the softmax, its product with x) and its backward as many again: for a
micro-batch of 16 rows x 64 tokens of SmolLM2's 49152-word vocabulary, 200 MB apiece, each a fresh
allocation and a pass through main memory. Here they run on chunks of rows whose intermediates fit in the
CPU's cache (CHUNK_BYTES), and the backward recomputes a chunk's forward before taking its gradient, so only
the logits themselves are kept for it. Every quantity is a function of its own row, and a chunk runs the same
kernels as the whole (each row reduced by one thread over the same vector layout), so the values and the
gradient with respect to the logits are those of the whole-tensor formulas bit for bit
(tests/models/test_token_stats.py). The idea of TRL's `selective_log_softmax` (a loop over rows), kept exact.
"""

from __future__ import annotations

import torch

CHUNK_BYTES = 4 << 20  # one chunk's fp32 (rows, V): 4 MiB; the five of a chunk's forward sit in a 32 MiB L3


def chunk_bounds(n: int, vocab: int, chunk_bytes: int = CHUNK_BYTES) -> list[tuple[int, int]]:
    """[start, end) row ranges covering n rows in near-equal chunks of at least `per` rows, per = the rows of an
    fp32 (rows, vocab) within chunk_bytes, and never fewer than 2: torch reduces a tensor of one row by
    splitting the row between threads (another order of summation), a tensor of several rows a row a thread."""
    if n == 0:
        return []
    per = max(2, chunk_bytes // (4 * max(vocab, 1)))
    k = max(1, n // per)
    base, extra = divmod(n, k)
    bounds, start = [], 0
    for i in range(k):
        end = start + base + (i < extra)
        bounds.append((start, end))
        start = end
    return bounds


def _formulas(logits: torch.Tensor, tokens: torch.Tensor, temperature: float, with_entropy: bool):
    """(rows, V) logits, (rows,) tokens -> (log p(token) (rows,), log Z (rows,), H (rows,) or None)."""
    x = logits.float()
    if temperature != 1.0:  # x / 1.0 is x exactly: the pass is skipped, not the arithmetic changed
        x = x / temperature
    logz = torch.logsumexp(x, dim=-1)
    logp = x.gather(-1, tokens.unsqueeze(-1)).squeeze(-1) - logz
    if not with_entropy:
        return logp, logz, None
    probs = torch.softmax(x, dim=-1)
    return logp, logz, logz - (probs * x).sum(-1)


class _ChunkedStats(torch.autograd.Function):
    """(N, V) logits -> (log p (N,), log Z (N,), H (N,); an empty tensor without entropy), chunk by chunk."""

    @staticmethod
    def forward(ctx, logits, tokens, temperature, with_entropy, bounds):
        ctx.save_for_backward(logits, tokens)
        ctx.temperature, ctx.with_entropy, ctx.bounds = temperature, with_entropy, bounds
        ctx.set_materialize_grads(False)
        parts = [_formulas(logits[s:e], tokens[s:e], temperature, with_entropy) for s, e in bounds]
        logp = torch.cat([p[0] for p in parts])
        logz = torch.cat([p[1] for p in parts])
        entropy = torch.cat([p[2] for p in parts]) if with_entropy else logits.new_empty(0, dtype=torch.float32)
        return logp, logz, entropy

    @staticmethod
    def backward(ctx, g_logp, g_logz, g_entropy):
        """Called with at least one gradient given (None for an output nothing used: not materialised). The
        entropy is recomputed only where a gradient reaches it (a metric-only entropy costs no softmax here)."""
        logits, tokens = ctx.saved_tensors
        grad = torch.empty_like(logits)
        with_entropy = ctx.with_entropy and g_entropy is not None
        for s, e in ctx.bounds:
            with torch.enable_grad():
                x = logits[s:e].detach().requires_grad_()
                outs = _formulas(x, tokens[s:e], ctx.temperature, with_entropy)
                pairs = [(o, g[s:e]) for o, g in zip(outs, (g_logp, g_logz, g_entropy)) if g is not None]
                (grad[s:e],) = torch.autograd.grad([o for o, _ in pairs], x, [g for _, g in pairs])
        return grad, None, None, None, None


def token_stats(
    logits: torch.Tensor,
    tokens: torch.Tensor,
    temperature: float = 1.0,
    with_entropy: bool = False,
    chunk_bytes: int = CHUNK_BYTES,
):
    """logits (..., V) (any float dtype; computed in fp32), tokens (...) -> (log p(token) (...), log Z (...),
    H (...) or None), the formulas above; gradients flow to the logits unless under no_grad."""
    lead, vocab = logits.shape[:-1], logits.shape[-1]
    flat, toks = logits.reshape(-1, vocab), tokens.reshape(-1).to(logits.device)
    bounds = chunk_bounds(flat.shape[0], vocab, chunk_bytes)
    logp, logz, entropy = _ChunkedStats.apply(flat, toks, float(temperature), with_entropy, bounds)
    return logp.view(lead), logz.view(lead), entropy.view(lead) if with_entropy else None
