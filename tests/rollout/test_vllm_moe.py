"""vLLM rollout backend on tiny-moe (Mixtral, top-2 of 4 experts) on CPU.

Regression test for vLLM 0.32's CPU MoE reload bug (expert weights left unpacked after
an in-place reload; fixed in harness.rollout.vllm_worker), and the router-noise knob.
"""

import types

import pytest
import torch

pytest.importorskip("vllm")

from harness.models import build_model, render_prompt  # noqa: E402
from harness.models.logprobs import response_logprobs  # noqa: E402
from harness.rollout.base import SamplingParams  # noqa: E402
from harness.rollout.vllm_backend import VLLMBackend, WeightSyncError  # noqa: E402

CFG = types.SimpleNamespace(dtype="float32", gpu_memory_utilization=0.3, router_noise=0.0)


@pytest.fixture(scope="module")
def setup(one_torch_thread):
    model, tok = build_model("tiny-moe", seed=0)
    backend = VLLMBackend(model, tok, CFG)
    prompts = [render_prompt(tok, f"Use {a} {a + 2} {a + 5} to make {3 * a}.\nAnswer:") for a in range(6)]
    yield backend, model, tok, prompts
    backend.close()


def test_moe_generates_with_trainer_logprobs(setup):
    backend, model, tok, prompts = setup
    r = backend.generate(prompts, 4, SamplingParams(max_new_tokens=32, temperature=0.7, seed=0))
    assert r.response_ids.shape[0] == 24
    with torch.no_grad():
        logp, _, _ = response_logprobs(
            model, r.prompt_ids, r.response_ids, r.response_mask, tok.pad_token_id, temperature=0.7
        )
    assert float((logp - r.sampler_logp).abs().max()) < 1e-4


def test_moe_sync(setup):
    backend, model, tok, prompts = setup
    assert backend.verify_sync(model) < 1e-4
    # a reload of the SAME weights must keep the engine exact (vLLM 0.32 alone: ~0.2 off)
    backend.push_weights(model)
    assert backend.verify_sync(model) < 1e-4
    with torch.no_grad():
        gen = torch.Generator().manual_seed(0)
        for name, p in model.named_parameters():
            if "experts" in name or "gate" in name:
                p.add_(0.02 * torch.randn(p.shape, generator=gen))
    with pytest.raises(WeightSyncError):
        backend.verify_sync(model)
    backend.sync_weights(model)
    assert backend.last_probe_delta < 1e-4


def test_router_noise_changes_rollout_distribution(setup):
    backend, model, _, _ = setup
    assert backend.llm.collective_rpc("harness_set_router_noise", args=(1.0, 0)) == [4]  # 4 MoE layers
    try:
        with pytest.raises(WeightSyncError):  # engine now routes with noisy logits
            backend.verify_sync(model)
    finally:
        assert backend.llm.collective_rpc("harness_set_router_noise", args=(0.0,)) == [0]
    assert backend.verify_sync(model) < 1e-4
