"""model.lm_head_fp32 (ScaleRL 2510.13786 §3.2): the LM head's logits in fp32 under a bf16 model or bf16 autocast."""

import pytest
import torch
from torch.nn import functional as F

from harness.config import ConfigError, load_config
from harness.models import build_model
from harness.models.lm_head import lm_head_fp32
from harness.train.core.policy_module import prepare_policy
from harness.train.run.warmstart import initial_policy


def _hidden_and_logits(model, ids):
    out = model(input_ids=ids, output_hidden_states=True)
    return out.hidden_states[-1], out.logits


def test_fp32_logits_under_a_bf16_model():
    model, _ = build_model("tiny-dense", seed=0, dtype=torch.bfloat16)
    ids = torch.tensor([[1, 5, 7, 9, 11]])
    _, plain = _hidden_and_logits(model, ids)
    assert plain.dtype == torch.bfloat16
    lm_head_fp32(model)
    h, logits = _hidden_and_logits(model, ids)
    assert logits.dtype == torch.float32
    want = F.linear(h.float(), model.get_output_embeddings().weight.float())  # the bf16 weights, upcast
    torch.testing.assert_close(logits, want, rtol=0, atol=0)
    assert not torch.equal(logits, plain.float())  # the bf16 matmul rounds otherwise


def test_fp32_logits_under_bf16_autocast():
    model, _ = build_model("tiny-dense", seed=0)
    ids = torch.tensor([[1, 5, 7, 9, 11]])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert model(input_ids=ids).logits.dtype == torch.bfloat16
        lm_head_fp32(model)
        assert model(input_ids=ids).logits.dtype == torch.float32


def test_the_run_builds_its_policy_with_the_fp32_head():
    cfg = load_config(
        "experiments/runs/smoke.yaml", ["warm_start.enabled=false", "model.dtype=bfloat16", "model.lm_head_fp32=true"]
    )
    model = prepare_policy(initial_policy(cfg, torch.device("cpu"))[0], cfg)  # as start_run builds it
    assert model(input_ids=torch.tensor([[1, 5, 7]])).logits.dtype == torch.float32


def test_vllm_bf16_engine_refused():
    with pytest.raises(ConfigError, match="model.lm_head_fp32=true") as err:
        load_config(
            "experiments/runs/smoke.yaml",
            ["model.lm_head_fp32=true", "rollout.backend=vllm", "rollout.dtype=bfloat16"],
        )
    assert "allowed" in str(err.value)
