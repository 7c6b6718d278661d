"""Section `tracking`: where the run's metrics go (MLflow)."""

from __future__ import annotations

from pydantic import Field, StrictBool

from harness.config.base import _Section


class TrackingSection(_Section):
    mlflow: StrictBool = Field(True, description="log to MLflow (MLFLOW_TRACKING_URI, else sqlite under results/)")
    experiment: str = Field("harness", description="MLflow experiment name")
    run_name: str | None = Field(None, description="MLflow run name; None = the run directory's name")
    tags: dict[str, str] = Field(default_factory=dict, description="MLflow tags, e.g. the grid axes of a cell")
