"""StudyData: a study's results folder as the notebooks read it (cells, study.json, each cell's
run files, cached), with one colour and marker per arm."""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml

from harness.experiment.figures.palette import arm_marker, arm_palette, study_arms
from harness.experiment.figures.style import _finite, seeds_label
from harness.experiment.results import load_index, read_jsonl


class StudyData:
    """A study's results folder: cells (cells.json), study.json, and each cell's run files (cached)."""

    def __init__(self, study_dir: str | os.PathLike):
        self.dir = Path(study_dir)
        self.study, self.cells = load_index(self.dir)
        self.all_cells = list(self.cells)  # every cell of cells.json, finished or not (drop_incomplete keeps it)
        self.name = self.study.get("name") or self.dir.parent.name
        self.scale = self.study.get("scale") or self.dir.name
        self._cache: dict[tuple[str, str], object] = {}
        self._study_arms: list[str] | None = None
        self._extra_arms: list[str] = []  # labels outside the study's arm list, in first-use order

    @classmethod
    def from_env(cls, name: str) -> StudyData:
        """HARNESS_STUDY_DIR (set by `harness summarize --notebook`), else <results>/<name>/<scale> for
        the first scale folder that exists (cpu, smoke, gpu); <results> is HARNESS_RESULTS (set by
        `make notebooks`, whose kernels start in analysis/) or ./results."""
        env = os.environ.get("HARNESS_STUDY_DIR")
        if env:
            return cls(env)
        for scale in ("cpu", "smoke", "gpu"):
            d = Path(os.environ.get("HARNESS_RESULTS") or "results") / name / scale
            if (d / "cells.json").exists():
                return cls(d)
        raise FileNotFoundError(
            f"no results for study {name!r}: set HARNESS_STUDY_DIR to a results folder "
            f"(results/{name}/<scale>) or run `snakemake --config study={name}`"
        )

    # ------------------------------------------------------------------ per cell files
    def run_dir(self, cell: dict) -> Path:
        """The cell's run folder: runs/<cell> of this folder wherever cells.json says it ran (load_index)."""
        return Path(cell["run_dir"])

    def _load(self, cell: dict, what: str, fn):
        key = (cell["id"], what)
        if key not in self._cache:
            self._cache[key] = fn(self.run_dir(cell))
        return self._cache[key]

    def metrics(self, cell: dict) -> list[dict]:
        return self._load(cell, "metrics", lambda d: read_jsonl(d / "metrics.jsonl"))

    def groups(self, cell: dict) -> list[dict]:
        """groups.jsonl: one record per prompt group and step (harness/train/diagnostics/group_stats.py)."""
        return self._load(cell, "groups", lambda d: read_jsonl(d / "groups.jsonl"))

    def final_eval(self, cell: dict) -> dict:
        """eval.json (`harness eval`: held-out pass@k of the final checkpoint), {} when absent."""
        return self._load(
            cell, "eval", lambda d: json.loads((d / "eval.json").read_text()) if (d / "eval.json").exists() else {}
        )

    def config(self, cell: dict) -> dict:
        def read(d: Path) -> dict:
            p = d / "config.yaml"
            if not p.exists():
                p = Path(cell.get("config", ""))
            return yaml.safe_load(p.read_text()) if p.is_file() else {}

        return self._load(cell, "config", read)

    def drop_incomplete(self, marker: str = "eval.json") -> list[dict]:
        """Keep in `cells` only the cells that finished (their run folder holds `marker`: by default
        eval.json, the Snakefile's target for every cell; a notebook names its own, e.g. summary.json,
        which the trainer writes last) and return the others (`all_cells` still holds every cell): a
        folder where some cells were never run (or are still running) is summarised from its complete
        cells, and the rest are named, not drawn as empty arms."""
        done = [c for c in self.cells if (self.run_dir(c) / marker).exists()]
        missing = [c for c in self.cells if c not in done]
        self.cells = done
        return missing

    def has_metric(self, key: str) -> bool:
        return any(_finite(r.get(key)) for c in self.cells for r in self.metrics(c))

    # ------------------------------------------------------------------ grouping
    def by(self, *axes: str, cells: list[dict] | None = None) -> dict[str, list[dict]]:
        """label -> cells, label = the axis values joined (the seeds of one arm share a label);
        labels in the order of cells.json (the study file's order)."""
        out: dict[str, list[dict]] = {}
        for c in cells if cells is not None else self.cells:
            out.setdefault(" / ".join(str(c["axes"].get(a)) for a in axes), []).append(c)
        return out

    def values(self, axis: str) -> list:
        """The distinct values of an axis, in cells.json order."""
        seen = []
        for c in self.cells:
            v = c["axes"].get(axis)
            if v not in seen:
                seen.append(v)
        return seen

    @property
    def arms(self) -> list[str]:
        """The study's arm labels in a fixed order (palette.study_arms: every cell of cells.json, then
        probe.json's arms), then any other label a figure asked a colour for."""
        if self._study_arms is None:
            probe = self.dir / "probe.json"
            probe_arms = json.loads(probe.read_text()).get("arms", []) if probe.exists() else []
            self._study_arms = study_arms(self.all_cells, self.study.get("axes") or [], probe_arms)
        return self._study_arms + self._extra_arms

    def color(self, label: str) -> str:
        """The label's colour in the study's palette (palette.arm_palette over `arms`): the same in
        every figure of the study, whichever figure asks first."""
        if label not in self.arms:
            self._extra_arms.append(label)
        return arm_palette(self.arms)[label]

    def marker(self, label: str) -> str:
        """The label's marker (its place in `arms`), so overlapping lines stay apart."""
        self.color(label)
        return arm_marker(self.arms, label)

    @property
    def n_seeds(self) -> int:
        return len(self.study.get("seeds") or {c.get("seed") for c in self.cells})

    def title(self, what: str, note: str | None = None) -> str:
        """'<study> (<scale>): what' and a second line: `note`, else the number of seeds (what the
        figure draws is said by encoding.suptitle, from what its panels drew)."""
        return f"{self.name} ({self.scale}): {what}\n{seeds_label(self.n_seeds) if note is None else note}"
