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

On a GPU the tiles are sized for the device, not a CPU cache (`tile_plan`): GPU_TILE_BYTES (256 MiB of fp32 a tile:
one tile for a SmolLM2 micro-batch of 16 rows x 64 tokens, where the 4 MiB chunks made 48, each a dozen kernel
launches forward and as many again in its recompute), capped at an eighth of the free device memory. And the
backward does not recompute the forward: the forward keeps each row's log Z and E_p[x] (two (N,) vectors), and the
gradient with respect to x = logits / temperature is written from them in closed form, one exp and a few
elementwise passes a tile:

    d log p(t) / dx_j = [j = t] - p_j        d log Z / dx_j = p_j        d H / dx_j = -p_j (x_j - E_p[x])

with p_j = exp(x_j - log Z). Equal to the recompute's autograd gradient up to rounding (tests/models/
test_token_stats.py), not bit for bit, which is why the CPU keeps its 4 MiB chunks and the recompute: the CPU
studies' numbers do not move.
"""

from __future__ import annotations

import torch

CHUNK_BYTES = 4 << 20  # one chunk's fp32 (rows, V): 4 MiB; the five of a chunk's forward sit in a 32 MiB L3
GPU_TILE_BYTES = 256 << 20  # one tile's fp32 (rows, V) on a GPU: a few such tensors live at once in a tile's pass


def tile_plan(device: torch.device | str, free_bytes: int | None = None) -> tuple[int, bool]:
    """(bytes of one tile's fp32 (rows, V), recompute in the backward) for logits on `device`. A CPU: CHUNK_BYTES and
    the recompute, bit for bit the whole-tensor formulas. A GPU: GPU_TILE_BYTES,
    at most an eighth of `free_bytes` (the device's free memory; read from the device when None), and the closed-form
    backward (no recompute)."""
    kind = torch.device(device).type
    if kind != "cuda":
        return CHUNK_BYTES, True
    if free_bytes is None:
        free_bytes = torch.cuda.mem_get_info(torch.device(device))[0]
    return max(CHUNK_BYTES, min(GPU_TILE_BYTES, free_bytes // 8)), False


def chunk_bounds(n: int, vocab: int, chunk_bytes: int = CHUNK_BYTES) -> list[tuple[int, int]]:
    """[start, end) row ranges covering n rows in near-equal chunks of at least `per` rows, per = the rows of an
    fp32 (rows, vocab) within chunk_bytes, and never fewer than 2: torch reduces a tensor of one row by
    splitting the row between threads (another order of summation), a tensor of several rows a row a thread."""
    if n == 0:
        return []
    per = max(2, chunk_bytes // (4 * max(vocab, 1)))
    return near_equal_spans(n, max(1, n // per))


def near_equal_spans(n: int, k: int) -> list[tuple[int, int]]:
    """[start, end) ranges covering n items in k chunks whose sizes differ by at most one (the first n % k one longer)."""
    base, extra = divmod(n, k)
    spans, start = [], 0
    for i in range(k):
        end = start + base + (i < extra)
        spans.append((start, end))
        start = end
    return spans


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


def _closed_form_grad(x, tokens, logz, mean_x, g_logp, g_logz, g_entropy):
    """The gradient with respect to x (rows, V fp32, already / temperature) of sum(g_logp log p + g_logz log Z +
    g_entropy H), from the forward's log Z and E_p[x] (module doc); a None gradient is an unused output."""
    p = torch.exp(x - logz.unsqueeze(-1))
    coef = torch.zeros_like(logz)
    if g_logz is not None:
        coef = coef + g_logz
    if g_logp is not None:
        coef = coef - g_logp
    if g_entropy is not None:
        grad = p * (coef.unsqueeze(-1) - g_entropy.unsqueeze(-1) * (x - mean_x.unsqueeze(-1)))
    else:
        grad = p * coef.unsqueeze(-1)
    if g_logp is not None:
        grad.scatter_add_(-1, tokens.unsqueeze(-1), g_logp.unsqueeze(-1).to(grad.dtype))
    return grad


class _TiledStats(torch.autograd.Function):
    """As _ChunkedStats, with a closed-form backward from each row's saved log Z and E_p[x] (no recompute)."""

    @staticmethod
    def forward(ctx, logits, tokens, temperature, with_entropy, bounds):
        ctx.temperature, ctx.with_entropy, ctx.bounds = temperature, with_entropy, bounds
        ctx.set_materialize_grads(False)
        n = logits.shape[0]
        logp, logz = logits.new_empty(n, dtype=torch.float32), logits.new_empty(n, dtype=torch.float32)
        mean_x = logits.new_zeros(n, dtype=torch.float32)  # E_p[x]: only with the entropy (its value, its gradient)
        for s, e in bounds:
            x = logits[s:e].float()
            if temperature != 1.0:
                x = x / temperature
            logz[s:e] = torch.logsumexp(x, dim=-1)
            logp[s:e] = x.gather(-1, tokens[s:e].unsqueeze(-1)).squeeze(-1) - logz[s:e]
            if with_entropy:
                mean_x[s:e] = (torch.softmax(x, dim=-1) * x).sum(-1)
        ctx.save_for_backward(logits, tokens, logz, mean_x)
        entropy = logz - mean_x if with_entropy else logits.new_empty(0, dtype=torch.float32)
        return logp, logz, entropy

    @staticmethod
    def backward(ctx, g_logp, g_logz, g_entropy):
        logits, tokens, logz, mean_x = ctx.saved_tensors
        grad = torch.empty_like(logits)
        g_entropy = g_entropy if ctx.with_entropy else None
        t = ctx.temperature
        pick = lambda g, s, e: None if g is None else g[s:e]  # noqa: E731
        for s, e in ctx.bounds:
            x = logits[s:e].float()
            if t != 1.0:
                x = x / t
            g = _closed_form_grad(
                x, tokens[s:e], logz[s:e], mean_x[s:e], pick(g_logp, s, e), pick(g_logz, s, e), pick(g_entropy, s, e)
            )
            grad[s:e] = g / t if t != 1.0 else g
        return grad, None, None, None, None


def token_stats(
    logits: torch.Tensor,
    tokens: torch.Tensor,
    temperature: float = 1.0,
    with_entropy: bool = False,
    chunk_bytes: int | None = None,
    recompute: bool | None = None,
):
    """logits (..., V) (any float dtype; computed in fp32), tokens (...) -> (log p(token) (...), log Z (...),
    H (...) or None), the formulas above; gradients flow to the logits unless under no_grad. chunk_bytes, recompute:
    None = the logits' device's (`tile_plan`: a CPU's 4 MiB chunks recomputed in the backward, a GPU's tiles with
    the closed-form backward)."""
    if chunk_bytes is None or recompute is None:
        plan = tile_plan(logits.device)
        chunk_bytes = plan[0] if chunk_bytes is None else chunk_bytes
        recompute = plan[1] if recompute is None else recompute
    lead, vocab = logits.shape[:-1], logits.shape[-1]
    flat, toks = logits.reshape(-1, vocab), tokens.reshape(-1).to(logits.device)
    bounds = chunk_bounds(flat.shape[0], vocab, chunk_bytes)
    stats = _ChunkedStats if recompute else _TiledStats
    logp, logz, entropy = stats.apply(flat, toks, float(temperature), with_entropy, bounds)
    return logp.view(lead), logz.view(lead), entropy.view(lead) if with_entropy else None
