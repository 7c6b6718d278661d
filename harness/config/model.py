"""Section `model` (and `model.lora`) and the rules that constrain it: a folder holds a model, its overrides
fit its config class (overrides.py), its head and positions fit the rollout, the critic it initialises fits
the objective and the policy's tokenizer, and what an MoE (or a dense model) allows. A rule that names two
sections lives with the section it constrains: these would be wrong of any model, whatever the rollout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool

from harness.config.base import _Section
from harness.config.overrides import check_model_overrides
from harness.models import MODEL_NAMES, is_moe
from harness.models.folder import classifier_problem, folder_problem
from harness.models.hub import model_path, section_model
from harness.models.registry import model_positions, policy_vocab
from harness.objective import inputs_needed


class LoraSection(_Section):
    """model.lora: train LoRA adapters instead of every weight (peft; harness/models/lora.py, docs/scale.md).
    The reference policy is the base with the adapters disabled; checkpoints hold the adapters."""

    r: int = Field(16, ge=1, description="rank of each adapter (B A, A: r x in, B: out x r)")
    alpha: float = Field(32.0, gt=0, description="scale: the update is (alpha / r) B A; with alpha = 2r the scale is 2")
    dropout: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="dropout on each adapter's input in training forwards; above 0 "
        "pi_old's and pi_theta's forwards differ by the dropout mask (ratio != 1 on-policy)",
    )
    target_modules: str | list[Annotated[str, Field(min_length=1)]] = Field(
        "all-linear",
        description="module names the adapters go on (last parts of dotted names, e.g. [q_proj, v_proj]), "
        "or all-linear (every linear layer but the output head); checked against the model before it loads",
    )


class ModelSection(_Section):
    name: str = Field(
        "tiny-dense",
        description="tiny-dense | tiny-moe | smollm2-135m | smollm2-135m-random | llama-1b-random (random weights, "
        "SmolLM2's tokenizer: harness/models/random_llama.py) | a local Hugging Face folder | a Hugging Face Hub "
        "id org/name (its snapshot in huggingface_hub's cache, downloaded once: harness/models/hub.py; an "
        "existing folder of that name wins)",
    )
    revision: str = Field(
        "main",
        min_length=1,
        description="model.name a Hub id: the branch, tag or commit of its repo (the commit it resolves to is "
        "recorded in run.json and MLflow: set it here to load the same weights again); main for any other name",
    )
    overrides: dict[str, Any] = Field(
        default_factory=dict, description="config overrides for tiny-* models (e.g. num_hidden_layers)"
    )
    dtype: Literal["float32", "bfloat16"] = Field("float32", description="training precision of the policy")
    attn_implementation: Literal["auto", "sdpa", "eager", "flash_attention_2"] | None = Field(
        "auto",
        description="transformers' attention kernel for the policy (and its copies); null = transformers' own "
        "choice; auto = null on a CPU, sdpa on CUDA (torch's fused attention: flash or memory-efficient kernels). "
        "model.overrides.attn_implementation, where set, wins",
    )
    prompt_suffix: str = Field(
        "", description="appended to every task prompt (an answer-format instruction for chat models)"
    )
    lora: LoraSection | None = Field(
        None,
        description="LoRA adapters (r, alpha, dropout, target_modules) instead of full "
        "fine-tuning; null = every weight trains",
    )
    lm_head_fp32: StrictBool = Field(
        False,
        description="the LM head's logits in fp32 (hidden states and head weight upcast, autocast off) in the "
        "trainer and the hf sampler, whatever model.dtype / train.autocast (ScaleRL 2510.13786 §3.2, MiniMax-M1 "
        "2506.13585); a no-op for an fp32 model without autocast. The scalerl preset turns it on",
    )
    critic_init: str | None = Field(
        None,
        description="objective.baseline=critic: a reward model folder (a sequence classifier, num_labels 1) the "
        "critic starts from, its transformer and its score head (the PPO paper's setup), instead of a copy of "
        "the policy with a zero head; it reads the policy's tokens, so it must share the policy's tokenizer",
    )
    teacher: str | None = Field(
        None,
        description="on-policy distillation (objective.distill_coef > 0, the opd preset): the frozen teacher that "
        "scores the student's sampled tokens, named as model.name is (a built-in name, a local Hugging Face folder or "
        "a Hub id at main); it reads the policy's token ids, so it must share the policy's tokenizer; null = none",
    )


def check_model(run: Any) -> None:
    """A model.name folder must hold a model; model.overrides keys and values must fit its config class."""
    m = run.model
    local = section_model(m)
    if m.name not in MODEL_NAMES:
        problem = folder_problem(Path(local))
        if problem and local != m.name:
            raise ValueError(
                f"model.name={m.name!r} (revision {m.revision!r}) is a Hugging Face Hub repo but not a causal LM's: "
                f"{problem}"
            )
        if problem:
            raise ValueError(
                f"model.name={m.name!r} is a folder but not a Hugging Face model: {problem}; "
                f"allowed: one of {list(MODEL_NAMES)} or a saved model folder"
            )
    if m.overrides:
        check_model_overrides(local, m.overrides)
    n = m.overrides.get("max_position_embeddings", 1)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"model.overrides.max_position_embeddings={n!r}: allowed: an integer >= 1")
    if m.lm_head_fp32 and run.rollout.backend == "vllm" and run.rollout.dtype != "float32":
        raise ValueError(
            f"model.lm_head_fp32=true with rollout.backend='vllm' and rollout.dtype={run.rollout.dtype!r}: the "
            "vLLM engine computes its head in rollout.dtype, so the sampler's logits would not be fp32; allowed: "
            "rollout.dtype=float32 (or rollout.backend=hf)"
        )
    positions = model_positions(local, m.overrides)
    if positions is not None and run.rollout.max_new_tokens >= positions:
        raise ValueError(
            f"rollout.max_new_tokens={run.rollout.max_new_tokens} leaves no room for a prompt in the {positions} "
            f"positions (max_position_embeddings) of model.name={m.name!r}; allowed: below {positions}, less "
            "the longest prompt"
        )


def check_critic_init(run: Any) -> None:
    """model.critic_init: a critic to initialise (objective.baseline=critic), a sequence classifier with one
    label, whose vocabulary is the policy's (where both configs say)."""
    path = run.model.critic_init
    if path is None:
        return
    if "values" not in inputs_needed(run.objective).components:
        raise ValueError(
            f"model.critic_init={path!r} initialises PPO's critic, and objective.preset={run.objective.algorithm} "
            f"has none (objective.baseline={run.objective.baseline!r}); set objective.baseline=critic (the ppo "
            "preset), or drop it"
        )
    folder = Path(model_path(path, key="model.critic_init"))  # a Hub id: its snapshot in the cache
    problem = classifier_problem(folder)
    if problem:
        raise ValueError(f"model.critic_init={path!r} is not a reward model: {problem}")
    theirs = json.loads((folder / "config.json").read_text()).get("vocab_size")
    ours = policy_vocab(section_model(run.model), run.model.overrides)
    if theirs is not None and ours is not None and theirs != ours:
        raise ValueError(
            f"model.critic_init={path!r} has vocab_size={theirs}, the policy model.name={run.model.name!r} "
            f"{ours}: the critic reads the policy's tokens, so it must share the policy's tokenizer"
        )


def check_moe(run: Any) -> None:
    """Routing replay needs the rollout's expert choices (recorded by the hf backend only)
    and, like router noise, an MoE model; checked before any model loads."""
    o, r = run.objective, run.rollout
    if o.routing_replay and r.backend == "vllm":
        raise ValueError(
            "objective.routing_replay=true is impossible with rollout.backend=vllm (the vLLM engine "
            "does not return its expert choices); use rollout.backend=hf or routing_replay=false"
        )
    moe = is_moe(section_model(run.model))  # None: a name whose architecture is not known before loading
    if moe is False and o.routing_replay:
        raise ValueError(
            f"objective.routing_replay=true needs an MoE model; model.name={run.model.name!r} is dense "
            "(use tiny-moe or an MoE folder)"
        )
    if moe is False and getattr(o, "router_aux_loss_coef", 0.0) > 0:
        raise ValueError(
            f"objective.router_aux_loss_coef={o.router_aux_loss_coef} needs an MoE model (a router to balance); "
            f"model.name={run.model.name!r} is dense: use tiny-moe or an MoE folder, or router_aux_loss_coef=0"
        )
    if moe and run.train.share_prefix:
        raise ValueError(
            f"train.share_prefix=true with model.name={run.model.name!r}, an MoE: routing replay and the "
            "router metrics read the plain forward's layout of every row; set train.share_prefix=false"
        )
    if moe and r.share_prefix and r.backend == "hf":
        raise ValueError(
            f"rollout.share_prefix=true with model.name={run.model.name!r}, an MoE: the routing record "
            "reads generate's own prefill of every row; set rollout.share_prefix=false"
        )
    if moe is False and r.router_noise > 0:
        raise ValueError(
            f"rollout.router_noise={r.router_noise} needs an MoE model; model.name={run.model.name!r} "
            "is dense (use tiny-moe or an MoE folder, or router_noise=0)"
        )
