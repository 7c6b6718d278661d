"""Grid expansion: a parsed study -> its cells (Cartesian product of the axes minus `exclude`),
each with its id, tags, tracking settings and validated RunConfig. A value `@reward_model` anywhere in
a cell's config becomes the folder of the reward model the study trains first (its `reward_model:`);
the cells are validated before that folder exists (build_config's reward_models_to_build)."""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

from harness.config import ConfigError, build_config
from harness.experiment.ids import format_value, short_names
from harness.experiment.keys import apply_override
from harness.experiment.study import ARM, REWARD_MODEL, SEED, Cell, Study, StudyError


def expand(study: Study, validate: bool = True) -> list[Cell]:
    """The cells of the study (Cartesian product of axes minus exclusions), each validated."""
    key_names = short_names([k for ax in study.axes for k in ax.keys])
    lookup = _exclusion_keys(study, key_names)
    hits = [0] * len(study.exclude)
    base = copy.deepcopy(study.base)
    for k, v in study.scale_overrides.items():
        apply_override(base, k, v)

    cells: list[Cell] = []
    ids: dict[str, dict] = {}
    for combo in itertools.product(*[range(len(ax)) for ax in study.axes]):
        parts, axes_vals, overrides = _point(study, combo, key_names)
        cid = "__".join(parts)
        dropped = False
        for i, ex in enumerate(study.exclude):
            if all(axes_vals.get(lookup[k]) == v for k, v in ex.items()):
                hits[i] += 1
                dropped = True
        if dropped:
            continue
        if cid in ids:
            raise StudyError(f"cells {ids[cid]} and {overrides} get the same id {cid!r}; make the values distinct")
        ids[cid] = overrides
        cells.append(_cell(study, base, cid, parts, axes_vals, overrides))

    for i, n in enumerate(hits):
        if n == 0:
            raise StudyError(f"exclude[{i}]: {study.exclude[i]} matches no cell (a typo in a key or value?)")
    if not cells:
        raise StudyError("the study has no cells left after `exclude`")
    if validate:
        for c in cells:
            _validate(study, c)
    study.cells = cells
    return cells


def _exclusion_keys(study: Study, key_names: dict[str, str]) -> dict[str, str]:
    """Each name an exclusion may use (a dotted key, its short name, `arm` or `seed`) -> the axes' key."""
    lookup = {ARM: ARM, SEED: "seed"}
    for k, s in key_names.items():
        lookup[k] = lookup[s] = k
    for i, ex in enumerate(study.exclude):
        for k in ex:
            if k not in lookup:
                raise StudyError(f"exclude[{i}].{k}: not an axis of the study; axes: {list(key_names) + [ARM, SEED]}")
    return lookup


def _point(study: Study, combo: tuple[int, ...], key_names: dict[str, str]) -> tuple[list[str], dict, dict]:
    """One grid point: (its id's parts, its value on each axis key (and `arm`), its dotted overrides)."""
    parts, axes_vals, overrides = [], {}, {}
    for ax, j in zip(study.axes, combo):
        point = ax.values[j]
        overrides.update(dict(zip(ax.keys, point)))
        if ax.labels:
            parts.append(f"{ARM}={format_value(ax.labels[j])}")
            axes_vals[ARM] = ax.labels[j]
        else:
            for k, v in zip(ax.keys, point):
                parts.append(f"{key_names[k]}={format_value(v)}")
        for k, v in zip(ax.keys, point):
            axes_vals[k] = v
    # the arm's own extra keys (study file `arm_overrides`): set in its config, neither an axis nor a tag
    overrides.update(study.arm_overrides.get(str(axes_vals.get(ARM)), {}) if ARM in axes_vals else {})
    return parts, axes_vals, overrides


def _cell(study: Study, base: dict, cid: str, parts: list[str], axes_vals: dict, overrides: dict) -> Cell:
    """The cell's run config (base + its overrides) with its MLflow experiment, run name and tags."""
    data = copy.deepcopy(base)
    for k, v in overrides.items():
        apply_override(data, k, v)
    data = _with_reward_model(study, data)
    tags = {
        "study": study.name,
        "scale": study.scale,
        "cell": cid,
        "variant": "__".join(p for p in parts if not p.startswith(f"{SEED}=")) or "base",
    }
    tags.update({k: _tag_value(v) for k, v in axes_vals.items()})
    tracking = dict(data.get("tracking") or {})
    tracking.update(
        {
            "experiment": study.experiment,
            "run_name": cid,
            "tags": {**{str(k): str(v) for k, v in (tracking.get("tags") or {}).items()}, **tags},
        }
    )
    data["tracking"] = tracking
    return Cell(id=cid, axes=axes_vals, overrides=overrides, data=data, tags=tags)


def _with_reward_model(study: Study, value: Any) -> Any:
    """`value` with every string `@reward_model` replaced by the study's reward model folder; a StudyError where
    the study has no `reward_model:` section."""
    if isinstance(value, dict):
        return {k: _with_reward_model(study, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_with_reward_model(study, v) for v in value]
    if value == REWARD_MODEL:
        if study.reward_model_dir is None:
            raise StudyError(
                f"{REWARD_MODEL}: names the reward model the study trains first, and study {study.name} has no "
                "`reward_model:` section at this scale; add one (`harness train-rm` options: pairs, steps, ...)"
            )
        return str(study.reward_model_dir)
    return value


def _validate(study: Study, cell: Cell) -> None:
    """cell.config: the cell's validated RunConfig; a StudyError naming the study, the cell and its axes. The
    study's reward model folder is not checked before it exists (the Snakefile trains it before any cell)."""
    to_build = [study.reward_model_dir] if study.reward_model_dir is not None else []
    try:
        cell.config = build_config(cell.data, reward_models_to_build=to_build)
    except ConfigError as err:
        axes = ", ".join(f"{k}={v!r}" for k, v in cell.overrides.items())
        where = f"{study.path}: " if study.path else ""
        raise StudyError(f"{where}study {study.name} ({study.scale}), cell {cell.id} [{axes}]: {err}") from None


def _tag_value(v: Any) -> str:
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True)
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)
