"""rollout.decode_attention=matmul (harness/models/decode_attention.py): a CPU's one-row decoding attention as two
products and a softmax in fp32. The formula by hand and against torch's attention in float64 (grouped heads, both
mask kinds); everything but a one-row CPU step left to transformers' sdpa bit for bit; the switch scoped to generate
and wired from the config; the refusals."""

import math

import pytest
import torch
import torch.nn.functional as F
from transformers.integrations.sdpa_attention import sdpa_attention_forward

import harness.models.decode_attention as da
from harness.config import ConfigError, load_config
from harness.config.rollout import rollout_logp_inexact
from harness.models import build_model
from harness.rollout import SamplingParams, make_backend


class _Attn(torch.nn.Module):
    """What transformers' attention functions read from the module."""

    def __init__(self, groups: int):
        super().__init__()
        self.num_key_value_groups, self.is_causal, self.training = groups, True, False


def test_one_row_by_hand():
    # 2 query heads over 1 key/value head, 2 cached positions, head size 1, scaling 1
    q = torch.tensor([1.0, 2.0]).view(1, 2, 1, 1)
    k = torch.tensor([0.0, 1.0]).view(1, 1, 2, 1)
    v = torch.tensor([10.0, 20.0]).view(1, 1, 2, 1)
    out = da.one_row_attention(q, k, v, None, 1.0)  # (b, 1, H, d)
    # head 0: scores (0, 1) -> p = (1, e) / (1 + e); head 1: scores (0, 2) -> (1, e^2) / (1 + e^2)
    e, e2 = math.e, math.e**2
    want = [(10 + 20 * e) / (1 + e), (10 + 20 * e2) / (1 + e2)]  # 17.3106, 18.8080
    assert out.shape == (1, 1, 2, 1)
    assert out.flatten().tolist() == pytest.approx(want, abs=1e-5)
    masked = da.one_row_attention(q, k, v, torch.tensor([True, False]).view(1, 1, 1, 2), 1.0)
    assert masked.flatten().tolist() == pytest.approx([10.0, 10.0])  # position 1 forbidden: all weight on 0


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-5), (torch.bfloat16, 2**-7)])
def test_equals_torch_attention_with_grouped_heads_and_masks(dtype, tol):
    g = torch.Generator().manual_seed(0)
    b, h, hkv, s, d = 5, 6, 2, 9, 8
    q, k, v = (torch.randn(*shape, generator=g) for shape in ((b, h, 1, d), (b, hkv, s, d), (b, hkv, s, d)))
    keep = torch.ones(b, 1, 1, s, dtype=torch.bool)
    keep[0, ..., :4], keep[3, ..., :1] = False, False  # left padding of rows 0 and 3
    additive = torch.zeros(b, 1, 1, s).masked_fill(~keep, float("-inf"))
    ref = F.scaled_dot_product_attention(  # float64, the key/value heads repeated as transformers' repeat_kv does
        q.double(), k.double().repeat_interleave(h // hkv, 1), v.double().repeat_interleave(h // hkv, 1), keep
    ).transpose(1, 2)
    for mask in (keep, additive.to(dtype)):
        got = da.one_row_attention(q.to(dtype), k.to(dtype), v.to(dtype), mask, d**-0.5)
        assert got.dtype == dtype and got.shape == (b, 1, h, d)
        assert torch.allclose(got.double(), ref, atol=tol, rtol=tol), (got.double() - ref).abs().max()


def test_everything_but_a_one_row_cpu_step_is_sdpa_bit_for_bit(monkeypatch):
    g = torch.Generator().manual_seed(1)
    module = _Attn(groups=2)
    q, k, v = (
        torch.randn(2, 4, 3, 8, generator=g),
        torch.randn(2, 2, 3, 8, generator=g),
        torch.randn(2, 2, 3, 8, generator=g),
    )
    want, _ = sdpa_attention_forward(module, q, k, v, None, scaling=0.3)
    got, _ = da.decode_matmul_attention(module, q, k, v, None, scaling=0.3)  # 3 query rows: the prefill's path
    assert torch.equal(got, want)
    calls = []
    monkeypatch.setattr(
        da, "one_row_attention", lambda *a: calls.append(a) or sdpa_attention_forward(module, *a[:4])[0]
    )
    da.decode_matmul_attention(module, q[:, :, :1], k, v, None, softcap=30.0)  # an extra the products lack
    assert calls == []
    da.decode_matmul_attention(module, q[:, :, :1], k, v, None)
    assert len(calls) == 1


def _first_step_logits(model, ids, on: bool) -> torch.Tensor:
    with torch.no_grad(), da.decoding_products(model, on):
        out = model(input_ids=ids[:, :-1], use_cache=True)
        return model(input_ids=ids[:, -1:], past_key_values=out.past_key_values).logits


def test_the_switch_is_scoped_and_left_alone_off_sdpa():
    model, _ = build_model("tiny-dense", seed=0)
    assert model.config._attn_implementation == "sdpa"
    with da.decoding_products(model, True):
        assert model.config._attn_implementation == da.NAME
    assert model.config._attn_implementation == "sdpa"
    ids = torch.randint(3, 100, (3, 7), generator=torch.Generator().manual_seed(2))
    base, products = _first_step_logits(model, ids, False), _first_step_logits(model, ids, True)
    assert torch.allclose(base, products, atol=1e-5) and not torch.equal(base, products)  # other rounding, same values
    model.set_attn_implementation("eager")
    with da.decoding_products(model, True):
        assert model.config._attn_implementation == "eager"  # eager computes products already: untouched


def test_the_knob_reaches_generate(monkeypatch):
    model, tok = build_model("tiny-dense", seed=0)
    calls = []
    real = da.one_row_attention
    monkeypatch.setattr(da, "one_row_attention", lambda *a: calls.append(1) or real(*a))
    params = SamplingParams(max_new_tokens=4, temperature=1.0, seed=3)
    outs = {}
    for mode in ("model", "matmul"):
        cfg = load_config(
            "experiments/runs/smoke.yaml", [f"rollout.decode_attention={mode}", "rollout.min_new_tokens=4"]
        )
        calls.clear()
        outs[mode] = make_backend(cfg.rollout, model, tok).generate([[3, 4, 5], [6, 7]], 2, params)
        assert (len(calls) > 0) == (mode == "matmul"), (mode, len(calls))
        assert model.config._attn_implementation == "sdpa"  # restored after generate
    assert torch.equal(outs["model"].response_ids, outs["matmul"].response_ids)  # fp32: no near-tie in 4 tokens


def test_refusals_and_the_reason_the_sampler_is_not_the_policy():
    with pytest.raises(ConfigError, match="rollout.decode_attention='matmul' with rollout.backend='vllm'"):
        load_config("experiments/runs/smoke.yaml", ["rollout.backend=vllm", "rollout.decode_attention=matmul"])
    with pytest.raises(ConfigError, match="decode_attention"):
        load_config("experiments/runs/smoke.yaml", ["rollout.decode_attention=fast"])
    cfg = load_config("experiments/runs/smoke.yaml", ["rollout.decode_attention=matmul"])
    assert "rollout.decode_attention='matmul'" in rollout_logp_inexact(cfg)


def test_the_benchmark_prints_its_table():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "decode_attention.py"), "--repeats", "1", "--threads", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line for line in out.stdout.splitlines() if line.startswith(("| float32", "| bfloat16"))]
    assert len(rows) == 2 and all(len(r.split("|")) == 6 for r in rows), out.stdout
