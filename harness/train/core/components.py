"""Trained modules of a run: the policy and its components, each with its own optimizer.

A component is a trained auxiliary model beside the policy (PPO's value model, PRIME's
implicit reward model): it gives the objective one named input (`provides`, e.g.
"values"), is stepped with the policy in every optimizer step, and is checkpointed and
restored by the run shell under its `name` (state[name], state[name + "_optimizer"]).
Adding one is an entry in `COMPONENTS` plus its module: the trainers iterate over
components and never branch on a particular one.

Shapes: B rows, T response length.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from harness.models.hub import model_path
from harness.models.implicit_prm import ImplicitPRM
from harness.models.lora import is_lora, merged_copy
from harness.models.value import ValueModel, load_critic_init
from harness.parallel import full_params, full_tensor, gather_objects
from harness.train.core.batch import Batch, gather_shard
from harness.train.core.nonfinite import NonFiniteUpdate, describe


def adamw(module: nn.Module, lr: float, betas, weight_decay: float | None = None) -> torch.optim.Optimizer:
    """AdamW over the module's parameters; weight_decay None: AdamW's default (0.01, the components')."""
    extra = {} if weight_decay is None else {"weight_decay": weight_decay}
    return torch.optim.AdamW(module.parameters(), lr=lr, betas=betas, **extra)


@dataclass
class Trained:
    """A module and its optimizer; `name` keys its state in the checkpoint."""

    name: str
    module: nn.Module
    optimizer: torch.optim.Optimizer

    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def grad_norm(self, max_norm: float | None) -> float:
        """The gradient's global L2 norm (before clipping); every gradient scaled by max_norm / (norm + 1e-6) when
        that is below 1 (torch's clip_grad_norm_). The sum of squares is taken in float64, so the norm, and with
        it the clip factor, do not depend on how the gradient is cut: whole tensors, or FSDP's shards summed over
        the processes (harness/train/core/sharding.py) round to the same float32 factor."""
        grads = [p.grad.detach() for p in self.module.parameters() if p.grad is not None]
        if not grads:
            return 0.0
        norm = float(full_tensor(squared_norm(grads))) ** 0.5  # the update's one read of the gradient
        coef = max_norm / (norm + 1e-6) if max_norm else 1.0
        if coef < 1.0:
            torch._foreach_mul_(grads, coef)  # on a CPU each tensor's own mul_
        return norm

    def state(self) -> dict:
        """What the checkpoint keeps of it (the policy's weights are saved as a model instead)."""
        return {self.name: self.module.state_dict(), f"{self.name}_optimizer": self.optimizer.state_dict()}

    def load(self, state: dict) -> None:
        self.module.load_state_dict(state[self.name])
        self.optimizer.load_state_dict(state[f"{self.name}_optimizer"])


class WithTrained:
    """`model` and `trained` of an object holding `policy` (a Trained) and `components` (the run's and the step's
    contexts)."""

    @property
    def model(self) -> nn.Module:
        return self.policy.module

    @property
    def trained(self) -> list[Trained]:
        """Every trained module, the policy first: each optimizer step steps them all."""
        return [self.policy, *self.components]


def squared_norm(grads: list[torch.Tensor]) -> torch.Tensor:
    """sum_g sum g^2 in float64 (0-dim; of a DTensor: its shard's, summed by the caller's full_tensor). On a CPU each
    gradient's float64 copy squared and summed in turn (the runs' recorded bits); on a GPU torch._foreach_norm with
    float64 accumulation, one fused launch for many tensors and no float64 copy of any (a 7B model's embedding
    gradient would take 4.4 GB), summed in float64: the same total up to float64 rounding, far below the float32
    clip factor's."""
    if grads[0].device.type != "cuda" or any(type(g) is not torch.Tensor for g in grads):
        return sum(g.double().pow(2).sum() for g in grads)
    norms = torch._foreach_norm(grads, 2.0, dtype=torch.float64)
    return torch.stack(norms).pow(2).sum()


class Component(Trained):
    """A trained auxiliary model giving the objective the input `provides`."""

    def __init__(
        self, name: str, provides: str, module: nn.Module, optimizer: torch.optim.Optimizer, scores: bool = True
    ):
        super().__init__(name, module, optimizer)
        self.provides = provides
        self.scores = scores  # its output before the update is an input of `advantages` (values, prm_logp)

    def __call__(self, part: Batch, pad_id: int) -> torch.Tensor:
        """(b, T) its output on the rows `part`, with gradient."""
        return self.module(part.prompt_ids, part.response_ids, part.mask, pad_id)

    @torch.no_grad()
    def predict(self, batch: Batch, pad_id: int, micro: int | None) -> torch.Tensor:
        """(B, T) its output on every row (no gradient), micro-batch by micro-batch (on N processes: each its
        share of the rows, gathered)."""
        with full_params(self.module):  # FSDP: the whole weights, for this process's own number of forwards
            return gather_shard([self(part, pad_id) for part in batch.shard().micro_batches(micro)], batch)


def _full_weights(policy: nn.Module) -> nn.Module:
    """What a component copies its weights from: the policy, or a LoRA policy's base with its adapters merged
    (a plain model: the component trains every weight of its own copy; docs/scale.md)."""
    return merged_copy(policy) if is_lora(policy) else policy


def _value_model(cfg, policy: nn.Module) -> tuple[nn.Module, float]:
    init = (
        load_critic_init(model_path(cfg.model.critic_init, key="model.critic_init"))
        if getattr(cfg.model, "critic_init", None)
        else None
    )
    return ValueModel(policy if init is not None else _full_weights(policy), init), cfg.train.critic_lr


def _implicit_prm(cfg, policy: nn.Module) -> tuple[nn.Module, float]:
    return ImplicitPRM(_full_weights(policy), cfg.rollout.temperature), cfg.objective.prm_lr


class LearnedScalar(nn.Module):
    """One trained scalar (λ-GRPO's λ, docs/objective.md, "λ-GRPO"); its output is the 0-dim parameter."""

    def __init__(self, init: float):
        super().__init__()
        self.value = nn.Parameter(torch.tensor(float(init)))

    def forward(self, *batch) -> torch.Tensor:
        return self.value


def _lambda(cfg, policy: nn.Module) -> tuple[nn.Module, float, float]:
    return LearnedScalar(cfg.objective.lambda_init), cfg.objective.lambda_lr, 0.0  # no weight decay towards 0


# provides -> (name in the checkpoint, builder(cfg, policy) -> (module, learning rate[, weight decay]),
#              scores: its output before the update is an input of `advantages`)
COMPONENTS: dict[str, tuple[str, Callable, bool]] = {
    "values": ("critic", _value_model, True),  # PPO's value model (objective.baseline=critic)
    "prm_logp": ("prm", _implicit_prm, True),  # PRIME's implicit reward model (objective.baseline=prime)
    "lam": ("lambda", _lambda, False),  # λ-GRPO's learned λ (objective.agg=lambda_length)
}


def register_component(provides: str, name: str, build: Callable, scores: bool = True) -> None:
    """Add a trained component (a researcher's module, docs/extending.md): the objective's modes name it by
    `provides` (their Hooks.component), `build(cfg, policy) -> (module, lr[, weight decay])`, `name` keys
    its checkpoint state; scores: its output before the update is an input of `advantages`."""
    if provides in COMPONENTS and COMPONENTS[provides][1] is not build:
        raise ValueError(f"component {provides!r} is already registered")
    COMPONENTS[provides] = (name, build, scores)


def build_components(cfg, policy: nn.Module, wanted: list[str], device) -> list[Component]:
    """The components giving the objective inputs `wanted` (e.g. ["values"]), each with its AdamW."""
    out = []
    for provides in wanted:
        if provides not in COMPONENTS:
            raise ValueError(
                f"the objective reads component {provides!r}, which no module registered; registered: "
                f"{sorted(COMPONENTS)} (harness.train.core.components.register_component)"
            )
        name, build, scores = COMPONENTS[provides]
        module, lr, *wd = build(cfg, policy)
        module = module.to(device)
        out.append(Component(name, provides, module, adamw(module, lr, cfg.train.betas, *wd), scores))
    return out


def nonfinite_message(name: str, value: torch.Tensor, where: str = "") -> str | None:
    """What is not finite in `value` (named, with where it was computed), or None."""
    msg = describe(name, value)
    return None if msg is None else f"{msg} {where}".rstrip()


def check_finite(trained: list[Trained], name: str, value: torch.Tensor, where: str = "") -> None:
    """Raise NonFiniteUpdate (every module's gradient cleared, no optimizer step) if value is not finite."""
    _refuse_update(trained, nonfinite_message(name, value, where))


def finite_everywhere(trained: list[Trained], problem: str | None) -> None:
    """check_finite of a value each process computed on its own rows (`problem`: its nonfinite_message): on N
    processes, NonFiniteUpdate on every one if any found a problem, so all skip or stop at the same update."""
    _refuse_update(trained, next((p for p in gather_objects(problem) if p), None))


def _refuse_update(trained: list[Trained], problem: str | None) -> None:
    if problem is not None:
        for t in trained:
            t.zero_grad()
        raise NonFiniteUpdate(problem)


def clip_and_step(
    trained: list[Trained], max_norm: float | None, where: str = "", frozen: tuple[str, ...] = ()
) -> float:
    """One optimizer step of every module but those named in `frozen` (train.component_warmup_steps
    freezes the policy): each gradient clipped on its own and checked finite (else NonFiniteUpdate,
    no module stepped); returns the first module's (the policy's) norm."""
    norms = [t.grad_norm(max_norm) for t in trained]
    for t, n in zip(trained, norms):
        if not math.isfinite(n):  # a host float: checked without a tensor
            name = "grad/norm" if t is trained[0] else f"grad/{t.name}_norm"
            _refuse_update(trained, f"{name} is {n} {where}".rstrip())
    for t in trained:
        if t.name in frozen:
            t.zero_grad()
        else:
            t.optimizer.step()
    return norms[0]
