"""The registries of the objective: the one place a mode, its knobs and its rules are declared.

Each room of the objective (advantages.py, ratios.py, ...) declares the modes of its knob next to
the functions that compute them; a researcher's module adds its own with the same decorator
(docs/extending.md):

    @register("baseline", "median", doc="b_i = the median of the group's rewards")
    def median(rewards, cfg):                      # (N, G) float64 -> r - b (N, G)
        return rewards - rewards.median(-1, keepdim=True).values

A `Mode` declares
    impl       what computes it (its kind fixes the signature: the tensors and the config)
    doc        one line, papers included
    knobs      the knobs it owns (`Knob`: name, default, range, doc): they exist in every config and
               are read only while the mode is selected
    reads      other knobs it reads (owned by no single mode, e.g. eps_low), and run-config keys
               (`train.critic_lr`)
    requires   what it needs of the other knobs (`Requires`), checked when it is selected
    hooks      the extras slot (extensions.py `Hooks`): trained components, tensors at scoring and
               at the forward, its terms of the loss

From these declarations come the config's validation (names, knob values and ranges, combinations,
knobs nothing reads: knob_rules.py), the dispatch (`registry[name]`), `harness config --explain` and
docs/objective.md's knob table (explain.py; a test keeps the doc equal to it).

An extension (kind "extension", extensions.py) is a mode that no knob selects: it is active when
its `switch` knob says so (SimKO: simko_top_k > 0).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from types import UnionType
from typing import Annotated, Any, Generic, Literal, TypeVar, Union, get_args, get_origin

from pydantic import Field, StrictBool, TypeAdapter, ValidationError

ImplT = TypeVar("ImplT")
BUILTIN = "harness"  # the origin of every mode the package itself declares

# kind -> its registry: "baseline", "scale", "std", "batch_std_of", "ratio", "clip", "rollout_is", "kl_estimator",
# "kl_placement", "agg", "dpo_loss_type" (the knobs that take a named mode) and "extension"
KINDS: dict[str, Modes] = {}
RESERVED: set[str] = set()  # the config's own fields (objective/config.py fills it): no mode may declare them
KIND_ORDER = (
    "baseline",
    "scale",
    "std",
    "batch_std_of",
    "ratio",
    "clip",
    "rollout_is",
    "kl_estimator",
    "kl_placement",
    "agg",
    "entropy_agg",
    "dpo_loss_type",
    "extension",
)  # documentation order (docs/objective.md, --explain)


class KnobError(ValueError):
    """A knob's value is outside what its declaration allows; `knob` names it (the run config
    reports it as `objective.<knob>`)."""

    def __init__(self, knob: str, message: str, value: Any):
        super().__init__(f"{knob}: {message} (got {value!r})")
        self.knob, self.reason, self.value = knob, message, value


BOOL_MSG = "Input should be a valid boolean: true or false"  # pydantic's strict-bool error, saying what is allowed


@dataclass(frozen=True)
class Knob:
    """A knob a mode owns: YAML key `objective.<name>`, its default, its range and one line of doc.
    type None: the default's type (float for 1.0). ge/gt/le/lt: bounds; nullable: None allowed."""

    name: str
    default: Any
    doc: str
    type: Any = None
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    nullable: bool = False
    required: bool = False  # must not be None while its mode is selected (norm_constant)
    strict: bool = False  # set while its mode is not selected is a contradiction: ObjectiveConfig refuses it
    # (every other unread knob is refused by the run config, which knows what the user set)

    @property
    def base_type(self) -> Any:
        return self.type or type(self.default)

    @property
    def annotation(self) -> Any:
        bounds = {k: v for k in ("ge", "gt", "le", "lt") if (v := getattr(self, k)) is not None}
        if self.base_type is float:
            bounds["allow_inf_nan"] = False  # a knob is a finite number, as every config value
        base = StrictBool if self.base_type is bool else self.base_type  # "yes" or 1 is not read as true
        ann = Annotated[base, Field(**bounds)]
        return ann | None if self.nullable else ann

    def validate(self, value: Any) -> Any:
        """The value as the config stores it (1 -> 1.0 for a float knob); KnobError otherwise.
        A boolean is never a number."""
        if isinstance(value, bool) and ({int, float} & set(_members(self.base_type))):
            raise KnobError(self.name, "a boolean where a number is expected; write a number", value)
        try:
            return _adapter(self).validate_python(value)
        except ValidationError as err:
            first = err.errors()[0]
            msg = BOOL_MSG if first["type"] == "bool_type" else first["msg"]
            raise KnobError(self.name, msg, value) from None

    def range_text(self) -> str:
        """'a float > 0', 'an int >= 1', 'true or false' (for messages and the docs table)."""
        t = self.base_type
        if t is bool:
            return "true or false"
        names = {int: "an int", float: "a float", str: "a string"}
        words = " or ".join(names.get(a, getattr(a, "__name__", str(a))) for a in _members(t))
        parts = [
            f"{op} {v:g}"
            for op, v in ((">=", self.ge), (">", self.gt), ("<=", self.le), ("<", self.lt))
            if v is not None
        ]
        return f"{words} {' and '.join(parts)}".strip() + (" or null" if self.nullable else "")


def _members(t: Any) -> tuple:
    """The types of a union (float | str -> (float, str)); any other type alone."""
    return get_args(t) if get_origin(t) in (Union, UnionType) else (t,)


_ADAPTERS: dict[Knob, TypeAdapter] = {}


def _adapter(knob: Knob) -> TypeAdapter:
    if knob not in _ADAPTERS:
        _ADAPTERS[knob] = TypeAdapter(knob.annotation)
    return _ADAPTERS[knob]


@dataclass(frozen=True)
class Requires:
    """What a mode needs of another knob while it is selected: its value in `allowed`, or, for a
    rule that is not a list of values, `accepts(value, cfg)` (with `allowed_text` saying what passes)."""

    knob: str
    allowed: tuple = ()
    why: str = ""
    accepts: Callable[[Any, Any], bool] | None = None
    allowed_text: str = ""
    shows: tuple[str, ...] = ()  # other knobs the rule reads, their values named in the message too
    explain: Callable[[Any, Any], str] | None = None  # (value, cfg) -> the reason this value fails, for `why`

    def problem(self, cfg: Any, owner: str) -> str | None:
        """None if cfg meets the rule, else the one-line message naming the knob, the mode and what is allowed."""
        value = getattr(cfg, self.knob)
        ok = self.accepts(value, cfg) if self.accepts is not None else value in self.allowed
        if ok:
            return None
        allowed = self.allowed_text or repr(list(self.allowed))
        owner = owner.removeprefix("objective.")
        others = "".join(f", {k}={getattr(cfg, k)!r}" for k in self.shows)
        why = self.explain(value, cfg) if self.explain is not None else self.why
        return f"{self.knob}={value!r}{others} with {owner}: {why}; allowed {self.knob} with {owner}: {allowed}"


@dataclass(frozen=True)
class Mode(Generic[ImplT]):
    """One value of a knob (or one extension): see the module docstring."""

    impl: ImplT
    doc: str
    knobs: tuple[Knob, ...] = ()
    reads: tuple[str, ...] = ()
    requires: tuple[Requires, ...] = ()
    min_group_size: int = 1  # train.group_size this mode needs (a group statistic: 2)
    group_rule: Callable[[Any, int], str | None] | None = None  # (cfg, G) -> problem with train.group_size
    hooks: Any = None  # extensions.Hooks: the extras slot
    # (the resolved run config) -> what this mode says of the whole run while selected: a list of warnings, or a
    # ValueError naming the keys for a run it refuses; the run config calls it (harness/config/objective.py)
    run_rule: Callable[[Any], list[str]] | None = None
    switch: str = ""  # extensions only: the knob whose value turns it on
    when: str = ""  # when it is active, as a user writes it ("objective.clip='sapo'"); set by its registry
    origin: str = BUILTIN  # the module that registered it


class Modes(Mapping[str, ImplT]):
    """The modes of one kind, in documentation order; `registry[name]` -> the implementation.
    Open: `register(name, mode)` adds one (a researcher's module, docs/extending.md).
    build: turns a decorated function (and the decorator's extra keywords) into this kind's impl."""

    def __init__(
        self,
        kind: str,
        modes: dict[str, Mode] | None = None,
        build: Callable[..., Any] | None = None,
        active: Callable[[Any, str, Mode], bool] | None = None,
    ):
        self.kind = kind
        self.knob = kind
        self.modes: dict[str, Mode] = {}
        self.build = build or (lambda fn: fn)
        self._active = active or (lambda cfg, name, mode: getattr(cfg, kind, None) == name)
        self.spellings: dict[str, str] = {}  # another tool's name for a setting -> how to write it here
        for name, mode in (modes or {}).items():
            self.register(name, mode)
        KINDS[kind] = self

    # ------------------------------------------------------------------ registration
    def register(self, name: str, mode: Mode) -> Mode:
        """Add (or, from the module that registered it, replace) mode `name`; ValueError when another
        module already owns the name or a knob it declares clashes with another declaration."""
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"{self.kind} name {name!r} must be an identifier (letters, digits, _)")
        old = self.modes.get(name)
        if old is not None and old.origin != mode.origin:
            raise ValueError(f"{self.kind} {name!r} is already registered by {old.origin}; pick another name")
        _check_knobs(mode, self.kind, name)
        when = mode.when or (f"objective.{mode.switch} set" if mode.switch else f"objective.{self.kind}={name!r}")
        self.modes[name] = replace(mode, when=when)
        return self.modes[name]

    def unregister(self, name: str) -> None:
        """Remove mode `name` (a test's or a notebook's clean-up); a built-in mode cannot be removed."""
        if self.modes[self.check(name)].origin == BUILTIN:
            raise ValueError(f"{self.kind} {name!r} is built in")
        del self.modes[name]
        DECLARED.pop((self.kind, name), None)

    def active(self, cfg: Any) -> list[tuple[str, Mode]]:
        """The modes of this kind that `cfg` selects (one for a knob; any number of extensions)."""
        return [(n, m) for n, m in self.modes.items() if self._active(cfg, n, m)]

    # ------------------------------------------------------------------ lookup
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.modes)

    def builtin_names(self) -> tuple[str, ...]:
        """The modes the package declares (docs/objective.md lists exactly these)."""
        return tuple(n for n, m in self.modes.items() if m.origin == BUILTIN)

    @property
    def literal(self) -> Any:
        """Literal[every name registered now] (a snapshot: the config validates against the registry itself)."""
        return Literal[self.names]  # type: ignore[valid-type]

    def check(self, name: str) -> str:
        """name if registered, else ValueError naming the knob, the value and the allowed values."""
        if name not in self.modes:
            hint = f" ({name!r} is {self.spellings[name]})" if name in self.spellings else ""
            raise ValueError(f"unknown {self.kind} {name!r}{hint}; allowed {self.kind} values: {list(self.names)}")
        return name

    def doc(self, name: str) -> str:
        return self.modes[self.check(name)].doc

    def mode(self, name: str) -> Mode:
        return self.modes[self.check(name)]

    def __getitem__(self, name: str) -> ImplT:
        return self.modes[self.check(name)].impl

    def __iter__(self) -> Iterator[str]:
        return iter(self.modes)

    def __len__(self) -> int:
        return len(self.modes)

    def __contains__(self, name: object) -> bool:
        return name in self.modes

    def describe(self) -> str:
        """A markdown list of the modes and their docs."""
        return "\n".join(f"- `{n}`: {m.doc}" for n, m in self.modes.items())


def _check_knobs(mode: Mode, kind: str, name: str) -> None:
    """A knob name is declared once (or identically by several modes, e.g. DPPO's two clips); the mode
    being replaced (re-registered by its own module) does not count."""
    for knob in mode.knobs:
        if knob.name in RESERVED or not knob.name.isidentifier():
            raise ValueError(
                f"{kind} {name!r} declares knob {knob.name!r}: a knob name is an identifier that is not "
                "already a field of every config (it may read one: reads=[...])"
            )
        if knob.default is not None or not (knob.nullable or knob.required):
            try:
                knob.validate(knob.default)
            except KnobError as err:
                raise ValueError(
                    f"{kind} {name!r} declares knob {knob.name!r} with default {knob.default!r}, outside its own "
                    f"range ({err.reason}); allowed: a default that is {knob.range_text()}"
                ) from None
        for other_kind, reg in KINDS.items():
            for other_name, other in reg.modes.items():
                if (other_kind, other_name) == (kind, name):
                    continue
                if any(k.name == knob.name and k != knob for k in other.knobs):
                    raise ValueError(
                        f"{kind} {name!r} declares knob {knob.name!r}, which {other_kind} {other_name!r} "
                        "already declares differently; use another name"
                    )


# ----------------------------------------------------------------------------- the decorator
_LOADING: list[str] = []  # the plugin module being imported (plugins.py): the origin of what it registers
# (kind, name) -> (the module whose code called the decorator, the decorated function's module)
DECLARED: dict[tuple[str, str], tuple[str, str]] = {}

# kind -> the arguments its function is called with (docs/extending.md), and its build keywords' functions'
CALLS: dict[str, tuple[str, ...]] = {
    "baseline": ("rewards", "cfg"),
    "scale": ("centred", "rewards", "cfg"),
    "batch_std_of": ("r", "u"),
    "ratio": ("logp", "old_logp", "mask", "adv", "cfg"),
    "clip": ("ratio", "adv", "logp", "old_logp", "cfg"),
    "rollout_is": ("log_ratio", "mask", "cfg"),
    "agg": ("loss", "mask", "num_seqs", "num_tokens", "cfg"),
    "entropy_agg": ("loss_ent", "keep", "agg"),
    "kl_estimator": ("d",),
    "dpo_loss_type": ("pair", "cfg"),
    "std": ("x",),
    "kl_placement": ("cfg",),
    "extension": ("cfg",),
    "clip with mask": ("ratio", "adv", "logp", "old_logp", "cfg", "mask"),
    "clip masks": ("ratio", "adv", "logp", "old_logp", "cfg"),
    "ratio masks": ("logp", "old_logp", "adv", "cfg"),
    "clip metrics": ("ratio", "adv", "logp", "old_logp", "cfg", "mask"),
    "agg weights": ("mask", "num_seqs", "num_tokens", "cfg"),
    "hook advantages": ("cfg", "rewards", "mask", "group_size", "inputs"),
    "hook scoring": ("cfg", "rewards", "mask", "group_size"),
    "hook old_forward": ("cfg", "logits"),
    "hook train_forward": ("cfg", "logits", "extras"),
    "hook token_loss": ("cfg", "logp", "old_logp", "adv", "mask", "entropy", "extras"),
    "hook row_weights": ("cfg", "extras"),
    "hook loss_term": ("cfg", "inputs", "num_seqs", "num_tokens"),
    "hook token_mask": ("cfg", "entropy", "mask", "extras"),
    "hook rollout_mask": ("cfg", "logp", "rollout_logp", "adv", "mask"),
    "hook reward_shaping": ("cfg", "lengths", "max_new_tokens"),
    "hook refill_filter": ("cfg", "rewards", "correct", "group_size"),
    "hook group_filter": ("cfg", "rewards", "correct", "group_size"),
    "hook retire_at": ("cfg",),
    "hook reset_reference": ("cfg", "step"),
    "hook resample": ("cfg", "rewards", "generator"),
}


def check_call(fn: Any, call: str, where: str) -> None:
    """ValueError (one line) unless `fn` can be called as CALLS[call] says (positionally); a callable
    without a signature (a builtin) passes."""
    params = CALLS[call]
    if not callable(fn):
        raise ValueError(f"{where}: {fn!r} is not a function; it is called as fn({', '.join(params)})")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(*params)
    except TypeError as err:
        name = getattr(fn, "__name__", type(fn).__name__)
        raise ValueError(
            f"{where}: {name}{sig} cannot be called as fn({', '.join(params)}) ({err}); a {call} function "
            "takes those arguments, in that order (docs/extending.md)"
        ) from None


def _check_calls(kind: str, name: str, fn: Callable, build: dict, hooks: Any) -> None:
    """The decorated function, its build keywords' functions and its hooks fit the calls they will get."""
    where = f"{kind} {name!r}"
    if kind in CALLS:
        call = "hook advantages" if build.get("per_token") else "clip with mask" if build.get("masked") else kind
        check_call(fn, call, where)
    for key, value in build.items():
        if f"{kind} {key}" in CALLS and value is not None:
            check_call(value, f"{kind} {key}", f"{where} {key}=")
    hooks_with_calls = ("advantages", "scoring", "old_forward", "train_forward", "token_loss", "row_weights")
    data_side = ("reward_shaping", "refill_filter", "group_filter", "retire_at", "reset_reference", "resample")
    for key in (*hooks_with_calls, "loss_term", "token_mask", "rollout_mask", *data_side):
        value = getattr(hooks, key, None)
        if value is not None:
            check_call(value, f"hook {key}", f"{where} hooks.{key}")


def _per_token(kind: str, name: str, fn: Callable, build: dict, hooks: Any) -> tuple[Any, Any]:
    """`per_token=True` (a baseline): the function is the mode's `advantages` hook, and the mode has no group
    baseline (impl None) -> (impl, hooks); otherwise the kind's impl and the hooks as given."""
    if not build.pop("per_token", False):
        return KINDS[kind].build(fn, **build), hooks
    if kind != "baseline" or hooks is None or hooks.advantages is not None:
        raise ValueError(
            f"{kind} {name!r}: per_token=True is for a baseline with hooks=Hooks(...) and no advantages= hook "
            "(the decorated function is its advantages hook)"
        )
    return None, replace(hooks, advantages=fn)


def origin_of(module: str) -> str:
    """The origin of what `module` registers: the plugin being imported, BUILTIN for the package's own
    modules, else the module itself (a notebook's, a test's)."""
    if _LOADING:
        return _LOADING[-1]
    return BUILTIN if module.startswith(BUILTIN + ".") else module


def _origin(fn: Any) -> str:
    return origin_of(getattr(fn, "__module__", None) or "__main__")


def register(
    kind: str,
    name: str,
    *,
    doc: str,
    knobs: tuple[Knob, ...] | list[Knob] = (),
    reads: tuple[str, ...] | list[str] = (),
    requires: tuple[Requires, ...] | list[Requires] = (),
    min_group_size: int = 1,
    hooks: Any = None,
    switch: str = "",
    when: str = "",
    group_rule: Callable[[Any, int], str | None] | None = None,
    run_rule: Callable[[Any], list[str]] | None = None,
    **build: Any,
) -> Callable:
    """Decorator: register the function as mode `name` of `kind` (a knob that takes a named mode, or
    "extension"). The function's signature is the kind's (docs/extending.md lists them); `build`
    holds the kind's extra parts (clip: masks=, masked=, metrics=; agg: weights=; ratio: masks=,
    per_sequence=; baseline: per_token=True, the function is then its `advantages` hook); `run_rule(run)`
    returns warnings about the whole run config, or raises ValueError to refuse it (docs/extending.md).
    Returns the function unchanged. The package's own modes are declared with it too, each beside its
    function (`DECLARED` records where: tests/objective/test_one_way_to_register.py)."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; allowed kinds: {sorted(KINDS)}")
    reg = KINDS[kind]

    def decorate(fn: Callable) -> Callable:
        _check_calls(kind, name, fn, build, hooks)
        impl, mode_hooks = _per_token(kind, name, fn, dict(build), hooks)
        mode = Mode(
            impl,
            doc,
            tuple(knobs),
            tuple(reads),
            tuple(requires),
            min_group_size,
            group_rule=group_rule,
            run_rule=run_rule,
            hooks=mode_hooks,
            switch=switch,
            when=when,
            origin=_origin(fn),
        )
        reg.register(name, mode)
        module = getattr(fn, "__module__", None) or "__main__"
        DECLARED[(kind, name)] = (sys._getframe(1).f_globals.get("__name__", "__main__"), module)
        return fn

    return decorate


def _kind(kind: str) -> Callable:
    def reg(name: str, **decl: Any) -> Callable:
        return register(kind, name, **decl)

    reg.__name__ = f"register_{kind}"
    reg.__doc__ = f'`register("{kind}", name, ...)`: see `register`.'
    return reg


register_baseline = _kind("baseline")
register_scale = _kind("scale")
register_ratio = _kind("ratio")
register_clip = _kind("clip")
register_agg = _kind("agg")
register_kl_estimator = _kind("kl_estimator")
register_extension = _kind("extension")


@contextmanager
def loading(module: str) -> Iterator[None]:
    """Context: what is registered inside has origin `module` (plugins.import_plugins)."""
    _LOADING.append(module)
    try:
        yield
    finally:
        _LOADING.pop()


def all_knobs() -> dict[str, tuple[Knob, list[tuple[str, str, Mode]]]]:
    """Every declared knob -> (its declaration, [(kind, mode name, mode) declaring it])."""
    out: dict[str, tuple[Knob, list]] = {}
    for kind, reg in sorted(KINDS.items(), key=lambda kv: KIND_ORDER.index(kv[0]) if kv[0] in KIND_ORDER else 99):
        for name, mode in reg.modes.items():
            for k in mode.knobs:
                out.setdefault(k.name, (k, []))[1].append((kind, name, mode))
    return out


def readers(knob: str) -> list[tuple[str, str, Mode]]:
    """Every (kind, mode name, mode) that owns or reads `knob`."""
    return [
        (kind, name, m)
        for kind, reg in KINDS.items()
        for name, m in reg.modes.items()
        if knob in m.reads or any(k.name == knob for k in m.knobs)
    ]


__all__ = [
    "Knob",
    "KnobError",
    "Requires",
    "Mode",
    "Modes",
    "KINDS",
    "register",
    "register_baseline",
    "register_scale",
    "register_ratio",
    "register_clip",
    "register_agg",
    "register_kl_estimator",
    "register_extension",
    "all_knobs",
    "readers",
    "loading",
    "origin_of",
    "DECLARED",
]
