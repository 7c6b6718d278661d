"""Where metrics go: MLflow (embedded sqlite under results/ or a server) or nowhere."""

from harness.tracking.base import NoOpTracker, Tracker
from harness.tracking.mlflow_tracker import MlflowTracker
from harness.tracking.store import default_tracking_uri, ensure_store

__all__ = ["Tracker", "NoOpTracker", "MlflowTracker", "default_tracking_uri", "ensure_store"]
