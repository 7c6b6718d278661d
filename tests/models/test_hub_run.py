"""`harness train` by Hub ids: the policy (model.name: org/tiny) and the rows (task.data.train: org/gsm) read
offline from a Hub cache, one step trained; run.json and the MLflow params record each snapshot's repo,
revision, commit and folder. `harness config` refuses an id the cache does not hold in one line, exit 2."""

from __future__ import annotations

import json

from harness.cli import main
from tests.models.hub_cache import COMMIT, hub_repo
from tests.tasks.hub_datasets import gsm_repo

SMOKE = "experiments/runs/smoke.yaml"
TINY = [
    "warm_start.enabled=false",
    "train.steps=1",
    "train.prompts_per_step=2",
    "train.group_size=2",
    "rollout.max_new_tokens=4",
    "eval.num_prompts=2",
    "eval.n_samples=1",
    "eval.ks=[1]",
    "eval.every=0",
]
DATA = ["task.name=dataset", "task.data={train: org/gsm, config: main, prompt_key: question}", "task.rewards=[gsm8k]"]


def test_a_run_by_hub_ids_trains_and_records_its_snapshots(hub_cache, tiny_folder, tmp_path, monkeypatch):
    snapshot = hub_repo(hub_cache, "org/tiny", tiny_folder)
    data = gsm_repo(hub_cache, tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    out = tmp_path / "run"
    args = [*TINY, *DATA, "model.name=org/tiny", "task.reward_workers=0", "tracking.mlflow=true"]
    assert main(["train", SMOKE, *args, "--out", str(out)]) == 0
    hub = json.loads((out / "run.json").read_text())["attempts"][-1]["hub"]
    assert hub["model"] == {"repo_id": "org/tiny", "revision": "main", "commit": COMMIT, "folder": str(snapshot)}
    assert hub["data_train"] == {
        "repo_id": "org/gsm",
        "revision": "main",
        "commit": COMMIT,
        "folder": str(data),
        "config": "main",
    }
    from mlflow.tracking import MlflowClient

    params = MlflowClient().get_run((out / "mlflow_run_id").read_text().strip()).data.params
    assert params["hub.model.commit"] == COMMIT and params["hub.data_train.repo_id"] == "org/gsm"
    assert params["model.name"] == "org/tiny" and params["model.revision"] == "main"


def test_harness_config_refuses_an_uncached_id_in_one_line(hub_cache, capsys):
    assert main(["config", SMOKE, *TINY, "model.name=org/absent"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "model.name='org/absent' is not in the Hugging Face cache at" in err
