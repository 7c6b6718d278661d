"""The MLflow side of a study, on a real sqlite store in tmp_path (runs logged by hand, no training):
the run-folder contract rebuilt from MLflow (harness/experiment/from_mlflow.py) and the experiment marks
(harness/tracking/experiment.py)."""

from __future__ import annotations

import json

from harness.experiment.from_mlflow import rebuild_study_dir
from harness.experiment.study_runs import open_study
from harness.experiment.summary import summary_table
from harness.tracking.experiment import KIND_TAG, MODEL_TRAINING, VIEW_TAG, ensure_experiment, mark_all, view_url
from harness.tracking.store import client_for


def _study_dir(tmp_path):
    d = tmp_path / "results" / "toy" / "smoke"
    d.mkdir(parents=True)
    cells = [
        {
            "id": f"preset=grpo__seed={s}",
            "variant": "preset=grpo",
            "seed": s,
            "axes": {"objective.preset": "grpo", "seed": s},
            "run_dir": f"results/toy/smoke/runs/preset=grpo__seed={s}",
            "tags": {"study": "toy", "scale": "smoke", "cell": f"preset=grpo__seed={s}", "variant": "preset=grpo"},
        }
        for s in (1, 2)
    ]
    (d / "cells.json").write_text(json.dumps(cells))
    (d / "study.json").write_text(
        json.dumps(
            {
                "name": "toy",
                "scale": "smoke",
                "experiment": "toy/smoke",
                "axes": ["objective.preset", "seed"],
                "seeds": [1, 2],
            }
        )
    )
    return d


def _metric(client, run_id, key, value, step, ts):
    from mlflow.entities import Metric

    client.log_batch(run_id, metrics=[Metric(key, value, ts, step)])


def test_rebuild_from_mlflow(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client, uri = client_for(uri)
    d = _study_dir(tmp_path)
    parent = open_study(d, uri)
    exp_id = client.get_experiment_by_name("toy/smoke").experiment_id
    tags = {"study": "toy", "scale": "smoke", "cell": "preset=grpo__seed=1", "variant": "preset=grpo"}
    killed = client.create_run(exp_id, run_name="attempt 1", tags=tags).info.run_id
    _metric(client, killed, "entropy", 9.0, 0, 1)
    client.set_terminated(killed, "KILLED")
    done = client.create_run(exp_id, run_name="attempt 2", tags=tags).info.run_id
    _metric(client, done, "entropy", 0.5, 0, 10)
    _metric(client, done, "entropy", 0.4, 1, 11)
    _metric(client, done, "entropy", 0.3, 1, 12)  # step 1 logged again later: the later value counts
    _metric(client, done, "eval/pass_at_1", 0.25, 1, 12)
    _metric(client, done, "result/final_pass_at_1", 0.7, 1, 13)  # a study result, not a step metric
    (tmp_path / "summary.json").write_text(
        json.dumps({"steps": 1, "paired_rise": {"delta_pass_at_1": 0.05, "ci95": [0.01, 0.09]}})
    )
    client.log_artifact(done, str(tmp_path / "summary.json"))
    client.set_terminated(done)

    out = rebuild_study_dir("toy/smoke", tmp_path / "inputs", uri)
    run_dir = out / "runs" / "preset=grpo__seed=1"
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert records == [{"step": 0, "entropy": 0.5}, {"step": 1, "entropy": 0.3, "eval/pass_at_1": 0.25}]
    assert json.loads((run_dir / "summary.json").read_text())["paired_rise"]["delta_pass_at_1"] == 0.05
    assert not (out / "runs" / "preset=grpo__seed=2").exists()  # never logged: missing, as a missing run folder
    cells = json.loads((out / "cells.json").read_text())
    assert [c["run_dir"] for c in cells] == [str((out / "runs" / c["id"]).resolve()) for c in cells]
    table = summary_table(out)
    assert list(table["status"]) == ["complete", "missing"]
    assert table["paired_rise_pass_at_1"][0] == 0.05
    # the study run is the parent the cells nest under; its files are what the rebuild read
    assert client.get_run(parent).data.tags["kind"] == "study"


def test_experiment_marks(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client, uri = client_for(uri)
    old = client.create_experiment("old/cpu")  # as the harness made them before: no tags
    genai = client.create_experiment("chatbot", tags={KIND_TAG: "genai_development"})
    assert ensure_experiment(client, "old/cpu", uri, axes=["arm", "seed"]) == old
    tags = client.get_experiment(old).tags
    assert tags[KIND_TAG] == MODEL_TRAINING
    assert json.loads(tags[VIEW_TAG])["selectedColumns"][:2] == ["params.`arm`", "params.`seed`"]
    assert mark_all(client) == ["Default"]  # old/cpu is marked already; an explicit kind is left alone
    assert client.get_experiment(genai).tags[KIND_TAG] == "genai_development"
    assert view_url("http://h:5000/", old).endswith(
        f"/#/experiments/{old}/runs?workflowType=machine_learning&viewStateShareKey=harness"
    )
