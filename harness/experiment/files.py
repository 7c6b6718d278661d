"""What a study writes: its results folder, each cell's resolved config, cells.json, study.json,
and the `harness grid` listing."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from harness.atomic import atomic_write_text
from harness.experiment.study import SEED, Study


def cells_index(study: Study, results: str | os.PathLike) -> list[dict]:
    """Machine-readable description of the cells (for summaries and notebooks)."""
    out = study_dir(study, results)
    return [
        {
            "id": c.id,
            "variant": study.variant_of(c),
            "axes": c.axes,
            "overrides": c.overrides,
            "tags": c.tags,
            "seed": c.axes.get(SEED),
            "run_dir": str(out / "runs" / c.id),
            "config": str(out / "configs" / f"{c.id}.yaml"),
        }
        for c in study.cells
    ]


def study_dir(study: Study, results: str | os.PathLike = "results") -> Path:
    return Path(results) / study.name / study.scale


def write_configs(study: Study, out_dir: str | os.PathLike) -> list[Path]:
    """Write <out_dir>/<cell>.yaml (the resolved, validated config) for each cell; unchanged files are not touched."""
    paths = []
    for c in study.cells:
        p = Path(out_dir) / f"{c.id}.yaml"
        atomic_write_text(p, c.config_yaml(), only_if_changed=True)
        paths.append(p)
    return paths


def describe(study: Study) -> str:
    lines = [
        f"study {study.name} (scale {study.scale}): {len(study.cells)} cells; MLflow experiment '{study.experiment}'"
    ]
    if study.scale_overrides:
        lines.append("  scale overrides: " + " ".join(f"{k}={_fmt(v)}" for k, v in study.scale_overrides.items()))
    width = max(len(c.id) for c in study.cells)
    for c in study.cells:
        lines.append(f"  {c.id:<{width}}  " + " ".join(f"{k}={_fmt(v)}" for k, v in c.overrides.items()))
    return "\n".join(lines)


def _fmt(v: Any) -> str:
    return json.dumps(v) if isinstance(v, (dict, list)) or v is None or isinstance(v, bool) else str(v)


def study_json(study: Study, results: str | os.PathLike) -> dict:
    """study.json: what the summaries and notebooks need to know about the study beside cells.json."""
    return {
        "name": study.name,
        "scale": study.scale,
        "experiment": study.experiment,
        "axes": study.axis_names(),
        "seeds": study.seeds,
        "final_eval": study.final_eval,
        "study_file": str(study.path or ""),
        "results": str(study_dir(study, results)),
    }


def final_eval_flags(final_eval: dict) -> str:
    """`harness eval` flags for a study's `final_eval` settings: '--n-samples 64 --vs-initial'."""
    flags = [f"--n-samples {final_eval['n_samples']}"] if final_eval.get("n_samples") else []
    flags += [f"--num-prompts {final_eval['num_prompts']}"] if final_eval.get("num_prompts") else []
    flags += ["--vs-initial"] if final_eval.get("vs_initial") else []
    return " ".join(flags)
