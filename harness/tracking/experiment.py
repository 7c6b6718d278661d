"""A study's MLflow experiment as the UI shows it: a model-training experiment with a saved view.

MLflow 3 opens an experiment on its GenAI pages (Traces overview) unless told otherwise. Every
experiment the harness creates or touches gets
    mlflow.experimentKind = custom_model_development   (what the experiment is; MLflow's tag)
    mlflow.sharedViewState.harness                      (a runs-table view: axis params and result
                                                         metrics as columns, grouped by variant)
MLflow 3.17's UI picks its pages from the GenAI / Model training switch (the `workflowType`
URL parameter, else the browser's last choice), not from the kind tag; `view_url` therefore
links with both `workflowType=machine_learning` and `viewStateShareKey=harness`
(`make mlflow-ui` prints one link per study experiment).
"""

from __future__ import annotations

import json

from harness.tracking.store import artifact_root, retry_locked

KIND_TAG = "mlflow.experimentKind"
MODEL_TRAINING = "custom_model_development"
NOTE_TAG = "mlflow.note.content"
VIEW_KEY = "harness"
VIEW_TAG = f"mlflow.sharedViewState.{VIEW_KEY}"
RESULT_PREFIX = "result/"  # per-cell results logged once the study's summary exists (harness/experiment/study_runs.py)
# the runs-table columns of the saved view, after the study's axis params
RESULT_COLUMNS = (
    "paired_rise_pass_at_1",
    "paired_rise_ci95_lo",
    "paired_rise_ci95_hi",
    "initial_pass_at_1",
    "final_pass_at_1",
    "final_pass_at_k",
    "train_accuracy_last",
    "wall_seconds",
)


def column(kind: str, name: str) -> str:
    """A runs-table column id as the MLflow UI spells it: params.`objective.preset`."""
    return f"{kind}.`{name}`"


def view_state(axes: list[str]) -> dict:
    """The saved runs-table view: the axes (params) and key results (metrics) as columns, the
    latest in-loop eval/pass_at_1, and rows grouped by the `variant` tag (mean over its seeds)."""
    cols = [column("params", a) for a in axes]
    cols += [column("metrics", RESULT_PREFIX + r) for r in RESULT_COLUMNS] + [column("metrics", "eval/pass_at_1")]
    return {
        "selectedColumns": cols,
        "groupBy": {"groupByKeys": [{"mode": "tag", "groupByData": "variant"}], "aggregateFunction": "average"},
    }


def ensure_experiment(client, name: str, uri: str, axes: list[str] | None = None, note: str | None = None) -> str:
    """The experiment's id, created if missing (artifacts beside an embedded store), marked as a
    model-training experiment; with `axes`, the saved view too; with `note`, its description."""
    exp = retry_locked(client.get_experiment_by_name, name)
    if exp is None:
        try:
            exp_id = retry_locked(
                client.create_experiment, name, artifact_location=artifact_root(uri), tags={KIND_TAG: MODEL_TRAINING}
            )
        except Exception:  # another process created it first
            exp_id = retry_locked(client.get_experiment_by_name, name).experiment_id
        tags = {}
    else:
        exp_id, tags = exp.experiment_id, exp.tags
    wanted = {KIND_TAG: tags.get(KIND_TAG) or MODEL_TRAINING}  # an explicit kind is left as it is
    if axes is not None:
        wanted[VIEW_TAG] = json.dumps(view_state(axes))
    if note is not None:
        wanted[NOTE_TAG] = note
    for key, value in wanted.items():
        if tags.get(key) != value:
            retry_locked(client.set_experiment_tag, exp_id, key, value)
    return exp_id


def mark_all(client) -> list[str]:
    """Mark every experiment without a kind as model training (the one-off migration of an old
    store); returns their names."""
    marked = []
    for exp in retry_locked(client.search_experiments):
        if KIND_TAG not in exp.tags:
            retry_locked(client.set_experiment_tag, exp.experiment_id, KIND_TAG, MODEL_TRAINING)
            marked.append(exp.name)
    return marked


def view_url(base: str, experiment_id: str, shared_view: bool = True) -> str:
    """The UI link that opens the experiment's runs table (model-training pages, the saved view)."""
    query = "workflowType=machine_learning" + (f"&viewStateShareKey={VIEW_KEY}" if shared_view else "")
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs?{query}"


def ui_links(client, base: str) -> list[str]:
    """One line per experiment: its name and the link to open (the saved view where it has one)."""
    lines = []
    for exp in sorted(retry_locked(client.search_experiments), key=lambda e: e.name):
        lines.append(f"{exp.name:<28} {view_url(base, exp.experiment_id, VIEW_TAG in exp.tags)}")
    return lines
