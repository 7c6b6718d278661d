"""The study file's schema: every key of experiments/<name>.yaml and what it may hold, checked
(pydantic, as harness/config/ checks a run config) before anything is expanded or loaded.

    StudyFile      the top level: name, description, base, grid, zip, arm_overrides, seeds, exclude, scale,
                   scales, probe, final_eval, tune, hypotheses, correction (docs/studies.md "The study file")
    ScaleSection   scales.<smoke|cpu|gpu>: dotted run-config keys, plus seeds, final_eval, probe, reward_model
    RewardModelSpec reward_model: `harness train-rm` options of a reward model the study trains first
    ProbeSettings  probe: the mechanism probe's settings (harness/probes/)
    TuneSection    tune: an Optuna search (harness/experiment/tune.py), its space of distributions

Unknown keys are errors; a dotted key (in grid, zip, scales, probe arms, tune.space) must be a
run-config key; a boolean is never a number. `validate_study_file(raw)` raises StudyError whose
message names the key, the value and what is allowed. The schema checks each part on its own;
what needs the whole file (an axis key listed twice, a scale overriding an axis, `exclude`
matching a cell) is checked by load.py and expand.py, and every cell's run config by
harness.config.build_config.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import types
import typing
from typing import Annotated, Any, Literal, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationError,
    model_validator,
)

from harness.experiment.hypotheses import Hypothesis
from harness.experiment.keys import key_problem
from harness.experiment.study import ARM, SAFE_NAME, SCALES, SEED, StudyError

Scale = Literal["smoke", "cpu", "gpu", "dataset"]
assert typing.get_args(Scale) == SCALES
Number = StrictInt | StrictFloat


def _run_config_key(key: Any) -> str:
    problem = key_problem(key)
    if problem:
        raise ValueError(problem)
    return key


def _values(value: Any) -> list:
    """An axis: a non-empty list whose values are distinct."""
    if not isinstance(value, list) or not value:
        raise ValueError("must be a non-empty list of values")
    seen: list = []
    for v in value:
        if v in seen:
            raise ValueError(f"value {v!r} is listed twice")
        seen.append(v)
    return value


def _seeds(value: Any) -> list:
    if isinstance(value, list) and not all(isinstance(s, int) and not isinstance(s, bool) for s in value):
        raise ValueError("seeds must be integers")
    return _values(value)


def _base(value: Any) -> Any:
    if value is not None and not isinstance(value, (str, dict)):
        raise ValueError("must be a run-config mapping or a path to a run YAML")
    return value


RunConfigKey = Annotated[str, AfterValidator(_run_config_key)]
AxisValues = Annotated[list, BeforeValidator(_values)]
Seeds = Annotated[list, BeforeValidator(_seeds)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


# ----------------------------------------------------------------------------- probe, final eval


class ProbeSettings(_Strict):
    """probe: (top level and per scale; the scale's keys win). Defaults: harness/probes/__init__.py."""

    arms: dict[str, dict[RunConfigKey, Any] | None] | None = None  # label -> dotted overrides of the first cell
    batches: Annotated[StrictInt, Field(ge=1)] | None = None
    probe_prompts: Annotated[StrictInt, Field(ge=1)] | None = None
    probe_samples: Annotated[StrictInt, Field(ge=1)] | None = None
    prompts_per_batch: Annotated[StrictInt, Field(ge=1)] | None = None
    router_noise: list[Annotated[Number, Field(ge=0)]] | None = None  # the MoE probe's noise levels


class RewardModelSpec(_Strict):
    """reward_model: a reward model the study trains first (`harness train-rm`, the Snakefile's rule reward_model),
    named `@reward_model` in the cells' task.rewards (top level and per scale; the scale's keys win). Keys: those
    of `harness train-rm` (docs/reward_models.md); `pairs` is required, a path from the repository root."""

    pairs: str | None = None  # --pairs FILE
    base: str | None = None  # --base
    steps: Annotated[StrictInt, Field(ge=1)] | None = None
    epochs: Annotated[Number, Field(gt=0)] | None = None
    lr: Annotated[Number, Field(gt=0)] | None = None
    batch_size: Annotated[StrictInt, Field(ge=1)] | None = None
    eval_fraction: Annotated[Number, Field(ge=0, lt=1)] | None = None
    seed: StrictInt | None = None
    center_rewards_coefficient: Annotated[Number, Field(ge=0)] | None = None
    max_length: Annotated[StrictInt, Field(ge=1)] | None = None


class FinalEval(_Strict):
    """final_eval: settings of `harness eval` on each cell's final checkpoint (the Snakefile)."""

    n_samples: Annotated[StrictInt, Field(ge=1)] | None = None  # --n-samples N
    num_prompts: Annotated[StrictInt, Field(ge=1)] | None = None  # --num-prompts P
    vs_initial: StrictBool | None = None  # --vs-initial: the starting policy too, same prompts and seed (paired)


# ----------------------------------------------------------------------------- tune


class _Range(_Strict):
    """A numeric search range: low < high, and low > 0 on a log scale."""

    @model_validator(mode="after")
    def _range(self):
        if self.low >= self.high:
            raise ValueError(f"low={self.low} must be < high={self.high}")
        if self.log and self.low <= 0:
            raise ValueError(f"log=true needs low > 0 (got low={self.low})")
        return self


class FloatDistribution(_Range):
    type: Literal["float"]
    low: Number
    high: Number
    log: StrictBool = False
    step: Annotated[Number, Field(gt=0)] | None = None


class IntDistribution(_Range):
    type: Literal["int"]
    low: StrictInt
    high: StrictInt
    log: StrictBool = False
    step: Annotated[StrictInt, Field(ge=1)] | None = None


class CategoricalDistribution(_Strict):
    type: Literal["categorical"]
    choices: AxisValues


Distribution = Annotated[FloatDistribution | IntDistribution | CategoricalDistribution, Field(discriminator="type")]


def _optuna_options(cls_path: str, options: dict) -> None:
    """The options of a sampler / pruner section (besides name, seed) must be keywords of its Optuna class."""
    if not options:
        return
    module, name = cls_path.rsplit(".", 1)
    allowed = sorted(set(inspect.signature(getattr(importlib.import_module(module), name)).parameters) - {"seed"})
    bad = sorted(k for k in options if k not in allowed)
    if bad:
        raise ValueError(f"unknown option(s) {bad} of optuna's {name}; allowed: {allowed}")


class Sampler(BaseModel):
    """tune.sampler: tpe (options: optuna.samplers.TPESampler's keywords) | random; seed."""

    model_config = ConfigDict(extra="allow")
    name: Literal["tpe", "random"] = "tpe"
    seed: StrictInt | None = None

    @model_validator(mode="after")
    def _options(self):
        cls = "RandomSampler" if self.name == "random" else "TPESampler"
        _optuna_options(f"optuna.samplers.{cls}", self.model_extra or {})
        return self


class Pruner(BaseModel):
    """tune.pruner: median (options: optuna.pruners.MedianPruner's keywords) | none."""

    model_config = ConfigDict(extra="allow")
    name: Literal["median", "none"] = "median"

    @model_validator(mode="after")
    def _options(self):
        if self.name == "none" and self.model_extra:
            raise ValueError(f"name=none takes no options (got {sorted(self.model_extra)})")
        _optuna_options("optuna.pruners.MedianPruner", self.model_extra or {})
        return self


class TuneSection(_Strict):
    """tune: an Optuna search over run-config knobs (harness/experiment/tune.py)."""

    metric: str = "eval/pass_at_1"
    direction: Literal["maximize", "minimize"] = "maximize"
    trials: Annotated[StrictInt, Field(ge=1)] = 10
    sampler: Sampler | None = None
    pruner: Pruner | None = None
    space: Annotated[dict[RunConfigKey, Distribution], Field(min_length=1)]
    timeout_s: Annotated[Number, Field(gt=0)] | None = None


# ----------------------------------------------------------------------------- scales, zip, top level


class ScaleSection(BaseModel):
    """scales.<scale>: dotted run-config keys (overrides of the base), plus seeds, final_eval, probe."""

    model_config = ConfigDict(extra="allow")
    seeds: Seeds | None = None
    final_eval: FinalEval | None = None
    probe: ProbeSettings | None = None
    reward_model: RewardModelSpec | None = None

    @model_validator(mode="after")
    def _keys(self):
        for key in self.model_extra or {}:
            _run_config_key(key)
        return self


def _zip_group(group: Any) -> dict:
    """A zip group: dotted key -> list (equal lengths), optionally `arm` -> labels; the points distinct."""
    if not isinstance(group, dict) or not group:
        raise ValueError("must be a mapping of dotted key -> list of values")
    for key, values in group.items():
        if key == SEED:
            raise ValueError("seed: use the top-level `seeds:` list for seeds")
        problem = None if key == ARM else key_problem(key)
        if problem:
            raise ValueError(problem)
        if not isinstance(values, list) or not values:
            raise ValueError(f"{key}: must be a non-empty list of values (got {values!r})")
        if key == ARM:  # labels name cells: distinct (a key's values may repeat; the points may not)
            try:
                _values([str(x) for x in values])
            except ValueError as err:
                raise ValueError(f"{key}: {err}") from None
    lengths = {k: len(v) for k, v in group.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"lists must have equal lengths (got {lengths})")
    keys = [k for k in group if k != ARM]
    if not keys:
        raise ValueError(f"needs at least one run-config key besides `{ARM}`")
    if ARM in group:  # labelled arms may share these keys and differ by `arm_overrides` (load.py checks that)
        return group
    try:
        _values(list(zip(*(group[k] for k in keys))))
    except ValueError as err:
        raise ValueError(f"the tuple of {keys}: {err}") from None
    return group


def _grid(grid: Any) -> Any:
    if isinstance(grid, dict) and SEED in grid:
        raise ValueError("seed is not a grid axis: use the top-level `seeds:` list for seeds")
    return grid


def _name(name: str) -> str:
    if not SAFE_NAME.match(name):
        raise ValueError("may only use letters, digits and . _ + -")
    return name


class StudyFile(_Strict):
    """A study file (experiments/<name>.yaml); docs/studies.md says what each committed one is for."""

    name: Annotated[str, AfterValidator(_name)] | None = None  # default: the file's stem
    description: str | None = None
    base: Annotated[Any, BeforeValidator(_base)] = (
        None  # a run config: a path (relative to the study file) or a mapping
    )
    grid: Annotated[dict[RunConfigKey, AxisValues], BeforeValidator(_grid)] | None = None
    zip: list[Annotated[dict, BeforeValidator(_zip_group)]] | None = None
    # arm label -> dotted overrides its cells also get, not an axis: no tag, no id part (an arm added
    # beside reported ones leaves their cells' configs unchanged); load.py checks the labels and keys
    arm_overrides: dict[str, dict[RunConfigKey, Any]] | None = None
    seeds: Seeds | None = None  # default: the base's seed
    exclude: list[Annotated[dict[str, Any], Field(min_length=1)]] | None = None  # keys checked against the axes
    scale: Scale | None = None  # default scale (override: --scale)
    scales: dict[Scale, ScaleSection | None] | None = None
    probe: ProbeSettings | None = None
    final_eval: FinalEval | None = None
    tune: TuneSection | None = None
    reward_model: RewardModelSpec | None = None  # a reward model trained first (`@reward_model` in the cells)
    # preregistered claims, one family (hypotheses.py; load.py checks their arms, metrics and steps)
    hypotheses: list[Hypothesis] | None = None
    correction: Literal["holm", "none"] = "holm"  # the family's multiplicity correction (`harness verdict`)


TOP_LEVEL_KEYS = tuple(StudyFile.model_fields)


# ----------------------------------------------------------------------------- errors


def _unwrap(annotation: Any) -> Any:
    """The model or container behind Annotated, Optional and a union holding one model."""
    while True:
        origin, args = typing.get_origin(annotation), typing.get_args(annotation)
        if origin is Annotated:
            annotation = args[0]
            continue
        if origin in (Union, types.UnionType):
            rest = [a for a in args if a is not type(None)]
            models = [a for a in rest if isinstance(a, type) and issubclass(a, BaseModel)]
            if len(models) == 1 or len(rest) == 1:
                annotation = (models or rest)[0]
                continue
        return annotation


def _allowed_at(loc: tuple) -> list[str]:
    """Field names of the schema model at `loc` (for an unknown key's message)."""
    model: Any = StudyFile
    for part in loc:
        members = typing.get_args(model) if typing.get_origin(model) in (Union, types.UnionType) else ()
        tagged = [
            m
            for m in members
            if isinstance(m, type)
            and issubclass(m, BaseModel)
            and "type" in m.model_fields
            and typing.get_args(m.model_fields["type"].annotation) == (part,)
        ]
        if tagged:  # a tune distribution: the member its `type` names
            model = tagged[0]
            continue
        if isinstance(model, type) and issubclass(model, BaseModel):
            field = model.model_fields.get(str(part))
            if field is None:
                return []
            model = _unwrap(field.annotation)
        else:
            origin, args = typing.get_origin(model), typing.get_args(model)
            if origin in (dict, list) and args:
                model = _unwrap(args[-1])
            else:
                return []
    return sorted(model.model_fields) if isinstance(model, type) and issubclass(model, BaseModel) else []


def _where(loc: tuple) -> str:
    """('zip', 0, 'arm') -> 'zip[0].arm'; dict-key markers and the tag of a tune distribution dropped."""
    out = ""
    for i, part in enumerate(loc):
        if part == "[key]" or (part in ("float", "int", "categorical") and "space" in loc[:i]):
            continue
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def format_errors(err: ValidationError) -> list[str]:
    lines = []
    for e in err.errors():
        loc = tuple(x for x in e["loc"] if not (isinstance(x, str) and x.startswith("function-")))
        where = _where(loc) or "the study"
        msg = e["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
        if e["type"] == "extra_forbidden":
            allowed = _allowed_at(loc[:-1])
            near = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
            lines.append(
                f"unknown key '{where}'{f' (did you mean {near[0]!r}?)' if near else ''}; allowed keys here: {allowed}"
            )
        elif e["type"] == "union_tag_invalid" or e["type"] == "union_tag_not_found":
            lines.append(f"'{where}': needs type: float | int | categorical (got {e.get('input')!r})")
        else:
            lines.append(f"'{where}': {msg} (got {e.get('input')!r})")
    return lines


def validate_study_file(raw: Any, source: str = "study") -> StudyFile:
    """The study file as a StudyFile; StudyError naming each wrong key, its value and what is allowed."""
    if not isinstance(raw, dict):
        raise StudyError(f"{source}: a study must be a YAML mapping (got {type(raw).__name__})")
    try:
        return StudyFile.model_validate(raw)
    except ValidationError as err:
        lines = format_errors(err)
        if len(lines) == 1:
            raise StudyError(f"{source}: {lines[0]}") from None
        raise StudyError(f"{source} ({len(lines)} errors):\n  " + "\n  ".join(lines)) from None
