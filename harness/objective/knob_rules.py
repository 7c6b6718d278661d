"""Everything the config checks about knobs, derived from the modes' declarations (modes.py):

    knob_specs(plugins, selected)   the declared knobs a config carries (built-in ones, its plugins',
                                    and those of the modes it selects)
    combination_problems(cfg)       a selected mode's `requires`, and its required knobs (norm_constant)
    unread_problems(cfg, default)   knobs set away from their preset value that no active mode reads
    group_size_problems(cfg, G)     train.group_size a selected mode cannot work with
    reads(cfg, knob)                whether an active mode reads `knob`
    run_key_readers()               the run-config keys (train.*) modes read, for the run config's check

Messages name the dotted key, its value, the mode that reads or rules it and what is allowed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from harness.objective.extensions import active_modes
from harness.objective.modes import BUILTIN, KINDS, Knob, Mode, all_knobs, readers


def knob_specs(plugins: Iterable[str] = (), selected: Iterable[str] = ()) -> dict[str, Knob]:
    """The declared knobs a config carries: those of built-in modes, of the modes its plugins registered
    and of the modes it selects (their origins: `selected`)."""
    scope = {BUILTIN, *plugins, *selected}
    return {
        name: knob for name, (knob, owners) in all_knobs().items() if any(mode.origin in scope for _, _, mode in owners)
    }


def _mode_is_active(cfg: Any, kind: str, name: str) -> bool:
    return any(k == kind and n == name for k, n, _ in active_modes(cfg))


def reads(cfg: Any, knob: str) -> bool:
    """Whether a mode cfg selects (or an extension it turns on) owns or reads `knob`; a knob no mode
    declares is always read."""
    who = readers(knob)
    return not who or any(_mode_is_active(cfg, kind, name) for kind, name, _ in who)


def switches() -> set[str]:
    """The knobs that turn an extension on (simko_top_k, kl_coef, ...): always read, they decide."""
    return {m.switch for m in KINDS["extension"].modes.values() if m.switch}


def when_text(who: list[tuple[str, str, Mode]]) -> str:
    """'objective.clip in ['dppo_kl', 'dppo_tv'] or objective.simko_top_k > 0' for the readers `who`."""
    by_kind: dict[str, list[str]] = {}
    parts = []
    for kind, name, mode in who:
        if kind == "extension":
            parts.append(mode.when)
        else:
            by_kind.setdefault(kind, []).append(name)
    for kind, names in by_kind.items():
        parts.insert(0, f"objective.{kind}={names[0]!r}" if len(names) == 1 else f"objective.{kind} in {sorted(names)}")
    return " or ".join(parts)


def _now(cfg: Any, who: list[tuple[str, str, Mode]]) -> str:
    """What those readers' knobs are now: 'objective.clip='ppo', objective.simko_top_k=0'."""
    keys = dict.fromkeys(mode.switch if kind == "extension" else kind for kind, _, mode in who)
    return ", ".join(f"objective.{k}={getattr(cfg, k)!r}" for k in keys if k)


def unread_message(cfg: Any, key: str, value: Any) -> str | None:
    """The message for run-config key `key` (`objective.x` or `train.y`) set to `value` while no active
    mode reads it; None when one does."""
    knob = key.removeprefix("objective.")
    who = readers(knob)
    if not who or any(_mode_is_active(cfg, kind, name) for kind, name, _ in who):
        return None
    return f"{key}={value!r} is read only with {when_text(who)}, and {_now(cfg, who)}: drop the knob"


def unread_problems(cfg: Any, default: Callable[[str], Any], names: Iterable[str]) -> list[str]:
    """Knobs of `names` set away from `default(name)` (the preset's value) that no active mode reads.
    A switch (simko_top_k, kl_coef, ...) is always read: it decides."""
    out = []
    switch_knobs = switches()
    for name in names:
        if name in switch_knobs:
            continue
        value = getattr(cfg, name)
        if value != default(name) and (msg := unread_message(cfg, f"objective.{name}", value)):
            out.append(msg)
    return out


def combination_problems(cfg: Any) -> list[str]:
    """Required knobs of the selected modes that are unset, then the rules they declare (`Requires`)."""
    out = []
    active = active_modes(cfg)
    for _, _, mode in active:
        for knob in mode.knobs:
            if knob.required and getattr(cfg, knob.name) is None:
                out.append(
                    f"{knob.name} is required with {mode.when.removeprefix('objective.')} ({knob.doc}); "
                    f"allowed values: {knob.range_text().removesuffix(' or null')}"
                )
    for _, _, mode in active:
        for rule in mode.requires:
            if (msg := rule.problem(cfg, mode.when)) is not None:
                out.append(msg)
    return out


def group_size_problems(cfg: Any, group_size: int) -> list[str]:
    """train.group_size below what a selected mode needs (a group statistic: 2), or its own rule."""
    out = []
    for kind, name, mode in active_modes(cfg):
        if group_size < mode.min_group_size:
            out.append(
                f"train.group_size={group_size} is impossible with objective.{kind}={name} (a group of one "
                "response is its own mean and has no spread: advantage 0); allowed: train.group_size >= "
                f"{mode.min_group_size}"
            )
        if mode.group_rule is not None and (msg := mode.group_rule(cfg, group_size)):
            out.append(msg)
    return out


def run_key_readers() -> dict[str, list[tuple[str, str, Mode]]]:
    """Run-config keys outside `objective` (train.critic_lr, ...) -> the modes that read them."""
    out: dict[str, list] = {}
    for kind, reg in KINDS.items():
        for name, mode in reg.modes.items():
            for key in mode.reads:
                if "." in key:
                    out.setdefault(key, []).append((kind, name, mode))
    return out
