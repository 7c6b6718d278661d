"""harness/models/token_stats.py: the tokens' log-probs, log-partitions and entropies a few rows at a time are
the whole-tensor formulas' bit for bit, values and gradients, at any chunk size; and the trainer's forwards
(harness/models/logprobs.py) give the same numbers through either path."""

import math

import pytest
import torch

import harness.models.logprobs as lp
from harness.models import build_model
from harness.models.token_stats import chunk_bounds, token_stats


def _whole(logits, tokens, temperature, with_entropy=True):
    """The formulas on the whole tensor, as the trainer computed them before the chunks (and does for a head)."""
    x = logits.float() / temperature
    logz = torch.logsumexp(x, dim=-1)
    logp = x.gather(-1, tokens.unsqueeze(-1)).squeeze(-1) - logz
    entropy = logz - (torch.softmax(x, dim=-1) * x).sum(-1) if with_entropy else None
    return logp, logz, entropy


def _grads(fn, logits, g_logp, g_entropy):
    x = logits.detach().clone().requires_grad_()
    logp, _, entropy = fn(x)
    torch.autograd.backward([logp, entropy], [g_logp, g_entropy])
    return logp, entropy, x.grad


def test_hand_computed_values():
    # logits (0, ln 3) at temperature 1: Z = 1 + 3 = 4, p = (1/4, 3/4); at temperature 2: x = (0, ln 3 / 2)
    logits = torch.tensor([[0.0, math.log(3.0)], [0.0, math.log(3.0)]])
    logp, logz, ent = token_stats(logits, torch.tensor([1, 0]), 1.0, with_entropy=True)
    h = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert torch.allclose(logz, torch.tensor([math.log(4.0)] * 2), atol=1e-6)
    assert torch.allclose(logp, torch.tensor([math.log(0.75), math.log(0.25)]), atol=1e-6)
    assert torch.allclose(ent, torch.tensor([h, h]), atol=1e-6)
    logp2, logz2, _ = token_stats(logits[:1], torch.tensor([1]), 2.0)
    z2 = 1.0 + math.sqrt(3.0)
    assert abs(float(logz2) - math.log(z2)) < 1e-6 and abs(float(logp2) - math.log(math.sqrt(3.0) / z2)) < 1e-6


@pytest.mark.parametrize("vocab", [7, 513, 49152])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("chunk_rows", [2, 3, 16, 1000])
@pytest.mark.parametrize("threads", [1, 2])
def test_chunks_equal_the_whole_bit_for_bit(vocab, temperature, chunk_rows, threads):
    torch.set_num_threads(threads)  # (conftest restores its one thread after the test)
    g = torch.Generator().manual_seed(vocab)
    logits = torch.randn(5, 9, vocab, generator=g) * 4
    tokens = torch.randint(0, vocab, (5, 9), generator=g)
    g_logp, g_ent = torch.randn(5, 9, generator=g), torch.randn(5, 9, generator=g)
    want = _grads(lambda x: _whole(x, tokens, temperature), logits, g_logp, g_ent)
    got = _grads(lambda x: token_stats(x, tokens, temperature, True, chunk_rows * 4 * vocab), logits, g_logp, g_ent)
    for w, o in zip(want, got):
        assert torch.equal(w, o)
    assert float(want[2].abs().sum()) > 0


def test_a_gradient_through_the_log_probs_alone_and_bf16_logits():
    g = torch.Generator().manual_seed(0)
    logits = (torch.randn(4, 6, 300, generator=g) * 3).bfloat16()
    tokens = torch.randint(0, 300, (4, 6), generator=g)
    w = torch.randn(4, 6, generator=g)
    grads = []
    for fn in (lambda x: _whole(x, tokens, 1.3), lambda x: token_stats(x, tokens, 1.3, True, 4 * 300 * 5)):
        x = logits.clone().requires_grad_()
        logp, _, entropy = fn(x)
        (logp * w).sum().backward()  # the entropy a metric only: no gradient reaches it
        grads.append((logp, entropy, x.grad))
    assert grads[1][2].dtype == torch.bfloat16
    for a, b in zip(*grads):
        assert torch.equal(a, b)


def test_chunk_bounds_cover_every_row_in_near_equal_chunks_of_two_rows_or_more():
    row = 4 * 49152  # bytes of one fp32 row of SmolLM2's vocabulary
    assert chunk_bounds(0, 49152) == []
    assert chunk_bounds(10, 49152, 4 * row) == [(0, 5), (5, 10)]
    assert chunk_bounds(13, 49152, 4 * row) == [(0, 5), (5, 9), (9, 13)]
    assert chunk_bounds(5, 49152, row) == [(0, 3), (3, 5)]  # never a chunk of one row
    assert chunk_bounds(1, 49152, row) == [(0, 1)]


@pytest.mark.parametrize("share_prefix,autocast", [(False, False), (True, False), (False, True)])
def test_the_trainer_forward_is_the_same_through_either_path(share_prefix, autocast):
    """response_forward without a head (the chunks) against with a head that reads nothing (the whole tensor):
    log-probs, entropies and the gradient of every weight equal bit for bit; also under train.autocast's bf16
    (the forward in autocast, the backward outside it, as the trainer runs them)."""
    model = build_model("tiny-dense", seed=0)
    model = (model[0] if isinstance(model, tuple) else model).train()
    g, vocab = torch.Generator().manual_seed(1), model.config.vocab_size
    prompts = [p for n in (6, 9) for p in [torch.randint(3, vocab, (n,), generator=g).tolist()] * 2]
    resp = torch.randint(3, vocab, (4, 8), generator=g)
    mask = torch.ones(4, 8)
    mask[1, 5:] = 0
    results = []
    for head in (None, lambda view: {}):
        model.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            logp, ent, _ = lp.response_forward(
                model, prompts, resp, mask, 0, 0.8, with_entropy=True, head=head, share_prefix=share_prefix
            )
        (logp.sum() + 0.1 * ent.sum()).backward()
        results.append([logp, ent] + [p.grad.clone() for p in model.parameters() if p.grad is not None])
    assert len(results[0]) == len(results[1]) > 2
    for a, b in zip(*results):
        assert torch.equal(a, b)


def test_the_device_picks_the_tiles_and_the_backward():
    """A CPU keeps its 4 MiB chunks and the recompute (the numbers of every CPU run unmoved); a GPU gets tiles sized
    for it (256 MiB, at most an eighth of its free memory) and the closed-form backward. No GPU is needed: the plan
    is a function of the device's kind and its free memory."""
    from harness.models.token_stats import CHUNK_BYTES, GPU_TILE_BYTES, tile_plan

    assert CHUNK_BYTES == 4 << 20
    assert tile_plan("cpu") == (4 << 20, True)
    assert tile_plan(torch.device("cpu"), free_bytes=1 << 40) == (4 << 20, True)
    assert tile_plan("cuda", free_bytes=80 << 30) == (GPU_TILE_BYTES, False)
    assert GPU_TILE_BYTES == 256 << 20
    assert tile_plan("cuda:0", free_bytes=512 << 20) == (64 << 20, False)  # memory tight: an eighth of what is free
    assert tile_plan("cuda", free_bytes=1 << 20) == (CHUNK_BYTES, False)


def test_cpu_logits_take_the_cpu_plan(monkeypatch):
    """token_stats without a chunk size on CPU logits runs today's path: the recomputing chunks of 4 MiB."""
    import harness.models.token_stats as ts

    seen = []
    monkeypatch.setattr(ts, "chunk_bounds", lambda n, v, b: seen.append(b) or [(0, n)])
    monkeypatch.setattr(ts._TiledStats, "apply", lambda *a: pytest.fail("the closed form ran on a CPU"))
    ts.token_stats(torch.randn(2, 3, 11), torch.zeros(2, 3, dtype=torch.long), 1.0, True)
    assert seen == [4 << 20]


@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("chunk_rows", [2, 5, 1000])
@pytest.mark.parametrize("grads", ["all", "logp", "logp+logz"])
def test_the_closed_form_backward_equals_the_recompute_at_every_tile_size(temperature, chunk_rows, grads):
    """The GPU's path (no recompute), run here on CPU tensors: values equal the recompute's bit for bit (the same
    formulas), gradients to fp32 rounding, at any tile size; with the entropy's gradient or without."""
    vocab = 513
    g = torch.Generator().manual_seed(chunk_rows)
    logits = torch.randn(5, 9, vocab, generator=g) * 4
    tokens = torch.randint(0, vocab, (5, 9), generator=g)
    w = [torch.randn(5, 9, generator=g) for _ in range(3)]
    out = []
    for recompute, rows in ((True, 1000), (False, chunk_rows)):
        x = logits.clone().requires_grad_()
        logp, logz, ent = token_stats(x, tokens, temperature, True, rows * 4 * vocab, recompute=recompute)
        loss = (logp * w[0]).sum()
        if grads != "logp":
            loss = loss + (logz * w[1]).sum()
        if grads == "all":
            loss = loss + (ent * w[2]).sum()
        loss.backward()
        out.append((logp, logz, ent, x.grad))
    for a, b in zip(out[0][:3], out[1][:3]):
        assert torch.allclose(a, b, rtol=0, atol=1e-5)
    assert torch.allclose(out[0][3], out[1][3], rtol=1e-4, atol=1e-6)
    assert float(out[1][3].abs().sum()) > 0


def test_the_closed_form_keeps_the_logits_dtype_and_skips_an_unused_entropy():
    g = torch.Generator().manual_seed(1)
    logits = (torch.randn(3, 4, 50, generator=g) * 3).bfloat16()
    tokens = torch.randint(0, 50, (3, 4), generator=g)
    grads = []
    for recompute in (True, False):
        x = logits.clone().requires_grad_()
        logp, _, _ = token_stats(x, tokens, 1.3, False, 4 * 50 * 2, recompute=recompute)
        logp.sum().backward()
        grads.append(x.grad)
    assert grads[1].dtype == torch.bfloat16
    assert torch.allclose(grads[0].float(), grads[1].float(), atol=1e-2)
