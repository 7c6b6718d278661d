"""Reading a study's results folder (results/<study>/<scale>/): cells.json, study.json and the
runs' jsonl files. Only the run-directory contract, not the trainer."""

from __future__ import annotations

import json
import os
from pathlib import Path

from harness.jsonl import read_jsonl

__all__ = ["load_index", "read_jsonl"]


def load_index(study_dir: str | os.PathLike) -> tuple[dict, list[dict]]:
    d = Path(study_dir)
    if not (d / "cells.json").exists():
        raise FileNotFoundError(f"{d}/cells.json not found: run the Snakefile or `harness grid STUDY --write-configs`")
    study = json.loads((d / "study.json").read_text()) if (d / "study.json").exists() else {}
    return study, json.loads((d / "cells.json").read_text())
