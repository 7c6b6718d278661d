"""One registry per mode knob: the single place a mode name is defined.

Each room of the objective (advantages.py, ratios.py, ...) declares its knob's modes next to the
functions that compute them, as `Modes(knob, {name: Mode(impl, doc)})`. From that one
definition come
    validation  ObjectiveConfig's field type is `registry.literal` (pydantic names the knob, the
                value and the allowed values; the run config adds the dotted key: ConfigError)
    dispatch    `registry[name]` is the implementation; an unknown name raises ValueError naming
                the knob, the value and the allowed values
    docs        `registry.names` is what docs/objective.md's knob table must list (a test checks
                every registered mode appears there: tests/objective/test_objective_modes.py)
Adding a mode: one `Mode(...)` entry in its room (plus its test and its line in the docs).
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Mode(Generic[T]):
    """One value of a knob: what computes it (a function, or a constant such as a std correction;
    None where another call dispatches it) and one line saying what it is (papers included)."""

    impl: T
    doc: str


class Modes(Mapping[str, T]):
    """The modes of one knob, in documentation order; `registry[name]` -> the implementation."""

    def __init__(self, knob: str, modes: dict[str, Mode[T]]):
        if not modes:
            raise ValueError(f"knob {knob!r} needs at least one mode")
        self.knob = knob
        self.modes = dict(modes)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.modes)

    @property
    def literal(self) -> Any:
        """The pydantic field type: Literal[every name] (its error lists the allowed values)."""
        return Literal[self.names]  # type: ignore[valid-type]

    def check(self, name: str) -> str:
        """name if registered, else ValueError naming the knob, the value and the allowed values."""
        if name not in self.modes:
            raise ValueError(f"unknown {self.knob} {name!r}; allowed {self.knob} values: {list(self.names)}")
        return name

    def doc(self, name: str) -> str:
        return self.modes[self.check(name)].doc

    def __getitem__(self, name: str) -> T:
        return self.modes[self.check(name)].impl

    def __iter__(self) -> Iterator[str]:
        return iter(self.modes)

    def __len__(self) -> int:
        return len(self.modes)

    def __contains__(self, name: object) -> bool:
        return name in self.modes

    def describe(self) -> str:
        """A markdown list of the modes and their docs (for docs and `--help`-like listings)."""
        return "\n".join(f"- `{n}`: {m.doc}" for n, m in self.modes.items())
