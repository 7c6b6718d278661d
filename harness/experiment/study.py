"""A study and its cells: the data the experiment layer passes around (harness/experiment/load.py
builds it from a study file, expand.py fills its cells)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.config import dump_config

SCALES = (
    "smoke",
    "cpu",
    "gpu",
    "dataset",
)  # dataset: SmolLM2-135M on the sample dataset (length_bias, difficulty_bias)
DECLARED_SCALES = ("dataset",)  # a study runs at these only when its file has the scale's section
ARM = "arm"  # optional label key of a zip group
SAFE_NAME = re.compile(r"^[A-Za-z0-9._+-]+$")  # a study's, an arm's or a hypothesis's name
SEED = "seed"
REWARD_MODEL = "@reward_model"  # a cell's name for the reward model its study trains first (`reward_model:`)


class StudyError(ValueError):
    """A study file is wrong; the message names the offending key (and cell)."""


@dataclass(frozen=True)
class Axis:
    """One dimension of the grid: a single key, or a zip group of keys varying together."""

    keys: tuple[str, ...]  # dotted run-config keys set by this axis
    values: tuple[tuple, ...]  # one tuple (aligned with keys) per point of the axis
    labels: tuple[str, ...] | None = None  # zip `arm` labels, one per point
    source: str = "grid"  # "grid", "zip[i]" or "seeds" (for messages)

    def __len__(self) -> int:
        return len(self.values)


@dataclass
class Cell:
    id: str
    axes: dict[str, Any]  # axis name in tags/tables (dotted key, `arm`, `seed`) -> value
    overrides: dict[str, Any]  # dotted run-config key -> value set by this cell's axes (incl. seed)
    data: dict  # the cell's full (unvalidated) run-config mapping
    tags: dict[str, str]
    config: Any = None  # harness.config.RunConfig once validated

    def config_yaml(self) -> str:
        return dump_config(self.config, keep_auto=True)  # its auto levers resolved on the device that runs it


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
    arm_overrides: dict[str, dict] = field(default_factory=dict)  # arm label -> dotted overrides (not axes)
    probe: dict = field(default_factory=dict)  # settings of `harness probe` (harness/probes/)
    tune: Any = None  # the validated `tune:` section (schema.TuneSection), if any
    cells: list[Cell] = field(default_factory=list)
    reward_model: dict = field(default_factory=dict)  # `harness train-rm` options of the study's reward model
    results: str = "results"  # the results root: the study's reward model is trained under it
    hypotheses: list = field(default_factory=list)  # the preregistered claims (hypotheses.Hypothesis)
    correction: str = "holm"  # the family's multiplicity correction: holm | none

    @property
    def reward_model_dir(self) -> Path | None:
        """Where the study's reward model is trained (`@reward_model` in a cell's config); None without one."""
        return Path(self.results) / self.name / self.scale / "reward_model" if self.reward_model else None

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
