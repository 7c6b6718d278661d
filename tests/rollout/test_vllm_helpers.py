"""Pure helpers of the vLLM backend (no engine started)."""

import pytest

from harness.models import build_model
from harness.rollout.vllm_backend import checkpoint_state, kv_cache_bytes


def test_checkpoint_state_has_checkpoint_keys_and_tied_head():
    dense, _ = build_model("tiny-dense", seed=0)
    state = checkpoint_state(dense)
    assert "lm_head.weight" in state  # tied: vLLM refreshes its packed lm_head only from this key
    assert state["lm_head.weight"].data_ptr() == state["model.embed_tokens.weight"].data_ptr()
    moe, _ = build_model("tiny-moe", seed=0)
    state = checkpoint_state(moe)
    E = moe.config.num_local_experts
    # transformers 5 keeps experts fused as mlp.experts.gate_up_proj (E, 2I, H); vLLM loads
    # Mixtral's checkpoint layout: one w1 (gate) / w3 (up) / w2 (down) per expert
    for e in range(E):
        for w in ("w1", "w2", "w3"):
            assert f"model.layers.0.block_sparse_moe.experts.{e}.{w}.weight" in state
    fused = moe.model.layers[0].mlp.experts.gate_up_proj  # (E, 2I, H), gate first
    inter = moe.config.intermediate_size
    assert (state["model.layers.0.block_sparse_moe.experts.1.w1.weight"] == fused[1, :inter]).all()
    assert (state["model.layers.0.block_sparse_moe.experts.1.w3.weight"] == fused[1, inter:]).all()


def test_kv_cache_bytes_is_what_generation_can_use():
    pytest.importorskip("psutil")  # comes with vllm
    dense, _ = build_model("tiny-dense", seed=0)
    c = dense.config  # 4 layers x 2 KV heads x head_dim 32, K and V, fp32
    per_token = 2 * 4 * 2 * 32 * 4
    assert kv_cache_bytes(c, "float32", 512, 256, 0.3) == per_token * 512 * 256
    assert kv_cache_bytes(c, "bfloat16", 512, 256, 0.3) == per_token // 2 * 512 * 256
    # no budget left: still room for one full sequence
    assert kv_cache_bytes(c, "float32", 512, 256, 1e-9) == per_token * 512
