"""Router access for top-k MoE models (Mixtral, Qwen2-MoE in transformers 5).

Shapes: L = number of MoE layers, B = batch rows, T = sequence length, E = experts,
k = experts per token.

Where the routing lives: every MoE layer `model.model.layers[i].mlp` holds a router
`.gate` (`MixtralTopKRouter`) whose forward maps hidden states (B*T, H) to
`(router_logits (B*T, E), top_k_weights (B*T, k), top_k_index (B*T, k))`; the experts
`.mlp.experts` then mix exactly the experts in `top_k_index` with `top_k_weights`.
So reading routing = `model(..., output_router_logits=True).router_logits` (a tuple of
L tensors (B*T, E)), and replaying routing = a forward hook on each `.gate` that
replaces the returned indices (this module's `replay_routing`). `noisy_routing` perturbs the
router logits the same way (rollout-only noise, `rollout.router_noise`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import nn

from harness.models.tiny import TINY_CONFIGS

# config fields that count routed experts (Mixtral / Qwen-MoE / OLMoE, Qwen2-MoE, DeepSeek)
EXPERT_COUNT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")
DENSE_NAMES = (
    "smollm2-135m",
    "smollm2-135m-random",
    "llama-1b-random",
)  # a registered name besides the tiny configs (models/registry.py), known dense


def is_moe(what: Any) -> bool | None:
    """Whether `what` is a routed mixture-of-experts model: more than one expert in its config.
    The one MoE test of the project, for every stage:

      - a model (nn.Module with `.config`) or a transformers config: its expert count;
      - a mapping (a config.json already read): its expert count;
      - a model name (`model.name` before any model loads): a tiny model by its transformers config
        (built, no weights), smollm2-135m by name, a folder by its config.json; None when that
        cannot be told (no such folder).

    For the models this project builds, a model is MoE exactly when `routers(model)` is not empty
    (tests/models/test_models_moe.py checks both agree)."""
    if isinstance(what, (str, Path)):
        name = str(what)
        if name in TINY_CONFIGS:
            return is_moe(TINY_CONFIGS[name]())
        if name in DENSE_NAMES:
            return False
        config = Path(name) / "config.json"
        if not config.is_file():
            return None
        what = json.loads(config.read_text())
    config = getattr(what, "config", what)
    get = config.get if isinstance(config, Mapping) else (lambda k: getattr(config, k, None))
    return any(isinstance(v, int) and not isinstance(v, bool) and v > 1 for v in map(get, EXPERT_COUNT_KEYS))


def routers(model: nn.Module) -> list[nn.Module]:
    """The top-k router of every MoE layer, in layer order (empty for a dense model)."""
    return [m for m in model.modules() if type(m).__name__.endswith("TopKRouter")]


def stack_router_logits(router_logits: tuple[torch.Tensor, ...], batch_size: int) -> torch.Tensor:
    """`outputs.router_logits` (L tensors (B*T, E)) -> (L, B, T, E)."""
    stacked = torch.stack(router_logits)  # (L, B*T, E)
    return stacked.view(stacked.shape[0], batch_size, -1, stacked.shape[-1])


def routing_choices(logits: torch.Tensor, top_k: int) -> torch.Tensor:
    """(L, B, T, E) router logits -> (L, B, T, k) chosen experts, as the router picks them
    (top-k of softmax(logits) == top-k of logits, best first)."""
    return logits.topk(top_k, dim=-1).indices


@contextmanager
def replay_routing(model: nn.Module, choices: torch.Tensor) -> Iterator[None]:
    """Inside the block, every forward routes token (b, t) of layer l to experts
    `choices[l, b, t]` (L, B, T, k) instead of the router's own top-k.

    Routing replay (as in GSPO / R3): the mixing weights are still the CURRENT router's
    softmax probabilities at the forced experts (renormalised over the k choices when
    the router renormalises), so gradients keep reaching the router; only the discrete
    choice is frozen. `output_router_logits` still reports the current, unforced logits.
    Meant for full-sequence (training) forwards: the B*T of the forward must match.
    A token whose choices hold a negative id (no recorded routing there, e.g. padding)
    keeps the router's own choice. The hooks run before any other forward hook of the
    router, so a `record_routing` active around the block records the forced choices.
    """
    gates = routers(model)
    if choices.dim() != 4 or choices.shape[0] != len(gates):
        raise ValueError(f"choices must be (L={len(gates)}, B, T, k), got {tuple(choices.shape)}")

    def make_hook(forced: torch.Tensor):
        def hook(module, args, output):
            logits, weights, index = output
            idx = forced.reshape(-1, forced.shape[-1]).to(device=logits.device, dtype=index.dtype)
            if idx.shape != index.shape:
                raise ValueError(f"replayed choices {tuple(idx.shape)} != router's (B*T, k) {tuple(index.shape)}")
            own = (idx < 0).any(dim=-1, keepdim=True)  # (B*T, 1): no recorded choice -> router's own
            idx = torch.where(own, index, idx)
            probs = torch.softmax(logits.float(), dim=-1)  # (B*T, E)
            w = probs.gather(-1, idx)  # (B*T, k)
            if getattr(module, "norm_topk_prob", True):  # Mixtral always renormalises
                w = w / w.sum(dim=-1, keepdim=True)
            return logits, torch.where(own, weights, w.to(weights.dtype)), idx

        return hook

    handles = [g.register_forward_hook(make_hook(choices[i]), prepend=True) for i, g in enumerate(gates)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


@contextmanager
def router_hooks(model: nn.Module, record) -> Iterator[list[list]]:
    """Yields `calls`, where `calls[l]` receives `record(output)` for every forward of the
    router of MoE layer l (output = (router_logits (N, E), top_k_weights, top_k_index (N, k)))."""
    gates = routers(model)
    calls: list[list] = [[] for _ in gates]
    handles = [
        g.register_forward_hook(lambda m, a, out, rec=rec: rec.append(record(out))) for g, rec in zip(gates, calls)
    ]
    try:
        yield calls
    finally:
        for h in handles:
            h.remove()


@contextmanager
def record_routing(model: nn.Module) -> Iterator[list[list[torch.Tensor]]]:
    """Record the experts each router picks: yields `calls`, where `calls[l]` receives one
    (N, k) index tensor per forward of layer l (N = B*T of that forward; during cached
    generation: the prompt, then B per decoding step)."""
    with router_hooks(model, lambda out: out[2].detach().clone()) as calls:
        yield calls


@contextmanager
def noisy_routing(model: nn.Module, sigma: float, seed: int) -> Iterator[None]:
    """Inside the block, every router picks its top-k experts from `logits + eps`,
    eps ~ N(0, sigma^2) drawn per token and expert from a generator seeded with `seed`
    (a controlled rollout/train routing mismatch: `rollout.router_noise`).

    The mixing weights become the (renormalised, as the router does) softmax of the noisy
    logits at the chosen experts, and the noisy logits are returned in place of the clean
    ones. Like `replay_routing`, the hooks run before other router hooks, so a
    `record_routing` around the block records the noisy choices.
    """
    gates = routers(model)
    if sigma <= 0 or not gates:
        yield
        return
    gen = torch.Generator(device=gates[0].weight.device).manual_seed(seed)

    def hook(module, args, output):
        logits, weights, index = output
        noisy = logits.float() + sigma * torch.randn(logits.shape, generator=gen, device=logits.device)  # (N, E)
        top, idx = torch.softmax(noisy, dim=-1).topk(index.shape[-1], dim=-1)  # (N, k)
        if getattr(module, "norm_topk_prob", True):
            top = top / top.sum(dim=-1, keepdim=True)
        return noisy.to(logits.dtype), top.to(weights.dtype), idx.to(index.dtype)

    handles = [g.register_forward_hook(hook, prepend=True) for g in gates]
    try:
        yield
    finally:
        for h in handles:
            h.remove()
