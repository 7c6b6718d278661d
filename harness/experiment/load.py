"""Studies: find a study file, read it through its schema (schema.py), build its axes; load_study
also expands the cells (expand.py), each with stable, readable ids.

A study file (experiments/<name>.yaml) declares (every key checked by schema.StudyFile)

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
    arm_overrides:                  # optional: more dotted keys for one arm's cells, not an axis (no tag,
      gspo: {train.lr: 1e-5}        #   no id part): an arm added beside others leaves their configs as they were
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
    final_eval: {n_samples: 8}      # optional: `harness eval` of each final checkpoint, also per scale
    reward_model: {pairs: FILE, steps: 200}  # optional: a reward model trained first (`harness train-rm`
                                    #   options, also per scale) that cells name as `@reward_model`
                                    #   (task.rewards: [{model: "@reward_model"}]); trained into
                                    #   <results>/<study>/<scale>/reward_model
    tune: {...}                     # optional: an Optuna search (see harness/experiment/tune.py)
    hypotheses:                     # optional: preregistered claims, one family (hypotheses.py, `harness verdict`)
      - {name: rise, metric: eval/pass_at_1, at: final, contrast: "dapo - grpo", direction: greater, sesoi: 0.02}
    correction: holm                # the family's correction: holm (default) | none

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

from harness.config import read_yaml
from harness.experiment.expand import expand
from harness.experiment.hypotheses import check_hypotheses
from harness.experiment.schema import SAFE_NAME, TOP_LEVEL_KEYS, validate_study_file
from harness.experiment.study import ARM, DECLARED_SCALES, SCALES, SEED, Axis, Study, StudyError
from harness.objective.plugins import import_plugins

__all__ = ["TOP_LEVEL_KEYS", "find_study", "load_study", "parse_study"]


STUDY_DIRS = ("experiments",)


def find_study(name_or_path: str | os.PathLike, root: str | os.PathLike | None = None) -> Path:
    """`demo` -> experiments/demo.yaml (under root, then cwd); a path is taken as is."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.is_file():
        if not p.is_file():
            raise StudyError(f"study file {str(p)!r} does not exist")
        return p
    if p.is_dir():
        raise StudyError(
            f"{str(p)!r} is a folder, not a study: a study's results folder holds cells.json (written by "
            "the Snakefile or `harness grid STUDY --write-configs`); a study is a name under experiments/ "
            "or a study YAML"
        )
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
                data = read_yaml(c, "base run config", StudyError)
                if not isinstance(data, dict):
                    raise StudyError(f"base: {c} must hold a mapping of run-config sections")
                return data
        raise StudyError(f"base: run config file {base!r} not found (relative to the study file or the cwd)")
    raise StudyError(f"base: must be a run-config mapping or a path to a run YAML (got {type(base).__name__})")


def _import_plugins(raw: Any, path: Path | None) -> None:
    """Import every module `objective.plugins` names in the study: in its base, its scales, a grid or zip axis."""
    if not isinstance(raw, dict):
        return
    names: list = []
    if isinstance(raw.get("base"), (str, dict)):
        try:
            base = _load_base(raw["base"], path)
        except StudyError:
            base = {}  # parse_study reports it
        names.append(((base.get("objective") or {}) if isinstance(base, dict) else {}).get("plugins"))
    key = "objective.plugins"
    for axes in (raw.get("grid"), *(raw.get("zip") or [])):  # an axis: a list of values
        if isinstance(axes, dict) and isinstance(axes.get(key), list):
            names += axes[key]
    for scale in (raw.get("scales") or {}).values():  # a scale: one value
        if isinstance(scale, dict) and key in scale:
            names.append(scale[key])
    for value in names:
        try:
            import_plugins(value)
        except ValueError as err:
            raise StudyError(f"{path or 'study'}: {err}") from None


def _axes(raw: dict, scale: str, scale_ov: dict) -> list[Axis]:
    """The study's grid and zip axes, in the order the file declares them; a key in two axes, two
    labelled groups, a scale overriding an axis or an axis on a key the study sets is a StudyError."""
    grid_axes = [
        Axis((key,), tuple((v,) for v in values), None, "grid") for key, values in (raw.get("grid") or {}).items()
    ]
    zip_axes: list[Axis] = []
    for i, group in enumerate(raw.get("zip") or []):
        keys = tuple(k for k in group if k != ARM)
        labels = tuple(str(x) for x in group[ARM]) if ARM in group else None
        zip_axes.append(Axis(keys, tuple(zip(*(group[k] for k in keys))), labels, f"zip[{i}]"))
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
    for k in (SEED, "tracking.experiment", "tracking.run_name", "tracking.tags"):
        if k in all_keys:
            raise StudyError(f"grid: '{k}' is set by the study itself and cannot be an axis")
    return axes


def _arm_overrides(raw: dict, axes: list[Axis], scale: str, scale_ov: dict) -> dict[str, dict]:
    """`arm_overrides`: each label must be an arm of the labelled zip group, and no key an axis or a
    key the scale or the study itself sets (the arm's value would silently lose or win)."""
    given = dict(raw.get("arm_overrides") or {})
    labels = next((ax.labels for ax in axes if ax.labels), None) or ()
    axis_keys = {k for ax in axes for k in ax.keys}
    for label, keys in given.items():
        if str(label) not in labels:
            raise StudyError(f"arm_overrides.{label}: not an arm of the zip group (arms: {list(labels)})")
        for k in keys:
            if k in axis_keys or k in (SEED, "tracking.experiment", "tracking.run_name", "tracking.tags"):
                raise StudyError(f"arm_overrides.{label}.{k}: an axis or a key the study sets; set it there")
            if k in scale_ov:
                raise StudyError(f"arm_overrides.{label}.{k}: scales.{scale} overrides it too; set it in one place")
    out = {str(label): dict(keys) for label, keys in given.items()}
    for ax in axes:
        if ax.labels:  # two arms that set the same values are one arm under two names
            points = [repr((point, sorted(out.get(label, {}).items()))) for label, point in zip(ax.labels, ax.values)]
            same = sorted({lb for lb, p in zip(ax.labels, points) if points.count(p) > 1})
            if same:
                raise StudyError(f"{ax.source}: arms {same} set the same values (zip keys and arm_overrides)")
    return out


def parse_study(
    raw: dict, *, path: Path | None = None, name: str | None = None, scale: str | None = None, results: str = "results"
) -> Study:
    """Check the study file against its schema (schema.py), then build its axes for `scale`
    (no run config is built here: expand.py does that per cell). The plugins the study names
    (objective.plugins) are imported first: their knobs are grid keys like any other."""
    _import_plugins(raw, path)
    spec = validate_study_file(raw, str(path) if path else "study")
    name = str(spec.name or name or (path.stem if path else "study"))
    if not SAFE_NAME.match(name):
        raise StudyError(f"name: {name!r} may only use letters, digits and . _ + -")
    scale = scale or spec.scale or "smoke"
    if scale not in SCALES:
        raise StudyError(f"scale: {scale!r} is not one of {list(SCALES)}")
    if scale in DECLARED_SCALES and scale not in (raw.get("scales") or {}):
        raise StudyError(
            f"scale: {scale!r}: study {name} has no scales.{scale} section (its scales: "
            f"{sorted(raw.get('scales') or {})}); the {scale} scale runs only where a study defines it"
        )
    scale_ov = dict((raw.get("scales") or {}).get(scale) or {})
    base = _load_base(raw.get("base"), path)

    axes = _axes(raw, scale, scale_ov)
    seeds = scale_ov.pop("seeds", None)
    if seeds is None:
        seeds = raw.get("seeds", [int(base.get("seed", 0))])
    axes.append(Axis((SEED,), tuple((s,) for s in seeds), None, "seeds"))

    final_eval = dict(raw.get("final_eval") or {})
    final_eval.update(scale_ov.pop("final_eval", None) or {})
    probe = dict(raw.get("probe") or {})
    probe.update(scale_ov.pop("probe", None) or {})
    arm_overrides = _arm_overrides(raw, axes, scale, scale_ov)
    reward_model = _reward_model(raw, scale, scale_ov.pop("reward_model", None))
    return Study(
        name=name,
        path=path,
        scale=scale,
        raw=raw,
        base=base,
        scale_overrides=scale_ov,
        axes=axes,
        seeds=list(seeds),
        exclude=list(raw.get("exclude") or []),
        final_eval=final_eval,
        arm_overrides=arm_overrides,
        probe=probe,
        tune=spec.tune,
        reward_model=reward_model,
        results=str(results),
        hypotheses=list(spec.hypotheses or []),
        correction=spec.correction,
    )


def _reward_model(raw: dict, scale: str, scale_rm: dict | None) -> dict:
    """The study's `reward_model:` options at this scale (the scale's keys win); {} without one. Its pairs
    file must exist (relative paths are read from the working directory, as `harness train-rm` reads them)."""
    rm = {k: v for k, v in {**(raw.get("reward_model") or {}), **(scale_rm or {})}.items() if v is not None}
    if not rm:
        return {}
    pairs = rm.get("pairs")
    if pairs is None:
        raise StudyError(f"reward_model.pairs: missing at scale {scale}; allowed: a pairs file for `harness train-rm`")
    if not Path(pairs).is_file():
        raise StudyError(
            f"reward_model.pairs={pairs!r}: no such file (relative paths are read from {os.getcwd()}); allowed: a "
            "pairs file (prompt, chosen, rejected) for `harness train-rm`"
        )
    return rm


def load_study(
    name_or_path: str | os.PathLike | dict,
    scale: str | None = None,
    *,
    validate: bool = True,
    name: str | None = None,
    path: str | os.PathLike | None = None,
    results: str | os.PathLike = "results",
) -> Study:
    """Load, check and expand a study (a name under experiments/, a path, or an already-loaded
    mapping; with a mapping, `path` is the file it came from: relative `base:` paths start there). `results`:
    the results root the Snakefile writes under (where `@reward_model` is trained)."""
    if isinstance(name_or_path, dict):
        raw, path = name_or_path, (Path(path) if path else None)
    else:
        path = find_study(name_or_path)
        raw = read_yaml(path, "study", StudyError)
    study = parse_study(raw, path=path, name=name, scale=scale, results=str(results))
    expand(study, validate=validate)
    check_hypotheses(study)
    return study
