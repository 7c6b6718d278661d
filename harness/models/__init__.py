"""Model builders: tiny dense / MoE models with a character tokenizer, SmolLM2-135M, any HF folder.

from harness.models import build_model, render_prompt
model, tok = build_model("tiny-moe", seed=0)
ids = render_prompt(tok, "What is 2+3?\\nAnswer:")  # [<bos>, 'W', 'h', ...]
"""

from harness.models.moe import is_moe, record_routing, replay_routing, routers, routing_choices, stack_router_logits
from harness.models.registry import (
    MODEL_NAMES,
    build_model,
    load_model,
    param_count,
    render_problem,
    render_prompt,
    save_model,
)
from harness.models.smollm2 import smollm2_folder
from harness.models.tiny import tiny_dense_config, tiny_moe_config
from harness.models.tokenizer import char_tokenizer

__all__ = [
    "MODEL_NAMES",
    "build_model",
    "char_tokenizer",
    "is_moe",
    "load_model",
    "param_count",
    "record_routing",
    "render_problem",
    "render_prompt",
    "replay_routing",
    "routers",
    "routing_choices",
    "save_model",
    "smollm2_folder",
    "stack_router_logits",
    "tiny_dense_config",
    "tiny_moe_config",
]
