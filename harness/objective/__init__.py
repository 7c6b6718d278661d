"""The shared composable objective (docs/objective.md): every RL algorithm is one loss with
orthogonal knobs; a named algorithm (grpo, dapo, ...) is a preset of `ObjectiveConfig`.

Pure functions on tensors and floats -- no model, no I/O. Rooms:
config.py (`ObjectiveConfig`: validation, presets), config_fields.py (its knobs by section), mode_registries.py
(`MODE_KNOBS`: the knobs that select a mode -> their registries), presets.py (named algorithms,
`register_preset`), advantages.py ("Advantage", GAE), ratios.py ("Importance ratio"),
surrogates.py ("Surrogate and clipping"), kl.py ("KL to the reference"), aggregation.py ("Aggregation"),
policy.py (the loss + the metrics of "Metrics"), value.py (PPO critic), shaping.py ("Batch-level knobs": DAPO),
dpo.py ("DPO"), passk.py (eval); the headings are those of docs/objective.md;
modes.py (the registries: every mode with its knobs, rules and hooks; `register` adds a researcher's
own, docs/extending.md), knob_rules.py (the checks derived from them), extensions.py (the extras slot:
what a variant needs beyond the core tensors), plugins.py (`objective.plugins`: modules imported
before validation), explain.py (`harness config --explain`, docs/objective.md's knob table),
api.py ("The trainer's calls": inputs_needed, loss_mask, advantages, loss); the zoo's knobs
live in those rooms (soft_clips.py: the math of the vespo, gppo and dro clips); lambda_grpo.py, simko.py, prime.py hold
the math of the modes that need more from the trainer (λ-GRPO: `agg: lambda_length`; SimKO: `simko_top_k > 0`; PRIME:
`baseline: prime`). reference_grpo.py is one GRPO step in plain tensors, top to bottom: start reading there
(docs/architecture.md).

Every built-in mode is declared where its function is, with the decorators a plugin uses
(`register_baseline`, ..., modes.py; docs/extending.md), and every built-in preset with
`register_preset` (presets.py). The registries are complete once this package is imported, and it
always is before any of its modules: importing the package's modules here is what the package is,
not a side effect. The first import names the rooms no other room imports (their modes are declared
nowhere else), in the order their modes are listed.

Glossary for every docstring: N prompts, G group size, B = N*G sequences (groups contiguous),
T padded response length, M response mask (B, T), |o_i| = sum_t M[i, t].
"""

from harness.objective import distill as distill
from harness.objective import opo as opo
from harness.objective import optimal_token_baseline as optimal_token_baseline
from harness.objective import pf_ppo as pf_ppo
from harness.objective import positive_nll as positive_nll
from harness.objective import prime as prime
from harness.objective import remax as remax
from harness.objective import router_aux as router_aux
from harness.objective import soft_clips as soft_clips
from harness.objective import topr as topr
from harness.objective.advantages import gae_advantages, group_advantages
from harness.objective.aggregation import aggregate
from harness.objective.api import (
    BatchCorrection,
    LossInputs,
    Needs,
    Scored,
    advantages,
    batch_correction,
    inputs_needed,
    loss,
    loss_mask,
)
from harness.objective.config import MODE_KNOBS, ObjectiveConfig, register_preset
from harness.objective.dpo import dpo_loss
from harness.objective.extensions import EXTENSIONS, Hooks, TokenLogits
from harness.objective.kl import kl_penalty
from harness.objective.modes import (
    Knob,
    Requires,
    register,
    register_agg,
    register_baseline,
    register_clip,
    register_extension,
    register_kl_estimator,
    register_ratio,
    register_scale,
)
from harness.objective.passk import pass_at_k
from harness.objective.policy import policy_loss
from harness.objective.presets import PRESETS
from harness.objective.ratios import importance_ratio
from harness.objective.shaping import dynamic_sampling_keep, overlong_penalty
from harness.objective.value import explained_variance, value_loss

__all__ = [
    "ObjectiveConfig",
    "group_advantages",
    "policy_loss",
    "kl_penalty",
    "dpo_loss",
    "pass_at_k",
    "PRESETS",
    "gae_advantages",
    "value_loss",
    "explained_variance",
    "overlong_penalty",
    "dynamic_sampling_keep",
    "aggregate",
    "importance_ratio",
    "inputs_needed",
    "Needs",
    "loss_mask",
    "batch_correction",
    "BatchCorrection",
    "advantages",
    "Scored",
    "loss",
    "LossInputs",
    "MODE_KNOBS",
    "EXTENSIONS",
    "Knob",
    "Requires",
    "Hooks",
    "TokenLogits",
    "register",
    "register_baseline",
    "register_scale",
    "register_ratio",
    "register_clip",
    "register_agg",
    "register_kl_estimator",
    "register_extension",
    "register_preset",
]
