"""Model registry: build, save and load (model, tokenizer) pairs; render prompts.

Names: "tiny-dense" and "tiny-moe" (fresh, seeded, character tokenizer),
"smollm2-135m" (pretrained SmolLM2-135M-Instruct, see smollm2.py), "smollm2-135m-random" and
"llama-1b-random" (random weights, SmolLM2's tokenizer: random_llama.py); any other string is
read as a local HF folder. Models come back in eval mode; the trainer calls `.train()`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from harness.atomic import atomic_folder
from harness.models.folder import folder_positions
from harness.models.random_llama import RANDOM_SHAPES, random_config
from harness.models.smollm2 import FOLDER_NAME, model_cache_root, smollm2_folder
from harness.models.tiny import TINY_CONFIGS
from harness.models.tokenizer import char_tokenizer

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

MODEL_NAMES = ("tiny-dense", "tiny-moe", "smollm2-135m", *RANDOM_SHAPES)


def build_model(
    name: str, *, seed: int, overrides: dict | None = None, dtype: torch.dtype = torch.float32
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """(model, tokenizer) for `name`.

    tiny-*: freshly initialised from `seed` (same seed -> same weights; the global RNG
    state is left untouched); `overrides` are config fields (e.g. {"num_hidden_layers": 2}).
    smollm2-135m or a local folder: pretrained weights; `overrides` are passed to
    `from_pretrained` (config fields or loading options such as attn_implementation).
    """
    from transformers import AutoModelForCausalLM  # heavy: transformers loads only where a model is built

    if name in TINY_CONFIGS:
        config = TINY_CONFIGS[name](**(overrides or {}))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = AutoModelForCausalLM.from_config(config, dtype=dtype)
        tokenizer = char_tokenizer(model_max_length=config.max_position_embeddings)
        if config.vocab_size < len(tokenizer):
            raise ValueError(f"vocab_size={config.vocab_size} < tokenizer size {len(tokenizer)}")
        _generation_ids(model, tokenizer)
        return model.eval(), tokenizer
    if name in RANDOM_SHAPES:
        return _random_model(name, seed=seed, overrides=overrides, dtype=dtype)
    if name == "smollm2-135m":
        return load_model(smollm2_folder(), dtype=dtype, **(overrides or {}))
    if Path(name).is_dir():
        return load_model(name, dtype=dtype, **(overrides or {}))
    raise ValueError(f"unknown model {name!r}: expected one of {MODEL_NAMES} or an existing local HF folder")


def model_positions(name: str, overrides: dict | None = None) -> int | None:
    """The positions (max_position_embeddings) a prompt and its completion share on model `name`, from its
    config without building it (smollm2-135m: from its converted folder, None before the first conversion);
    None: the config does not say."""
    if name in TINY_CONFIGS:
        return TINY_CONFIGS[name](**(overrides or {})).max_position_embeddings
    if name in RANDOM_SHAPES:
        return random_config(name, **(overrides or {})).max_position_embeddings
    folder = model_cache_root() / FOLDER_NAME if name == "smollm2-135m" else Path(name)
    return folder_positions(folder, overrides)


def policy_vocab(name: str, overrides: dict | None = None) -> int | None:
    """The vocabulary size of model `name` from its config, without building it (None: unknown here)."""
    if name in TINY_CONFIGS:
        return TINY_CONFIGS[name](**(overrides or {})).vocab_size
    if name in RANDOM_SHAPES:
        return random_config(name, **(overrides or {})).vocab_size
    folder = model_cache_root() / FOLDER_NAME if name == "smollm2-135m" else Path(name)
    try:
        return json.loads((folder / "config.json").read_text()).get("vocab_size")
    except (OSError, ValueError):
        return None


def _random_model(name: str, *, seed: int, overrides: dict | None, dtype: torch.dtype):
    """A random-weight Llama of random_llama.py, seeded (the global RNG state untouched), with SmolLM2's tokenizer
    (read from the smollm2-135m folder, which needs no weights in it)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    config = random_config(name, **(overrides or {}))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    tokenizer = AutoTokenizer.from_pretrained(smollm2_folder(), local_files_only=True)
    _generation_ids(model, tokenizer)
    return model.eval(), tokenizer


def save_model(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, folder: str | Path) -> Path:
    """Write model (safetensors) + tokenizer + generation config to `folder` atomically
    (a sibling temp folder renamed into place; an existing `folder` is replaced)."""
    folder = Path(folder)
    with atomic_folder(folder) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
    return folder


def load_model(
    folder: str | Path, dtype: torch.dtype = torch.float32, **kwargs
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """(model, tokenizer) from a local HF folder (nothing is downloaded); model in eval mode."""
    from transformers import AutoModelForCausalLM, AutoTokenizer  # heavy: loads only where a model loads

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, local_files_only=True, **kwargs)
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    return model.eval(), tokenizer


def render_prompt(
    tokenizer: PreTrainedTokenizerBase,
    text: str,
    system: str | None = None,
    messages: list[dict] | None = None,
    tools: list[dict] | None = None,
) -> list[int]:
    """Token ids of the prompt the model sees for task text `text` (ending with its cue).

    With a chat template: [system message] + one user message + generation prompt (for the
    character tokenizer this is exactly `<bos>` + text). Without one: `<bos>` (if any) +
    [system + blank line] + text. `messages` (a chat-messages prompt of a dataset row) replaces
    the user message: they are rendered as they are (`system` first, if given), and without a
    template their contents are joined by blank lines. tools: JSON schemas the chat template renders
    (apply_chat_template(tools=...): task.tools with a template that renders them, harness/tasks/tools/render.py).
    """
    msgs = list(messages) if messages is not None else [{"role": "user", "content": text}]
    if system is not None:
        msgs = [{"role": "system", "content": system}, *msgs]
    if tokenizer.chat_template:
        extra = {"tools": tools} if tools else {}
        return list(
            tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, return_dict=False, **extra)
        )
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    return bos + tokenizer.encode("\n\n".join(m["content"] for m in msgs), add_special_tokens=False)


def render_problem(
    tokenizer: PreTrainedTokenizerBase, problem, suffix: str = "", tools: list[dict] | None = None
) -> list[int]:
    """render_prompt of a task problem (anything with .prompt; a dataset problem's meta may hold chat
    `messages` and a `system` prompt): the prompt, `suffix` appended to its (last) user message; tools: the JSON
    schemas the chat template renders (render_prompt)."""
    return render_prompt(tokenizer, "", messages=problem_messages(problem, suffix), tools=tools)


def problem_messages(problem, suffix: str = "") -> list[dict]:
    """The chat messages render_problem renders: the problem's `system` prompt (if any), then its own chat
    `messages` or one user message of its prompt, `suffix` appended to the last user message (what another
    trainer is given to render the same tokens: benchmarks/trl_grpo.py)."""
    meta = getattr(problem, "meta", None) or {}
    messages = meta.get("messages")
    if messages is None:
        messages = [{"role": "user", "content": problem.prompt + suffix}]
    elif suffix:
        last = max(i for i, m in enumerate(messages) if m["role"] == "user")
        messages = [dict(m, content=m["content"] + suffix) if i == last else m for i, m in enumerate(messages)]
    system = meta.get("system")
    return [{"role": "system", "content": system}, *messages] if system is not None else list(messages)


def param_count(model: torch.nn.Module, trainable_only: bool = False) -> int:
    """Number of parameters (tied weights counted once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


def _generation_ids(model, tokenizer) -> None:
    """The model's generation config takes the tokenizer's pad, BOS and EOS ids (generate reads them there)."""
    gen = model.generation_config
    gen.pad_token_id, gen.bos_token_id, gen.eos_token_id = (
        tokenizer.pad_token_id,
        tokenizer.bos_token_id,
        tokenizer.eos_token_id,
    )
