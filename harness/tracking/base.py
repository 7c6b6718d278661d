"""Tracker interface. The training loop calls these and never branches on `if logging:`."""

from __future__ import annotations


class Tracker:
    """No-op base: every method is safe to call."""

    run_id: str | None = None

    def last_step(self) -> int:
        """Highest step already logged (-1 if none): a resumed run logs only later steps."""
        return -1

    def log_steps(self, records: list[dict]) -> None:
        """records: one dict per step, each with an int 'step' and float metrics."""

    def log_artifact(self, path: str, artifact_path: str | None = None) -> None:
        """Upload a file."""

    def finish(self, status: str = "FINISHED") -> None:
        """Mark the run finished (or FAILED / KILLED)."""


class NoOpTracker(Tracker):
    """Used with tracking.mlflow=false."""
