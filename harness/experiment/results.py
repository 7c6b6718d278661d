"""Reading a study's results folder (results/<study>/<scale>/): cells.json, study.json and the
runs' jsonl files. Only the run-directory contract, not the trainer."""

from __future__ import annotations

import json
import os
from pathlib import Path

from harness.jsonl import read_jsonl

__all__ = ["load_index", "read_jsonl"]


def load_index(study_dir: str | os.PathLike) -> tuple[dict, list[dict]]:
    """(study.json, cells.json) of a results folder, each cell's relative paths rebased onto the folder
    (`rebase_cell`), so that reading the folder from any working directory reads ITS runs."""
    d = Path(study_dir)
    if not (d / "cells.json").exists():
        raise FileNotFoundError(f"{d}/cells.json not found: run the Snakefile or `harness grid STUDY --write-configs`")
    study = json.loads((d / "study.json").read_text()) if (d / "study.json").exists() else {}
    return study, [rebase_cell(d, c) for c in json.loads((d / "cells.json").read_text())]


def rebase_cell(folder: Path, cell: dict) -> dict:
    """cells.json writes `run_dir` (and `config`) relative to where Snakemake ran (results/<study>/<scale>/runs/<id>):
    read from another working directory, that path names another checkout's folder, or nothing. A relative
    run_dir ending in runs/<id> is rebased onto `folder` (and a config under the same root with it); so is any
    run_dir whose run the folder holds itself (runs/<id>: a folder copied from another machine reads its own
    copy); other paths are kept as written."""
    run = Path(cell.get("run_dir") or "")
    if (folder / "runs" / str(cell.get("id"))).is_dir() and run.is_absolute():
        return {**cell, "run_dir": str(folder / "runs" / cell["id"])}
    if run.is_absolute() or run.parts[-2:] != ("runs", cell.get("id")):
        return cell
    root = run.parent.parent  # results/<study>/<scale> as Snakemake saw it
    out = {**cell, "run_dir": str(folder / "runs" / cell["id"])}
    config = Path(cell.get("config") or "")
    if cell.get("config") and not config.is_absolute() and config.is_relative_to(root):
        out["config"] = str(folder / config.relative_to(root))
    return out
