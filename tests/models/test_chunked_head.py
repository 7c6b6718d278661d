"""train.chunked_head (harness/models/chunked_head.py): the output head run on chunks of positions from the final
hidden states gives the plain forward's log-probs, entropies, SimKO's top-K reads and gradients (1e-6), the head
by hand on a 2-word example, and the model's head restored after."""

import math

import pytest
import torch

import harness.models.logprobs as lp
from harness.config import ConfigError, load_config
from harness.models.chunked_head import chunk_spans, head_stats, hidden_instead_of_logits
from harness.models.lm_head import lm_head_fp32
from tests.models.packed_rows import three_rows, tiny_model


def test_chunk_spans_cover_the_positions_in_near_equal_chunks_of_at_most_the_size():
    assert chunk_spans(10, 4) == [(0, 4), (4, 7), (7, 10)]  # ceil(10 / 4) = 3 chunks: 4, 3, 3
    assert chunk_spans(8, 4) == [(0, 4), (4, 8)]
    assert chunk_spans(3, 2) == [(0, 3)]  # never a chunk of one position: 3 // 2 = 1 chunk
    assert chunk_spans(5, 2) == [(0, 3), (3, 5)]
    assert chunk_spans(3, 100) == [(0, 3)] and chunk_spans(1, 4) == [(0, 1)] and chunk_spans(0, 4) == []


def test_head_stats_by_hand():
    """d = 2, V = 3: W rows (1, 0), (0, 1), (1, 1); h = (1, 2) gives logits (1, 2, 3), h = (0, 0) gives (0, 0, 0)."""
    head = torch.nn.Linear(2, 3, bias=False)
    with torch.no_grad():
        head.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
    hidden = torch.tensor([[[1.0, 2.0], [0.0, 0.0]]])  # (B=1, T=2, d=2)
    tokens = torch.tensor([[2, 0]])
    logp, logz, ent = head_stats(head, hidden, tokens, 1.0, True, 2)
    z = math.log(math.e + math.e**2 + math.e**3)  # log Z of (1, 2, 3): 3.4076
    p = [math.exp(v - z) for v in (1, 2, 3)]
    assert logz[0].tolist() == pytest.approx([z, math.log(3)], abs=1e-6)
    assert logp[0].tolist() == pytest.approx([3 - z, -math.log(3)], abs=1e-6)  # -0.4076, -1.0986
    assert ent[0].tolist() == pytest.approx([-sum(q * math.log(q) for q in p), math.log(3)], abs=1e-6)  # 0.8324
    logp_t2, _, _ = head_stats(head, hidden, tokens, 2.0, False, 2)  # x = logits / 2: (0.5, 1, 1.5)
    z2 = math.log(math.exp(0.5) + math.exp(1.0) + math.exp(1.5))
    assert logp_t2[0, 0].item() == pytest.approx(1.5 - z2, abs=1e-6)


def _forward(model, chunk, temperature=1.3, share_prefix=False):
    """(logp, entropy, SimKO-like reads: top-3 indices and their log-probs) and the parameters' gradients of a
    loss using all of them, with the head chunked by `chunk` positions (0: the plain forward)."""
    prompts, resp, mask = three_rows(model.config.vocab_size)
    model.zero_grad()

    def head(view):
        index = view.topk_index(3)
        return {"index": index, "topk_logp": view.logprobs_at(index)}

    with lp.chunked_head(chunk):
        logp, ent, read = lp.response_forward(
            model, prompts, resp, mask, 0, temperature, with_entropy=True, head=head, share_prefix=share_prefix
        )
    (logp.sum() - 0.7 * ent.sum() + 0.3 * read["topk_logp"].sum()).backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return logp.detach(), ent.detach(), read, grads


def _close(a, b, tol=1e-6):
    """max |a - b| <= tol max(1, max |b|): to 1e-6 of the tensor's scale (a gradient summed over tokens is ~10)."""
    scale = max(1.0, float(b.abs().max()))
    assert a.shape == b.shape and float((a - b).abs().max()) <= tol * scale, (float((a - b).abs().max()), scale)


@pytest.mark.parametrize("name", ["tiny-dense", "tiny-moe"])
@pytest.mark.parametrize("chunk", [2, 5, 1000])
def test_chunked_head_equals_the_plain_forward_values_and_gradients(name, chunk):
    model = tiny_model(name).train()
    logp, ent, read, grads = _forward(model, 0)
    c_logp, c_ent, c_read, c_grads = _forward(model, chunk)
    _close(c_logp, logp)
    _close(c_ent, ent)
    assert torch.equal(c_read["index"], read["index"])
    _close(c_read["topk_logp"].detach(), read["topk_logp"].detach())
    assert set(c_grads) == set(grads) and len(grads) > 0
    for k in grads:  # the gradient of the embeddings, the layers and the head itself
        _close(c_grads[k], grads[k])
    assert float(logp.abs().sum()) > 0 and float(ent.abs().sum()) > 0


def test_chunked_head_with_shared_prefixes_and_an_fp32_head():
    model = lm_head_fp32(tiny_model("tiny-dense").train())
    logp, ent, _, grads = _forward(model, 0, share_prefix=True)
    c_logp, c_ent, _, c_grads = _forward(model, 4, share_prefix=True)
    _close(c_logp, logp)
    _close(c_ent, ent)
    for k in grads:
        _close(c_grads[k], grads[k])


def test_hidden_instead_of_logits_restores_the_head():
    model = lm_head_fp32(tiny_model("tiny-dense"))
    own = model.lm_head.__dict__["forward"]
    ids = torch.tensor([[3, 4, 5]])
    with torch.no_grad():
        want = model(input_ids=ids).logits
        with hidden_instead_of_logits(model) as head:
            hidden = model(input_ids=ids).logits
            assert hidden.shape[-1] == model.config.hidden_size
        assert model.lm_head.__dict__["forward"] is own
        torch.testing.assert_close(head(hidden), want, rtol=0, atol=1e-6)
    plain = tiny_model("tiny-dense")
    with hidden_instead_of_logits(plain):
        pass
    assert "forward" not in plain.lm_head.__dict__  # the class's forward again


def test_a_hook_reading_the_whole_logits_names_the_knob():
    model = tiny_model("tiny-dense")
    prompts, resp, mask = three_rows(model.config.vocab_size)
    with torch.no_grad(), lp.chunked_head(4), pytest.raises(ValueError, match="train.chunked_head=true"):
        lp.response_forward(model, prompts, resp, mask, 0, 1.0, head=lambda view: {"x": view.logits})


@pytest.mark.parametrize(
    "overrides, match",
    [
        (["train.head_chunk_tokens=1"], "train.head_chunk_tokens"),
        (["train.chunked_head=true", "train.parallel=fsdp", "train.nproc=2", "rollout.seeding=prompt"], "fsdp"),
        (["train.chunked_head=true", "objective.baseline=optimal_token", "objective.scale=none"], "optimal_token"),
    ],
)
def test_bad_chunk_settings_are_refused_naming_the_key(overrides, match):
    with pytest.raises(ConfigError, match=match) as err:
        load_config("experiments/runs/smoke.yaml", ["tracking.mlflow=false", *overrides])
    assert "\n" not in str(err.value) and "train.chunked_head" in str(err.value) or "head_chunk" in str(err.value)


@pytest.mark.parametrize("chunk", [0, 4])
def test_the_backward_keeps_no_logits_when_chunked(chunk):
    """What autograd saves for the backward (outside the chunks' checkpoints, whose tensors are recomputed): with
    the head chunked, no tensor of vocabulary width; the plain forward keeps the (B, T, V) logits."""
    model = tiny_model("tiny-dense").train()
    V = model.config.vocab_size
    prompts, resp, mask = three_rows(V)
    shapes = []

    def pack(t):
        shapes.append(tuple(t.shape))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), lp.chunked_head(chunk):
        logp, ent, _ = lp.response_forward(model, prompts, resp, mask, 0, 1.0, with_entropy=True)
    (logp.sum() + ent.sum()).backward()
    wide = [s for s in shapes if s and s[-1] == V]
    assert (wide == []) if chunk else ((3, 7, V) in wide or (21, V) in wide), wide
