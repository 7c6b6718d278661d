"""Rewards of a dataset task: built-in verifiers, the user's functions, their weights.

    specs = reward_specs([{"verifier": "gsm8k"}, {"function": "my_rewards:brevity", "weight": 0.1}])
    scorer = Scorer(specs, correct="gsm8k", timeout=5.0, workers=0)

verifiers.py     math (math-verify), gsm8k, number, exact, regex, choice
functions.py     `module.path:function` -> fn(prompt, completion, answer, row) -> float | {reward, correct}
scorer.py        the weighted sum, which reward says "correct", the time limit, worker processes
reward_model.py  {model: FOLDER}: a sequence classifier scoring the chat re-rendered with its own template
normalize.py     per reward before the weighted sum: none, batch whitening, running mean/std
"""

from __future__ import annotations

import os
import re
from typing import Any

from harness.tasks.rewards.functions import RewardFunctionError, load_function
from harness.tasks.rewards.normalize import MODES as NORMALIZE
from harness.tasks.rewards.normalize import Normalizer
from harness.tasks.rewards.reward_model import RewardModel, conversation, reward_model_problem
from harness.tasks.rewards.scorer import Item, ItemRewards, RewardSpec, Scorer
from harness.tasks.rewards.verifiers import VERIFIERS, Verdict, check_options

# reward/<name> keys the trainer already logs (docs/objective.md, "Metrics"): a reward may not take these names
RESERVED = ("mean", "std", "accuracy", "format", "overlong", "process_mean", "timeouts")
CPU_BOUND = ("math", "regex")  # verifiers worth worker processes (sympy; a user's pattern); functions too


def reward_specs(entries: list[Any]) -> list[RewardSpec]:
    """task.rewards entries (dicts with verifier | function, name, weight, options; a string is a verifier
    name or a module.path:function) -> RewardSpecs;
    ValueError naming task.rewards[i] for a wrong one (unknown verifier option, a function that
    does not import or has the wrong signature, a duplicate or reserved name)."""
    specs, names = [], {}
    for i, e in enumerate(entries):
        e = ({"function": e} if ":" in e else {"verifier": e}) if isinstance(e, str) else dict(e)
        where = f"task.rewards[{i}]"
        verifier, function, model = e.get("verifier"), e.get("function"), e.get("model")
        if sum(x is not None for x in (verifier, function, model)) != 1:
            raise ValueError(
                f"{where}: give exactly one of verifier ({' | '.join(VERIFIERS)}), function (module.path:function) "
                "or model (a reward model folder)"
            )
        options = dict(e.get("options") or {})
        extra = _model_knobs(e, where, model)
        if model is not None:
            if options:
                raise ValueError(f"{where}.options: a reward model takes no options")
        elif verifier is not None:
            if verifier not in VERIFIERS:
                raise ValueError(f"{where}.verifier={verifier!r} is unknown; allowed: {list(VERIFIERS)}")
            try:
                check_options(verifier, options)
            except ValueError as err:
                raise ValueError(f"{where}.{err}") from None
        else:
            if options:
                raise ValueError(
                    f"{where}.options: a function takes no options (read them from the row, or make a second function)"
                )
            try:
                load_function(function)
            except ValueError as err:
                raise ValueError(f"{where}.function={err}") from None
        name = e.get("name") or verifier or (function.split(":")[1].split(".")[-1] if function else _folder_name(model))
        if name in RESERVED:
            raise ValueError(
                f"{where}.name={name!r} is taken by a metric the trainer logs (reward/{name}); "
                f"reserved: {list(RESERVED)}"
            )
        if name in names:
            raise ValueError(
                f"{where}: name {name!r} is also task.rewards[{names[name]}]'s; give each a distinct "
                "name (logged as reward/<name>)"
            )
        names[name] = i
        specs.append(
            RewardSpec(
                name=name,
                weight=float(e.get("weight", 1.0)),
                verifier=verifier,
                function=function,
                options=options,
                model=model,
                **extra,
            )
        )
    return specs


def _model_knobs(e: dict, where: str, model: str | None) -> dict:
    """An entry's micro_batch_size (a reward model's only) and normalize (any reward) as RewardSpec fields."""
    out = {}
    mbs = e.get("micro_batch_size")
    if mbs is not None:
        if model is None:
            raise ValueError(f"{where}.micro_batch_size={mbs}: only a reward model (model: FOLDER) scores in batches")
        if isinstance(mbs, bool) or not isinstance(mbs, int) or mbs < 1:
            raise ValueError(f"{where}.micro_batch_size={mbs!r}: allowed: an integer >= 1")
        out["micro_batch_size"] = mbs
    norm = e.get("normalize")
    if norm is not None:
        if norm not in NORMALIZE:
            raise ValueError(f"{where}.normalize={norm!r}; allowed: {list(NORMALIZE)}")
        out["normalize"] = norm
    return out


def _folder_name(path: str) -> str:
    """A reward model's default name: its folder's name, as a metric name allows (reward/<name>)."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", os.path.basename(os.path.normpath(str(path))))
    return name or "reward_model"


def auto_workers(specs: list[RewardSpec]) -> int:
    """Worker processes when task.reward_workers is not set: 2 (at most the CPUs) when a reward is
    CPU-bound (math, regex, a user function), else 0 (scored in the trainer's process)."""
    heavy = any(s.function or s.verifier in CPU_BOUND for s in specs)
    return min(2, os.cpu_count() or 1) if heavy else 0


__all__ = [
    "CPU_BOUND",
    "NORMALIZE",
    "Normalizer",
    "RewardModel",
    "conversation",
    "reward_model_problem",
    "RESERVED",
    "VERIFIERS",
    "Item",
    "RewardFunctionError",
    "RewardSpec",
    "ItemRewards",
    "Scorer",
    "Verdict",
    "auto_workers",
    "check_options",
    "load_function",
    "reward_specs",
]
