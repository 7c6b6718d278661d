"""Studies: expand an ablation grid in YAML into cells with stable, readable ids.

A study file (experiments/<name>.yaml) declares

    name: demo                      # optional; default: the file's stem
    description: ...                # optional, free text
    base: runs/smoke.yaml           # a run config: a path (relative to the study file) or an inline mapping
    grid:                           # axes of the Cartesian product: dotted run-config key -> values
      objective.preset: [grpo, dr_grpo, dapo]
      train.group_size: [4, 8]
    zip:                            # optional: groups of keys that vary TOGETHER (equal-length lists);
      - arm: [grpo, gspo]           #   `arm` (optional) names the group's values in ids and tags
        objective.preset: [grpo, gspo]
        train.mini_batches: [4, 4]
    seeds: [1, 2, 3]                # the `seed` axis (always last in the id)
    exclude:                        # optional: partial cells to drop (every key must match)
      - {objective.preset: dapo, train.group_size: 4}
    scale: smoke                    # default scale: smoke | cpu | gpu (override: --scale / --config scale=)
    scales:                         # per-scale overrides of the base (dotted keys), plus `seeds` and
      smoke: {train.steps: 4}       #   `final_eval` ({n_samples: N} for `harness eval`)
      gpu: {model.name: smollm2-135m, rollout.backend: vllm}
    probe: {batches: 12}            # optional: settings of the study's mechanism probe (`harness probe`),
                                    #   also per scale
    tune: {...}                     # optional: an Optuna search (see harness/experiment/tune.py)

A cell's run config = base <- scale overrides <- the cell's axis values <- seed <- tracking
(experiment `<study>/<scale>`, run name = cell id, one tag per axis). Every cell is built
as a `RunConfig` (harness.config.build_config) when the study is loaded, so a wrong key or
value fails before any job runs, with a message naming the key and the cell.

Cell ids join `axis=value` with `__` in declaration order (grid, then zip groups, then the
seed): `preset=dapo__group_size=8__seed=1`. The axis name is the last component of the
dotted key (more components when that is ambiguous); values are sanitised for paths.
"""
from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

from harness.experiment.expand import expand
from harness.experiment.ids import _SAFE
from harness.experiment.keys import check_key
from harness.experiment.study import ARM, SCALES, SEED, Axis, Study, StudyError


TOP_LEVEL_KEYS = ("name", "description", "base", "grid", "zip", "seeds", "exclude", "scale", "scales", "tune", "probe")
SCALE_SPECIAL_KEYS = ("seeds", "final_eval", "probe")
STUDY_DIRS = ("experiments",)


def find_study(name_or_path: str | os.PathLike, root: str | os.PathLike | None = None) -> Path:
    """`demo` -> experiments/demo.yaml (under root, then cwd); a path is taken as is."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.is_file():
        if not p.is_file():
            raise StudyError(f"study file {str(p)!r} does not exist")
        return p
    if p.is_dir():
        raise StudyError(f"{str(p)!r} is a folder, not a study: a study's results folder holds cells.json (written by "
                         "the Snakefile or `harness grid STUDY --write-configs`); a study is a name under experiments/ "
                         "or a study YAML")
    if len(p.parts) > 1:  # a path, not a name: never looked up under experiments/
        raise StudyError(f"{str(p)!r} does not exist (neither a study YAML nor a study's results folder)")
    bases = [Path(root)] if root else []
    bases += [Path.cwd(), Path(__file__).resolve().parents[2]]
    for b in bases:
        for d in STUDY_DIRS:
            for ext in (".yaml", ".yml"):
                cand = b / d / f"{name_or_path}{ext}"
                if cand.is_file():
                    return cand
    raise StudyError(f"no study named {str(name_or_path)!r} (looked for experiments/{name_or_path}.yaml)")


def _load_base(base: Any, study_path: Path | None) -> dict:
    if base is None:
        return {}
    if isinstance(base, dict):
        return copy.deepcopy(base)
    if isinstance(base, str):
        cands = [Path(base)] if Path(base).is_absolute() else []
        if study_path is not None:
            cands.append(study_path.parent / base)
        cands += [Path.cwd() / base, Path(__file__).resolve().parents[2] / base]
        for c in cands:
            if c.is_file():
                from harness.config import read_yaml

                data = read_yaml(c, "base run config", StudyError)
                if not isinstance(data, dict):
                    raise StudyError(f"base: {c} must hold a mapping of run-config sections")
                return data
        raise StudyError(f"base: run config file {base!r} not found (relative to the study file or the cwd)")
    raise StudyError(f"base: must be a run-config mapping or a path to a run YAML (got {type(base).__name__})")


def _as_list(value: Any, where: str) -> list:
    if not isinstance(value, list) or not value:
        raise StudyError(f"{where}: must be a non-empty list of values (got {value!r})")
    return value


def _check_unique(values: list, where: str) -> None:
    seen = []
    for v in values:
        if v in seen:
            raise StudyError(f"{where}: value {v!r} is listed twice")
        seen.append(v)


def parse_study(raw: dict, *, path: Path | None = None, name: str | None = None,
                scale: str | None = None) -> Study:
    """Check the study's structure (no run config is built here)."""
    if not isinstance(raw, dict):
        raise StudyError("a study must be a YAML mapping")
    unknown = [k for k in raw if k not in TOP_LEVEL_KEYS]
    if unknown:
        raise StudyError(f"unknown top-level key(s) {unknown} in the study; allowed: {list(TOP_LEVEL_KEYS)}")
    name = str(raw.get("name") or name or (path.stem if path else "study"))
    if _SAFE.search(name):
        raise StudyError(f"name: {name!r} may only use letters, digits and . _ + -")

    scale = scale or raw.get("scale") or "smoke"
    if scale not in SCALES:
        raise StudyError(f"scale: {scale!r} is not one of {list(SCALES)}")
    scales = raw.get("scales") or {}
    if not isinstance(scales, dict):
        raise StudyError("scales: must map a scale (smoke | cpu | gpu) to overrides")
    for s, ov in scales.items():
        if s not in SCALES:
            raise StudyError(f"scales.{s}: unknown scale; allowed: {list(SCALES)}")
        if ov is not None and not isinstance(ov, dict):
            raise StudyError(f"scales.{s}: must be a mapping of dotted run-config keys to values")
        for k in ov or {}:
            if k not in SCALE_SPECIAL_KEYS:
                check_key(k, f"scales.{s}")
    scale_ov = dict(scales.get(scale) or {})

    base = _load_base(raw.get("base"), path)

    grid_axes: list[Axis] = []
    grid = raw.get("grid") or {}
    if not isinstance(grid, dict):
        raise StudyError("grid: must map dotted run-config keys to lists of values")
    for key, values in grid.items():
        if key == SEED:
            raise StudyError("grid.seed: use the top-level `seeds:` list for seeds")
        check_key(key, "grid")
        values = _as_list(values, f"grid.{key}")
        _check_unique(values, f"grid.{key}")
        grid_axes.append(Axis((key,), tuple((v,) for v in values), None, "grid"))

    zip_axes: list[Axis] = []
    zips = raw.get("zip") or []
    if not isinstance(zips, list):
        raise StudyError("zip: must be a list of groups (each: dotted key -> list, equal lengths)")
    for i, group in enumerate(zips):
        where = f"zip[{i}]"
        if not isinstance(group, dict) or not group:
            raise StudyError(f"{where}: must be a mapping of dotted key -> list of values")
        lengths = {}
        for key, values in group.items():
            if key == SEED:
                raise StudyError(f"{where}.seed: use the top-level `seeds:` list for seeds")
            if key != ARM:
                check_key(key, where)
            lengths[key] = len(_as_list(values, f"{where}.{key}"))
        if len(set(lengths.values())) != 1:
            raise StudyError(f"{where}: lists must have equal lengths (got {lengths})")
        keys = tuple(k for k in group if k != ARM)
        if not keys:
            raise StudyError(f"{where}: needs at least one run-config key besides `{ARM}`")
        labels = None
        if ARM in group:
            labels = tuple(str(x) for x in group[ARM])
            _check_unique(list(labels), f"{where}.{ARM}")
        points = list(zip(*(group[k] for k in keys)))
        _check_unique(points, f"{where} (the tuple of {list(keys)})")
        zip_axes.append(Axis(keys, tuple(points), labels, where))
    # ids list the axes in the order the file declares them (`zip:` before `grid:` puts arms first)
    order = [k for k in raw if k in ("grid", "zip")]
    axes = grid_axes + zip_axes if order != ["zip", "grid"] else zip_axes + grid_axes

    all_keys = [k for ax in axes for k in ax.keys]
    dup = sorted({k for k in all_keys if all_keys.count(k) > 1})
    if dup:
        raise StudyError(f"grid/zip: key(s) {dup} appear in more than one axis")
    if sum(1 for ax in axes if ax.labels) > 1:
        raise StudyError(f"zip: only one group may carry `{ARM}` labels")
    clash = sorted(k for k in scale_ov if k in all_keys)
    if clash:
        raise StudyError(f"scales.{scale}: {clash} are grid axes; a scale may not override an axis")
    for k in ("seed", "tracking.experiment", "tracking.run_name", "tracking.tags"):
        if k in all_keys:
            raise StudyError(f"grid: '{k}' is set by the study itself and cannot be an axis")

    seeds = scale_ov.pop("seeds", None)
    if seeds is None:
        seeds = raw.get("seeds", [int(base.get("seed", 0))])
    where = f"scales.{scale}.seeds" if "seeds" in (scales.get(scale) or {}) else "seeds"
    seeds = _as_list(seeds, where)
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise StudyError(f"{where}: seeds must be integers (got {seeds})")
    _check_unique(seeds, where)
    axes.append(Axis(("seed",), tuple((s,) for s in seeds), None, "seeds"))

    final_eval = dict(raw.get("final_eval") or {})
    final_eval.update(scale_ov.pop("final_eval", None) or {})
    probe = dict(raw.get("probe") or {})
    probe.update(scale_ov.pop("probe", None) or {})

    exclude = raw.get("exclude") or []
    if not isinstance(exclude, list) or not all(isinstance(e, dict) and e for e in exclude):
        raise StudyError("exclude: must be a list of non-empty mappings {axis key: value}")

    return Study(name=name, path=path, scale=scale, raw=raw, base=base, scale_overrides=scale_ov,
                 axes=axes, seeds=list(seeds), exclude=exclude, final_eval=final_eval,
                 probe=probe)


def load_study(name_or_path: str | os.PathLike | dict, scale: str | None = None, *, validate: bool = True,
               name: str | None = None, path: str | os.PathLike | None = None) -> Study:
    """Load, check and expand a study (a name under experiments/, a path, or an already-loaded
    mapping; with a mapping, `path` is the file it came from: relative `base:` paths start there)."""
    if isinstance(name_or_path, dict):
        raw, path = name_or_path, (Path(path) if path else None)
    else:
        from harness.config import read_yaml

        path = find_study(name_or_path)
        raw = read_yaml(path, "study", StudyError)
    study = parse_study(raw, path=path, name=name, scale=scale)
    expand(study, validate=validate)
    return study
