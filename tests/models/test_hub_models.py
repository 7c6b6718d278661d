"""Models by their Hugging Face Hub id (model.name: org/name), read offline from a Hub cache laid out as
huggingface_hub writes it: the snapshot of refs/main or of a named commit, an existing folder of the same
name first, and one line for every refusal (not cached, a revision not cached, not a causal LM, not an id)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from harness.config import ConfigError, load_config
from harness.models.hub import hub_snapshot, section_model
from harness.tasks.rewards.reward_model import RewardModel
from tests.models.hub_cache import COMMIT, OTHER_COMMIT, hub_repo
from tests.tasks.reward_models import tiny_reward_model

SMOKE = str(Path("experiments/runs/smoke.yaml").resolve())  # the tests chdir
TINY = ["warm_start.enabled=false", "rollout.max_new_tokens=4", "tracking.mlflow=false"]


def config(*overrides: str):
    return load_config(SMOKE, [*TINY, *overrides])


def test_a_hub_id_loads_its_snapshot_of_main(hub_cache, tiny_folder):
    snapshot = hub_repo(hub_cache, "org/tiny", tiny_folder)
    cfg = config("model.name=org/tiny")
    assert section_model(cfg.model) == str(snapshot)
    snap = hub_snapshot("org/tiny", "main", "model.name")
    assert snap.record() == {"repo_id": "org/tiny", "revision": "main", "commit": COMMIT, "folder": str(snapshot)}


def test_a_revision_picks_its_commit(hub_cache, tiny_folder):
    hub_repo(hub_cache, "org/tiny", tiny_folder)
    older = hub_repo(hub_cache, "org/tiny", tiny_folder, commit=OTHER_COMMIT, refs=("v1",))
    assert section_model(config("model.name=org/tiny", "model.revision=v1").model) == str(older)
    assert section_model(config("model.name=org/tiny", f"model.revision={OTHER_COMMIT}").model) == str(older)


def test_an_existing_folder_wins_over_the_hub(hub_cache, tiny_folder, tmp_path, monkeypatch):
    shutil.copytree(tiny_folder, tmp_path / "org" / "tiny")
    monkeypatch.chdir(tmp_path)  # `org/tiny` is a folder here, and the cache holds no such repo
    assert section_model(config("model.name=org/tiny").model) == "org/tiny"


def test_not_cached_while_offline_is_one_line(hub_cache):
    want = (
        f"model.name='org/absent' is not in the Hugging Face cache at {hub_cache} (nor a folder here) and "
        "HF_HUB_OFFLINE=1: download it once with `hf download org/absent`"
    )
    with pytest.raises(ConfigError, match=re.escape(want)):
        config("model.name=org/absent")


def test_a_revision_not_in_the_cache_is_one_line(hub_cache, tiny_folder):
    hub_repo(hub_cache, "org/tiny", tiny_folder)
    want = (
        f"model.name='org/tiny': revision 'v9' is not in the Hugging Face cache at {hub_cache} (it holds "
        f"['{COMMIT}', 'main']) and HF_HUB_OFFLINE=1: download it once with `hf download org/tiny --revision v9`"
    )
    with pytest.raises(ConfigError, match=re.escape(want)):
        config("model.name=org/tiny", "model.revision=v9")


def test_a_repo_that_is_no_causal_lm_is_refused(hub_cache, tiny_folder, tmp_path):
    files = tmp_path / "encoder"
    shutil.copytree(tiny_folder, files)
    (files / "config.json").write_text(json.dumps({"model_type": "distilbert", "architectures": ["DistilBertModel"]}))
    hub_repo(hub_cache, "org/encoder", files)
    with pytest.raises(
        ConfigError,
        match=r"model.name='org/encoder' \(revision 'main'\) is a Hugging Face Hub repo "
        r"but not a causal LM's: .* model_type='distilbert', which this transformers cannot load as a "
        r"causal LM",
    ):
        config("model.name=org/encoder")


def test_a_name_with_two_slashes_is_neither_folder_nor_id(hub_cache):
    with pytest.raises(
        ConfigError,
        match=re.escape(
            "model.name='org/name/extra' is neither an existing folder nor a Hugging Face Hub id (org/name"
        ),
    ):
        config("model.name=org/name/extra")


def test_a_revision_without_a_hub_id_is_refused():
    with pytest.raises(
        ConfigError,
        match="model.revision='v1' picks a commit of a Hugging Face Hub repo, and "
        "model.name='tiny-dense' is not a Hub id",
    ):
        config("model.revision=v1")


def test_reward_models_and_critic_init_by_hub_id(hub_cache, tmp_path):
    snapshot = hub_repo(hub_cache, "org/rm", tiny_reward_model(tmp_path / "rm", seed=3))
    assert RewardModel("org/rm").path == str(snapshot)
    cfg = config("objective.preset=ppo", "model.critic_init=org/rm")
    assert cfg.model.critic_init == "org/rm"
    with pytest.raises(ConfigError, match=r"model.critic_init='org/norm' is not in the Hugging Face cache"):
        config("objective.preset=ppo", "model.critic_init=org/norm")
