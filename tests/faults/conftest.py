"""Fixtures of the fault tests; the helpers are in faults_helpers.py."""

from __future__ import annotations

import pytest


@pytest.fixture
def mlflow_uri(tmp_path, monkeypatch) -> str:
    """MLflow on a fresh sqlite store in tmp_path (MLFLOW_TRACKING_URI)."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return uri
