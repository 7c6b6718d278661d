"""Datasets by their Hugging Face Hub id (task.data.train: org/name), read offline by datasets.load_dataset from
a dataset repo snapshot laid out as huggingface_hub writes it (datasets--org--name, configs declared in its
README.md): the config and split asked for, the snapshot's commit as the data's fingerprint, and one line for
a dataset not cached, a config or a split it does not have."""

from __future__ import annotations

import re

import pytest

from harness.config import ConfigError, load_config
from harness.tasks import DatasetTask, task_identity
from harness.tasks.rewards import RewardSpec
from tests.models.hub_cache import COMMIT
from tests.tasks.conftest import gsm8k_rows, write_jsonl
from tests.tasks.hub_datasets import gsm_repo

GSM8K = [RewardSpec("gsm8k", verifier="gsm8k")]


def task(**data) -> DatasetTask:
    return DatasetTask(data={"prompt_key": "question", **data}, rewards=GSM8K, reward_workers=0)


def test_a_hub_dataset_reads_its_config_and_splits(hub_cache, tmp_path):
    gsm_repo(hub_cache, tmp_path)
    t = task(train="org/gsm", eval="org/gsm", config="main")
    assert len(t.rows("train")) == 30 and len(t.rows("eval")) == 10
    assert {p.prompt for p in t.rows("eval")} == {r["question"] for r in gsm8k_rows(10, start=100)}
    t = task(train="org/gsm", config="socratic", eval_fraction=0.2)
    assert len(t.rows("train")) + len(t.rows("eval")) == 5


def test_its_fingerprint_is_the_snapshot_commit(hub_cache, tmp_path):
    gsm_repo(hub_cache, tmp_path)
    section = load_config(
        "experiments/runs/smoke.yaml",
        [
            "task.name=dataset",
            "task.data={train: org/gsm, eval: org/gsm, config: main, prompt_key: question}",
            "task.rewards=[gsm8k]",
            "task.reward_workers=0",
            "warm_start.enabled=false",
        ],
    ).task
    assert task_identity(section)["files"] == {"train": COMMIT, "eval": COMMIT}


def test_a_dataset_not_cached_is_one_line(hub_cache):
    want = (
        f"task.data.train='org/absent' is not in the Hugging Face cache at {hub_cache} (nor a folder here) and "
        "HF_HUB_OFFLINE=1: download it once with `hf download org/absent --repo-type dataset`"
    )
    with pytest.raises(ValueError, match=re.escape(want)):
        task(train="org/absent")


def test_a_config_it_does_not_have_is_one_line(hub_cache, tmp_path):
    gsm_repo(hub_cache, tmp_path)
    want = (
        f"task.data.config='nope' is not a config of task.data.train='org/gsm' (commit {COMMIT[:12]}); "
        "its configs: ['main', 'socratic']"
    )
    with pytest.raises(ValueError, match=re.escape(want)):
        task(train="org/gsm", config="nope")
    with pytest.raises(
        ValueError,
        match=r"task.data.config is null and task.data.train='org/gsm' \(commit "
        r"0123456789ab\) has several configs \['main', 'socratic'\]: name one",
    ):
        task(train="org/gsm")


def test_a_split_it_does_not_have_is_one_line(hub_cache, tmp_path):
    gsm_repo(hub_cache, tmp_path)
    want = (
        f"task.data.eval_split='validation' is not a split of task.data.eval='org/gsm' (commit {COMMIT[:12]}); "
        "its splits: ['train', 'test']"
    )
    with pytest.raises(ValueError, match=re.escape(want)):
        task(train="org/gsm", eval="org/gsm", config="main", eval_split="validation")


def test_config_and_revision_need_a_hub_id(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", gsm8k_rows(20))
    with pytest.raises(
        ConfigError,
        match=re.escape(
            f"task.data.config='main' picks a Hugging Face Hub dataset's config, and neither task.data.train="
            f"{str(path)!r} nor task.data.eval is a Hub id (org/name); drop it"
        ),
    ):
        load_config(
            "experiments/runs/smoke.yaml",
            [
                "task.name=dataset",
                f"task.data={{train: {path}, config: main, prompt_key: question}}",
                "task.rewards=[gsm8k]",
            ],
        )
