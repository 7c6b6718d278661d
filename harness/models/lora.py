"""LoRA adapters on the policy (`model.lora`), through peft. LoRA: Hu et al., arXiv 2106.09685.

    h = W x + (alpha / r) * B A x        A (r, in) random, B (out, r) zero at the start,
                                         so the adapted policy starts equal to its base W
Only A and B train; the base weights W stay frozen. What follows from that:

- the reference policy pi_ref = pi_0 is the base: the same module with its adapters disabled
  (`AdaptersOff`, peft's `disable_adapter()`), not a second copy of the weights;
- a checkpoint holds the adapters (peft's adapter_model.safetensors + adapter_config.json); the
  base is rebuilt from the run's config, and `base_digest` (kept in the checkpoint) refuses a
  resume onto a base with other weights;
- an engine that takes plain weights (vLLM) gets W + (alpha / r) B A (`merged_state_dict`),
  computed on new tensors: the module's own W is never merged in place (W + BA - BA rounds W).

Which modules may carry an adapter: those peft wraps (Linear, Embedding, Conv1d/2d, transformers'
Conv1D), named by the last parts of their dotted names (`q_proj`, `self_attn.o_proj`), or
`all-linear` (peft: every linear layer except the output head). `check_targets` says which a
model has; an MoE's fused expert tensors (transformers 5) are parameters, not modules, so they
take no adapter here. A tied input embedding / output head takes none either: an adapter on one
side would untie what the engine loads as one matrix.

Shapes: r the rank, in / out a layer's input / output width.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

import torch
from torch import nn

from harness.models.random_llama import RANDOM_SHAPES, SMOLLM2_SHAPE, random_config
from harness.models.tiny import tiny_dense_config, tiny_moe_config

ADAPTER = "default"  # peft's name of the one adapter
ALL_LINEAR = "all-linear"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"


def adaptable_modules(model: nn.Module) -> dict[str, str]:
    """{dotted module name: its type} of every module peft can put a LoRA adapter on."""
    from transformers.pytorch_utils import Conv1D

    kinds = (nn.Linear, nn.Embedding, nn.Conv1d, nn.Conv2d, Conv1D)
    return {name: type(m).__name__ for name, m in model.named_modules() if name and isinstance(m, kinds)}


def _matches(name: str, target: str) -> bool:
    """peft's rule for a list of target names: the module's dotted name equals it or ends with '.' + it."""
    return name == target or name.endswith("." + target)


def target_names(targets: str | list[str]) -> list[str] | str:
    """The normalised target list (peft reads a plain string as a regex: only all-linear is taken as one)."""
    return ALL_LINEAR if targets == ALL_LINEAR else list(targets)


def check_targets(model: nn.Module, targets: str | list[str]) -> list[str]:
    """The dotted names of the modules `targets` selects on `model` (a meta-device model will do);
    ValueError (one line, listing the names the model has) for a target that matches nothing, or
    an adapter on a tied embedding / output head."""
    have = adaptable_modules(model)
    leaves = sorted({n.rsplit(".", 1)[-1] for n in have})
    head = _output_head_name(model)
    if targets == ALL_LINEAR:
        chosen = [n for n, kind in have.items() if kind in ("Linear", "Conv1D") and n != head]
        if not chosen:
            raise ValueError(
                f"target_modules={ALL_LINEAR!r} finds no linear layer besides the output head; this "
                f"model's adaptable modules: {leaves}"
            )
        return chosen
    if isinstance(targets, str) or not targets:
        raise ValueError(
            f"target_modules={targets!r}: a list of module names (e.g. [q_proj, v_proj]) or "
            f"{ALL_LINEAR!r}; this model has {leaves}"
        )
    chosen = []
    for t in targets:
        hits = [n for n in have if _matches(n, t)]
        if not hits:
            kinds = sorted({type(m).__name__ for n, m in model.named_modules() if _matches(n, t)})
            why = f" (it is a {', '.join(kinds)}, which takes no LoRA adapter)" if kinds else ""
            raise ValueError(
                f"target_modules: {t!r} names no module of this model that takes an adapter{why}; "
                f"the model has: {leaves} (or {ALL_LINEAR!r})"
            )
        chosen += hits
    tied = _tied_names(model)
    bad = sorted(n for n in chosen if n in tied)
    if bad:
        raise ValueError(
            f"target_modules selects {bad}, which share one weight matrix (tie_word_embeddings); an adapter "
            "on one side would untie them (the rollout engine loads one matrix): leave them out"
        )
    return chosen


_CHECKED: dict[str, None] = {}


def check_lora_targets(name: str, overrides: dict, targets: str | list[str]) -> None:
    """check_targets on the model `name` (model.name, model.overrides) built on the meta device (no weights,
    no download): the config check of model.lora.target_modules before any model loads."""
    memo = json.dumps([name, overrides, targets], sort_keys=True, default=str)
    if memo in _CHECKED:
        return
    try:
        check_targets(meta_model(name, overrides), targets)
    except ValueError as err:  # the config's key in full: model.lora.target_modules
        raise ValueError(f"model.lora.{err}") from None
    _CHECKED[memo] = None


def meta_model(name: str, overrides: dict | None = None) -> nn.Module:
    """The architecture of model `name` on the meta device (module names and shapes, no weights):
    tiny-* from their configs, smollm2-135m as the Llama it is, a folder from its config.json."""
    from transformers import AutoConfig, AutoModelForCausalLM, LlamaConfig

    fields = dict(overrides or {})
    if name in ("tiny-dense", "tiny-moe"):
        config = (tiny_dense_config if name == "tiny-dense" else tiny_moe_config)(**fields)
    elif name in RANDOM_SHAPES:  # smollm2-135m-random, llama-1b-random (random_llama.py)
        config = random_config(name, **fields)
    elif name == "smollm2-135m":  # SmolLM2-135M's shape (its folder may not be converted from GGUF yet)
        config = LlamaConfig(**SMOLLM2_SHAPE)
    else:
        config = AutoConfig.from_pretrained(name, local_files_only=True)
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config)


def _output_head_name(model: nn.Module) -> str | None:
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    return next((n for n, m in model.named_modules() if m is head), None) if head is not None else None


def _tied_names(model: nn.Module) -> set[str]:
    """The input embedding's and output head's module names when their weights are tied."""
    config = getattr(model, "config", None)
    if not getattr(config, "tie_word_embeddings", False) or not hasattr(model, "get_input_embeddings"):
        return set()
    mods = {id(model.get_input_embeddings()), id(model.get_output_embeddings())}
    return {n for n, m in model.named_modules() if id(m) in mods}


def add_lora(
    model: nn.Module, r: int, alpha: float, dropout: float, targets: str | list[str], seed: int = 0
) -> nn.Module:
    """`model` (a transformers causal LM) with LoRA adapters on `targets` -> a peft PeftModel; the base
    weights are frozen, A and B (fp32 when the base is bf16: peft's autocast_adapter_dtype) train.
    A's random init is drawn from its own generator state seeded by `seed` (torch's global state is
    restored after): the same seed gives the same adapters whatever ran before (a warm start built in
    this process or read from its cache)."""
    from peft import LoraConfig, get_peft_model

    check_targets(model, targets)
    config = LoraConfig(
        r=r,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=target_names(targets),
        bias="none",
        task_type="CAUSAL_LM",
    )
    cuda = [torch.cuda.current_device()] if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=cuda):
        torch.manual_seed(seed)
        return get_peft_model(model, config)


def is_lora(model) -> bool:
    from peft import PeftModel

    return isinstance(model, PeftModel)


def base_of(model: nn.Module) -> nn.Module:
    """The transformers model underneath (itself when it carries no adapter). Its modules hold the
    adapter layers in place (peft injects them), so its state dict is not the plain model's."""
    return model.get_base_model() if is_lora(model) else model


class AdaptersOff:
    """pi_ref of a LoRA policy: a callable that runs `model` with its adapters disabled, i.e. the base
    W (= pi_0, since B starts at zero). It holds no weights of its own."""

    def __init__(self, model: nn.Module):
        self.model = model

    @property
    def device(self) -> torch.device:
        return self.model.device

    def __call__(self, *args, **kwargs):
        with self.model.disable_adapter():
            return self.model(*args, **kwargs)


def _tuner_layers(base: nn.Module) -> dict[str, nn.Module]:
    from peft.tuners.tuners_utils import BaseTunerLayer

    return {name: m for name, m in base.named_modules() if isinstance(m, BaseTunerLayer)}


@torch.no_grad()
def merged_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The plain model's state dict (its own key names, no adapter tensors) with every adapted weight
    replaced by W + (alpha / r) B A (peft's get_delta_weight), in new tensors; `model` is untouched.
    A model without adapters: its state_dict()."""
    if not is_lora(model):
        return model.state_dict()
    base = base_of(model)
    layers = _tuner_layers(base)
    out: dict[str, torch.Tensor] = {}
    for key, value in base.state_dict().items():
        owner = next((p for p in _prefixes(key) if p in layers), None)
        if owner is None:
            out[key] = value
            continue
        rest = key[len(owner) + 1 :]
        if not rest.startswith("base_layer."):
            continue  # lora_A / lora_B / ...: folded into the weight below
        name = f"{owner}.{rest[len('base_layer.') :]}"
        if rest == "base_layer.weight":
            layer = layers[owner]
            value = (
                value + layer.get_delta_weight(ADAPTER).to(value.dtype)
                if ADAPTER in layer.active_adapters
                else value.clone()
            )
        out[name] = value
    return out


def _prefixes(key: str) -> Iterable[str]:
    parts = key.split(".")
    return (".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1))


def save_plain(model: nn.Module, folder: str | Path) -> None:
    """save_pretrained of the plain model: a LoRA policy's base with the adapters merged (what an engine
    that knows no adapters loads); any other model as it is. Written by this process whatever its rank:
    the folder is its own (a rollout engine's), while transformers writes on rank 0 only once
    torch.distributed is initialised."""
    plain = base_of(model) if is_lora(model) else model
    kwargs = {"state_dict": merged_state_dict(model)} if is_lora(model) else {}
    plain.should_save_on_this_rank = lambda is_main_process: True  # this instance only
    try:
        plain.save_pretrained(folder, **kwargs)
    finally:
        del plain.should_save_on_this_rank


def merged_copy(model: nn.Module) -> nn.Module:
    """A plain transformers model (no adapter layers) with the adapters merged into its weights: a full
    copy, for what needs its own weights (PPO's value model, PRIME's reward model). `model` is untouched."""
    if not is_lora(model):
        return copy.deepcopy(model)
    return copy.deepcopy(model).merge_and_unload()


# ---------------------------------------------------------------------------------- checkpoints
def adapter_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """The adapters' tensors under peft's saved names (what adapter_model.safetensors holds)."""
    from peft import get_peft_model_state_dict

    return get_peft_model_state_dict(model)


def read_adapter(folder: str | Path) -> dict[str, torch.Tensor]:
    """The adapters' tensors of a saved checkpoint folder (FileNotFoundError naming what is missing)."""
    from safetensors.torch import load_file

    path = Path(folder) / ADAPTER_WEIGHTS
    if not path.is_file():
        raise FileNotFoundError(f"{folder} holds no {ADAPTER_WEIGHTS} (not a LoRA checkpoint)")
    return load_file(str(path))


def load_adapter(model: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Copy saved adapter tensors into `model`'s adapters in place (the optimizer keeps its parameters);
    RuntimeError when a saved tensor has no adapter in the model or a model adapter none saved."""
    from peft import set_peft_model_state_dict

    own = adapter_state(model)
    missing, extra = sorted(set(own) - set(state)), sorted(set(state) - set(own))
    if missing or extra:
        raise RuntimeError(
            f"the saved adapters do not fit this model's (r, target_modules): missing "
            f"{missing[:3]}{'...' if len(missing) > 3 else ''}, unexpected {extra[:3]}"
        )
    set_peft_model_state_dict(model, state)


@torch.no_grad()
def base_digest(model: nn.Module) -> str:
    """sha256 (16 hex digits) of the base weights' bytes in state-dict order (adapter tensors excluded):
    the identity of the base a set of adapters was trained on."""
    h = hashlib.sha256()
    base = base_of(model)
    layers = _tuner_layers(base) if is_lora(model) else {}
    for key, value in base.state_dict().items():
        owner = next((p for p in _prefixes(key) if p in layers), None)
        if owner is not None and not key[len(owner) + 1 :].startswith("base_layer."):
            continue
        h.update(key.replace(".base_layer.", ".").encode())
        h.update(value.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())  # no copy of the bytes
    return h.hexdigest()[:16]
