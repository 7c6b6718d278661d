"""A study file with hypotheses and a results folder of its cells, written the way a study's runs write theirs
(no training): cells.json, and per cell runs/<cell>/ eval.json, summary.json, metrics.jsonl and run.json
(attempts[0].started)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def study_yaml(path: Path, hypotheses: list[dict], correction: str = "holm", arms=("a", "b"), seeds=(1, 2, 3)) -> Path:
    """experiments-style study file: two zip arms (presets grpo and dr_grpo) over `seeds`, 4 steps, eval every 2."""
    raw = {
        "name": "toy",
        "base": str(REPO / "experiments" / "runs" / "smoke.yaml"),
        "zip": [{"arm": list(arms), "objective.preset": ["grpo", "dr_grpo"][: len(arms)]}],
        "seeds": list(seeds),
        "scale": "smoke",
        "scales": {"smoke": {"train.steps": 4, "eval.every": 2}},
        "hypotheses": hypotheses,
        "correction": correction,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def write_cell(folder: Path, arm: str, seed: int, final: float | None, started: str | None = None, train=None) -> dict:
    """One cell: eval.json's eval/pass_at_1 = final (no files at all when None); train: per-step length/incorrect."""
    cid = f"arm={arm}__seed={seed}"
    run = folder / "runs" / cid
    cell = {"id": cid, "variant": f"arm={arm}", "axes": {"arm": arm, "seed": seed}, "seed": seed}
    cell["run_dir"] = str(run)
    if final is None:
        return cell
    run.mkdir(parents=True)
    (run / "eval.json").write_text(json.dumps({"eval/pass_at_1": final}))
    (run / "summary.json").write_text(json.dumps({"steps": 4, "paired_rise": {"delta_pass_at_1": final - 0.25}}))
    recs = [
        {"step": s, "length/incorrect": (train or [10.0] * 4)[s], "eval/pass_at_1": 0.25 + s / 100} for s in range(4)
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (run / "run.json").write_text(json.dumps({"attempts": [{"started": started or "2026-01-01T00:00:00+0000"}]}))
    return cell


def write_folder(folder: Path, values: dict[str, list], started: str | None = None) -> Path:
    """values: arm -> per-seed final pass@1 (seeds 1, 2, ...; None: the cell has not run)."""
    cells = [write_cell(folder, arm, i + 1, v, started) for arm, vs in values.items() for i, v in enumerate(vs)]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cells.json").write_text(json.dumps(cells))
    (folder / "study.json").write_text(json.dumps({"name": "toy", "scale": "smoke"}))
    return folder
