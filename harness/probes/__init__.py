"""Mechanism probes: each comparison's mechanism measured directly, from one policy and the
same batches, with far more power than training curves (harness/probes/engine.py).

    harness probe STUDY [--scale S] [--out FILE]   -> results/<study>/<scale>/probe.json   (cli.py)

The arms are the study's cells of its first seed (their objectives), or, when the `probe:`
section has `arms: {label: {dotted.key: value, ...}}`, the first cell's config with each
arm's overrides (so a study can train one arm and probe several: the demo). The other
settings of the study file's `probe:` section (per scale) go to the probe. Studies with a
probe: PROBES.
"""

from __future__ import annotations

import copy
import importlib
import json
import time
from pathlib import Path

from harness.atomic import atomic_write_text
from harness.config import build_config
from harness.experiment.keys import apply_override
from harness.probes.engine import Arm

PROBES = {
    "length_bias": "length",
    "difficulty_bias": "difficulty",
    "moe_stability": "moe",
    "demo": "difficulty",
}  # study name -> module under harness/probes/


def probe_arms(study, arms: dict | None = None):
    """-> [Arm(label, cfg)]: the study's cells of its first seed, labels from the cells' axes;
    or the first cell with each of `arms` (label -> dotted overrides) applied."""
    if arms:
        out = []
        for label, overrides in arms.items():
            d = copy.deepcopy(study.base)  # the unresolved base: a preset given here takes effect
            for k, v in {**study.scale_overrides, **(overrides or {}), "seed": study.seeds[0]}.items():
                apply_override(d, k, v)
            out.append(Arm(str(label), build_config(d)))
        return out
    seed = study.seeds[0]
    arms = []
    for c in study.cells:
        if c.axes.get("seed") != seed:
            continue
        label = (
            str(c.axes["arm"])
            if "arm" in c.axes
            else "__".join(str(v) for k, v in c.axes.items() if k != "seed") or c.id
        )
        arms.append(Arm(label, c.config))
    return arms


def run_probe(study, out: Path) -> dict:
    """Run the study's probe and write its summary (+ per-batch numbers) to `out` as JSON."""
    if study.name not in PROBES:
        raise ValueError(f"study {study.name!r} has no probe; studies with one: {sorted(PROBES)}")
    mod = importlib.import_module(f"harness.probes.{PROBES[study.name]}")
    settings = {"batches": 8, "probe_prompts": 128, "probe_samples": 4, **study.probe}
    arms = probe_arms(study, settings.pop("arms", None))
    t0 = time.perf_counter()
    res = mod.run(arms, settings)
    return write_probe(
        out, study.name, study.scale, arms, settings, res, mod.summarize(res, arms), time.perf_counter() - t0
    )


def write_probe(out: Path, name: str, scale: str, arms, settings: dict, res, summary: dict, seconds: float) -> dict:
    """probe.json: the study, arms, settings, wall time, the summary the notebooks read, and the raw
    per-batch numbers (res: a ProbeResult, or {level: ProbeResult} for the MoE probe)."""
    results = res if isinstance(res, dict) else {"": res}
    doc = {
        "study": name,
        "scale": scale,
        "arms": [a.label for a in arms],
        "settings": settings,
        "wall_seconds": seconds,
        "summary": summary,
        "raw": {k: {"base": r.base, "per_batch": r.per_batch, "batch": r.batch} for k, r in results.items()},
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, json.dumps(doc, indent=1, default=float))
    return doc
