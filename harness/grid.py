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
      smoke: {train.steps: 4}       #   `final_eval` (`harness eval` of each cell: {n_samples: N,
                                    #   num_prompts: P, vs_initial: true = also the starting policy, paired})
      gpu: {model.name: smollm2-135m, rollout.backend: vllm}
    probe: {batches: 12}            # optional: settings of the study's mechanism probe (`harness probe`),
                                    #   also per scale
    tune: {...}                     # optional: an Optuna search (see harness/tune.py)

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
import itertools
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


SCALES = ("smoke", "cpu", "gpu")
TOP_LEVEL_KEYS = ("name", "description", "base", "grid", "zip", "seeds", "exclude", "scale", "scales", "tune", "probe")
SCALE_SPECIAL_KEYS = ("seeds", "final_eval", "probe")
ARM = "arm"          # optional label key of a zip group
SEED = "seed"
_SAFE = re.compile(r"[^A-Za-z0-9._+-]+")
STUDY_DIRS = ("experiments",)


class StudyError(ValueError):
    """A study file is wrong; the message names the offending key (and cell)."""


# ----------------------------------------------------------------------------- data

@dataclass(frozen=True)
class Axis:
    """One dimension of the grid: a single key, or a zip group of keys varying together."""

    keys: tuple[str, ...]          # dotted run-config keys set by this axis
    values: tuple[tuple, ...]      # one tuple (aligned with keys) per point of the axis
    labels: tuple[str, ...] | None = None   # zip `arm` labels, one per point
    source: str = "grid"           # "grid", "zip[i]" or "seeds" (for messages)

    def __len__(self) -> int:
        return len(self.values)


@dataclass
class Cell:
    id: str
    axes: dict[str, Any]           # axis name in tags/tables (dotted key, `arm`, `seed`) -> value
    overrides: dict[str, Any]      # dotted run-config key -> value set by this cell's axes (incl. seed)
    data: dict                     # the cell's full (unvalidated) run-config mapping
    tags: dict[str, str]
    config: Any = None             # harness.config.RunConfig once validated

    def config_yaml(self) -> str:
        from harness.config import dump_config

        return dump_config(self.config)


@dataclass
class Study:
    name: str
    path: Path | None
    scale: str
    raw: dict
    base: dict
    scale_overrides: dict[str, Any]
    axes: list[Axis]
    seeds: list[int]
    exclude: list[dict]
    final_eval: dict = field(default_factory=dict)
    probe: dict = field(default_factory=dict)   # settings of `harness probe` (harness/probes/)
    cells: list[Cell] = field(default_factory=list)

    @property
    def experiment(self) -> str:
        """The MLflow experiment of this study at this scale."""
        return f"{self.name}/{self.scale}"

    def axis_names(self) -> list[str]:
        """Columns naming a cell: every axis key (zip groups: `arm` if labelled, else their keys), then `seed`."""
        names: list[str] = []
        for ax in self.axes:
            if ax.source == "seeds":
                continue
            names.extend([ARM] if ax.labels else ax.keys)
        return names + [SEED]

    def variant_of(self, cell: Cell) -> str:
        """The cell id without its seed: cells that differ only by seed are one variant (a curve with a CI)."""
        return cell.tags["variant"]


# ----------------------------------------------------------------------------- key checks

def _section_model(path: tuple[str, ...]):
    """Walk RunConfig's fields along `path`; returns ('model', cls) | ('free', None) | ('leaf', None)
    or raises KeyError(prefix, allowed) at the first unknown component."""
    from pydantic import BaseModel

    from harness.config import RunConfig

    model: Any = RunConfig
    for i, part in enumerate(path):
        if model is None:
            raise KeyError((path[:i], []))
        if part == "preset" and i == 1 and path[0] == "objective":
            if i != len(path) - 1:
                raise KeyError((path[:i + 1], []))
            return "leaf", None
        fld = model.model_fields.get(part)
        if fld is None:
            allowed = sorted(model.model_fields) + (["preset"] if path[:i] == ("objective",) else [])
            raise KeyError((path[:i], allowed))
        ann = fld.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            model = ann
            continue
        origin = getattr(ann, "__origin__", None)
        if ann is dict or origin is dict or "dict" in str(ann):
            return "free", None          # model.overrides.*, task.options.*, tracking.tags.* ...
        if i != len(path) - 1:
            raise KeyError((path[:i + 1], []))
        return "leaf", None
    return "model", model


def check_key(key: str, where: str) -> str:
    """Raise StudyError unless `key` is a dotted run-config key; returns its kind."""
    if not isinstance(key, str) or not key:
        raise StudyError(f"{where}: key {key!r} must be a dotted run-config key such as objective.preset")
    try:
        kind, _ = _section_model(tuple(key.split(".")))
    except KeyError as err:
        prefix, allowed = err.args[0]
        sect = ".".join(prefix) or "the top level of a run config"
        hint = f"; allowed keys under {sect}: {allowed}" if allowed else f" ({sect} has no sub-keys)"
        raise StudyError(f"{where}: '{key}' is not a run-config key{hint}") from None
    return kind


def apply_override(data: dict, key: str, value: Any) -> None:
    """Set a dotted key; a mapping given for a whole SECTION (e.g. `train: {steps: 4}`) is merged
    into it key by key, a mapping for a leaf or free-form dict replaces it."""
    from harness.config import set_dotted

    kind = check_key(key, key)
    if kind == "model" and isinstance(value, dict):
        for k, v in value.items():
            apply_override(data, f"{key}.{k}", v)
    else:
        set_dotted(data, key, copy.deepcopy(value))


# ----------------------------------------------------------------------------- ids

def format_value(v: Any) -> str:
    """A readable, path-safe rendering of an axis value."""
    if isinstance(v, bool):
        s = "true" if v else "false"
    elif v is None:
        s = "none"
    elif isinstance(v, float):
        s = repr(v)
    elif isinstance(v, dict):
        s = "_".join(f"{format_value(k)}-{format_value(x)}" for k, x in v.items())
    elif isinstance(v, (list, tuple)):
        s = "-".join(format_value(x) for x in v)
    else:
        s = str(v)
    return _SAFE.sub("-", s).strip("-") or "empty"


def short_names(keys: list[str]) -> dict[str, str]:
    """Shortest unique dotted suffix of each key: objective.preset -> preset."""
    out = {}
    for key in keys:
        parts = key.split(".")
        for n in range(1, len(parts) + 1):
            cand = ".".join(parts[-n:])
            if sum(1 for other in keys if other == cand or other.endswith("." + cand)) == 1:
                out[key] = cand
                break
        else:
            out[key] = key
    return out


# ----------------------------------------------------------------------------- loading

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
    bases += [Path.cwd(), Path(__file__).resolve().parent.parent]
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
        cands += [Path.cwd() / base, Path(__file__).resolve().parent.parent / base]
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
    check_final_eval(final_eval, f"scales.{scale}.final_eval")
    probe = dict(raw.get("probe") or {})
    probe.update(scale_ov.pop("probe", None) or {})

    exclude = raw.get("exclude") or []
    if not isinstance(exclude, list) or not all(isinstance(e, dict) and e for e in exclude):
        raise StudyError("exclude: must be a list of non-empty mappings {axis key: value}")

    return Study(name=name, path=path, scale=scale, raw=raw, base=base, scale_overrides=scale_ov,
                 axes=axes, seeds=list(seeds), exclude=exclude, final_eval=final_eval,
                 probe=probe)


FINAL_EVAL_KEYS = {"n_samples": "an integer >= 1", "num_prompts": "an integer >= 1", "vs_initial": "true or false"}


def check_final_eval(final_eval: dict, where: str) -> None:
    """The `final_eval` settings (flags of `harness eval` in the Snakefile's eval rule)."""
    for k, v in final_eval.items():
        if k not in FINAL_EVAL_KEYS:
            raise StudyError(f"{where}: unknown key {k!r}; allowed: {sorted(FINAL_EVAL_KEYS)}")
        ok = isinstance(v, bool) if k == "vs_initial" else (isinstance(v, int) and not isinstance(v, bool) and v >= 1)
        if not ok:
            raise StudyError(f"{where}.{k}={v!r}: must be {FINAL_EVAL_KEYS[k]}")


def final_eval_flags(final_eval: dict) -> str:
    """`harness eval` flags for a study's `final_eval` settings: '--n-samples 64 --vs-initial'."""
    flags = [f"--n-samples {final_eval['n_samples']}"] if final_eval.get("n_samples") else []
    flags += [f"--num-prompts {final_eval['num_prompts']}"] if final_eval.get("num_prompts") else []
    flags += ["--vs-initial"] if final_eval.get("vs_initial") else []
    return " ".join(flags)


def expand(study: Study, validate: bool = True) -> list[Cell]:
    """The cells of the study (Cartesian product of axes minus exclusions), each validated."""
    key_names = short_names([k for ax in study.axes for k in ax.keys])
    # exclusion keys may be dotted keys, their short names, `arm` or `seed`
    lookup = {ARM: ARM, SEED: "seed"}
    for k, s in key_names.items():
        lookup[k] = lookup[s] = k
    for i, ex in enumerate(study.exclude):
        for k in ex:
            if k not in lookup:
                raise StudyError(f"exclude[{i}].{k}: not an axis of the study; axes: {list(key_names) + [ARM, SEED]}")
    hits = [0] * len(study.exclude)

    base = copy.deepcopy(study.base)
    for k, v in study.scale_overrides.items():
        apply_override(base, k, v)

    cells: list[Cell] = []
    ids: dict[str, dict] = {}
    for combo in itertools.product(*[range(len(ax)) for ax in study.axes]):
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

        data = copy.deepcopy(base)
        for k, v in overrides.items():
            apply_override(data, k, v)
        tags = {"study": study.name, "scale": study.scale, "cell": cid,
                "variant": "__".join(p for p in parts if not p.startswith(f"{SEED}=")) or "base"}
        tags.update({k: _tag_value(v) for k, v in axes_vals.items()})
        tracking = dict(data.get("tracking") or {})
        tracking.update({"experiment": study.experiment, "run_name": cid,
                         "tags": {**{str(k): str(v) for k, v in (tracking.get("tags") or {}).items()}, **tags}})
        data["tracking"] = tracking
        cells.append(Cell(id=cid, axes=axes_vals, overrides=overrides, data=data, tags=tags))

    for i, n in enumerate(hits):
        if n == 0:
            raise StudyError(f"exclude[{i}]: {study.exclude[i]} matches no cell (a typo in a key or value?)")
    if not cells:
        raise StudyError("the study has no cells left after `exclude`")
    if validate:
        from harness.config import ConfigError, build_config

        for c in cells:
            try:
                c.config = build_config(c.data)
            except ConfigError as err:
                axes = ", ".join(f"{k}={v!r}" for k, v in c.overrides.items())
                where = f"{study.path}: " if study.path else ""
                raise StudyError(f"{where}study {study.name} ({study.scale}), cell {c.id} [{axes}]: {err}") from None
    study.cells = cells
    return cells


def _tag_value(v: Any) -> str:
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True)
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


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


# ----------------------------------------------------------------------------- files

def atomic_write(path: str | os.PathLike, text: str, only_if_changed: bool = True) -> bool:
    """Write text to path via a temp file + rename; returns True if the file changed.
    With only_if_changed an identical file is left alone (its mtime does not move, so
    Snakemake does not rerun what depends on it)."""
    path = Path(path)
    if only_if_changed and path.is_file() and path.read_text() == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)
    return True


def cells_index(study: Study, results: str | os.PathLike) -> list[dict]:
    """Machine-readable description of the cells (for summaries and notebooks)."""
    out = study_dir(study, results)
    return [{"id": c.id, "variant": study.variant_of(c), "axes": c.axes, "overrides": c.overrides, "tags": c.tags,
             "seed": c.axes.get(SEED), "run_dir": str(out / "runs" / c.id),
             "config": str(out / "configs" / f"{c.id}.yaml")} for c in study.cells]


def study_dir(study: Study, results: str | os.PathLike = "results") -> Path:
    return Path(results) / study.name / study.scale


def write_configs(study: Study, out_dir: str | os.PathLike) -> list[Path]:
    """Write <out_dir>/<cell>.yaml (the resolved, validated config) for each cell; unchanged files are not touched."""
    paths = []
    for c in study.cells:
        p = Path(out_dir) / f"{c.id}.yaml"
        atomic_write(p, c.config_yaml())
        paths.append(p)
    return paths


def describe(study: Study) -> str:
    lines = [f"study {study.name} (scale {study.scale}): {len(study.cells)} cells; MLflow experiment '{study.experiment}'"]
    if study.scale_overrides:
        lines.append("  scale overrides: " + " ".join(f"{k}={_fmt(v)}" for k, v in study.scale_overrides.items()))
    width = max(len(c.id) for c in study.cells)
    for c in study.cells:
        lines.append(f"  {c.id:<{width}}  " + " ".join(f"{k}={_fmt(v)}" for k, v in c.overrides.items()))
    return "\n".join(lines)


def _fmt(v: Any) -> str:
    return json.dumps(v) if isinstance(v, (dict, list)) or v is None or isinstance(v, bool) else str(v)
