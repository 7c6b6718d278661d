"""Is a study's verdict confirmatory? Its hypotheses must have entered the repository before the first of its
cells started, and the working file must hold the committed hypotheses.

    blob          `git hash-object FILE`: the study file as it is now
    since         the oldest commit from which the parsed `hypotheses` and `correction` are unchanged up to
                  HEAD (walking `git log --format=%H -- FILE`, each version parsed), and its commit time
    cell_starts   each cell's start: run.json attempts[0].started (harness/train/run/setup.py writes it)
    confirmatory  true only when `since` exists, the working file's hypotheses equal it, and its commit time
                  is before the first start; else false with the reason
"""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import yaml

from harness.experiment.schema import validate_study_file
from harness.experiment.study import StudyError

STARTED = "%Y-%m-%dT%H:%M:%S%z"  # run.json's start time (harness/train/run/setup.py)


def _git(cwd: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout


def claims(text: str | None) -> dict | None:
    """The parsed hypotheses and correction of one version of a study file; None when it has no hypotheses
    (or does not parse)."""
    try:
        spec = validate_study_file(yaml.safe_load(text or ""))
    except (StudyError, yaml.YAMLError):
        return None
    if not spec.hypotheses:
        return None
    return {"hypotheses": [h.model_dump() for h in spec.hypotheses], "correction": spec.correction}


def _located(path: Path) -> tuple[Path, str] | None:
    """(the repository's root, the file's path in it), None outside a repository."""
    root = (_git(path.resolve().parent, "rev-parse", "--show-toplevel") or "").strip()
    return (Path(root), path.resolve().relative_to(Path(root).resolve()).as_posix()) if root else None


def _committed(path: Path, commit: str = "HEAD") -> dict | None:
    """The claims of the file as `commit` holds it."""
    where = _located(path)
    return claims(_git(where[0], "show", f"{commit}:{where[1]}")) if where else None


def entered(path: Path) -> tuple[str | None, str | None]:
    """(commit, commit time ISO) from which the file's committed claims are those of HEAD; (None, None) when the
    file is not committed or HEAD's version has no hypotheses."""
    where = _located(path)
    head = _committed(path)
    if where is None or head is None:
        return None, None
    since = None
    for c in (_git(where[0], "log", "--format=%H", "--", where[1]) or "").split():  # newest first
        if _committed(path, c) != head:
            break
        since = c
    if since is None:
        return None, None
    return since, (_git(where[0], "show", "-s", "--format=%cI", since) or "").strip() or None


def cell_starts(cells: list[dict]) -> dict:
    """cell id -> its first attempt's start time (None: never started, or not recorded)."""
    out = {}
    for c in cells:
        try:
            attempts = json.loads((Path(c["run_dir"]) / "run.json").read_text()).get("attempts") or []
        except (OSError, ValueError):
            attempts = []
        out[c["id"]] = attempts[0].get("started") if attempts else None
    return out


def _parse(t: str) -> datetime:
    """An ISO time (git's %cI, run.json's STARTED); one without a zone is taken as UTC."""
    out = datetime.fromisoformat(t)
    return out if out.tzinfo else out.replace(tzinfo=UTC)


def preregistration(path: Path, cells: list[dict]) -> dict:
    """The record of what was declared when: blob, since, since_time, cell_starts, first_start, confirmatory,
    reason."""
    blob = (_git(path.resolve().parent, "hash-object", str(path.resolve())) or "").strip() or None
    since, since_time = entered(path)
    starts = cell_starts(cells)
    known = [s for s in starts.values() if s]
    first = min(known, key=_parse) if known else None
    out = {"study_file": str(path), "blob": blob, "since": since, "since_time": since_time, "cell_starts": starts}
    out["first_start"] = first
    ran = [c["id"] for c in cells if (Path(c["run_dir"]) / "metrics.jsonl").exists() and not starts[c["id"]]]
    out["confirmatory"], out["reason"] = _confirmatory(path, since, since_time, first)
    if out["confirmatory"] and ran:
        out["confirmatory"], out["reason"] = False, f"cells ran without a recorded start time: {', '.join(ran)}"
    return out


def _confirmatory(path: Path, since, since_time, first) -> tuple[bool, str]:
    working = claims(path.read_text())
    if working is None:
        return False, "no hypotheses"
    if since is None:
        return False, "not committed"
    if _committed(path) != working:
        return False, "not committed (the working file's hypotheses differ from the committed ones)"
    if first is None:
        return True, f"hypotheses committed at {since[:12]} ({since_time}); no cell has started"
    if _parse(since_time) >= _parse(first):
        return False, f"hypotheses changed after the first cell started ({since_time} >= {first})"
    return True, f"hypotheses committed at {since[:12]} ({since_time}), before the first cell started ({first})"
