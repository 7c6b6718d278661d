"""A dataset named by its Hugging Face Hub id (task.data.train: openai/gsm8k), read with `datasets`.

    rows, columns, commit = hub_rows("openai/gsm8k", "main", "main", "train", key="task.data.train",
                                     split_key="task.data.train_split")

The repo's snapshot comes from huggingface_hub's cache (harness/models/hub.py: downloaded once, read from
the cache when HF_HUB_OFFLINE=1 or HF_DATASETS_OFFLINE=1), and `datasets.load_dataset` reads that folder as
it reads the repo on the Hub: the configs its README.md declares (task.data.config), the splits of each
(task.data.train_split / eval_split). The processed table goes to a temporary cache removed after reading,
as for a file. The snapshot's commit is the data's fingerprint (what cache keys hold for a file's sha256).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from harness.models.hub import hub_snapshot, looks_like_hub_id

_MEMO: dict = {}


def is_hub_dataset(paths) -> bool:
    """Whether task.data.train / eval names one Hub dataset (a single org/name that is not an existing path)."""
    return isinstance(paths, str) and looks_like_hub_id(paths)


def hub_commit(repo_id: str, revision: str, key: str) -> str:
    """The commit of the dataset's snapshot (ValueError naming `key`: not to be had)."""
    return hub_snapshot(repo_id, revision, key, repo_type="dataset").commit


def hub_rows(
    repo_id: str, config: str | None, revision: str, split: str, key: str, split_key: str
) -> tuple[list[dict], list[str], str]:
    """(rows, column names, commit) of one split of one config of a Hub dataset; ValueError naming the key."""
    snap = hub_snapshot(repo_id, revision, key, repo_type="dataset")
    memo = (snap.commit, str(snap.folder), config, split)
    if memo not in _MEMO:
        _MEMO[memo] = _load(snap.folder, f"{key}={repo_id!r} (commit {snap.commit[:12]})", config, split, split_key)
    rows, columns = _MEMO[memo]
    return [dict(r) for r in rows], list(columns), snap.commit


def _load(folder: Path, shown: str, config: str | None, split: str, split_key: str) -> tuple[list[dict], list[str]]:
    """load_dataset of the snapshot folder, its config and split checked first (one line each)."""
    import datasets  # heavy: only where a dataset is read

    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    configs = datasets.get_dataset_config_names(str(folder))
    if config is not None and config not in configs:
        raise ValueError(f"task.data.config={config!r} is not a config of {shown}; its configs: {configs}")
    if config is None and len(configs) > 1:
        raise ValueError(f"task.data.config is null and {shown} has several configs {configs}: name one")
    splits = _splits(datasets, folder, config)
    if splits and split not in splits:
        raise ValueError(f"{split_key}={split!r} is not a split of {shown}; its splits: {splits}")
    try:
        with tempfile.TemporaryDirectory(prefix="harness-datasets-") as cache:
            ds = datasets.load_dataset(str(folder), name=config, split=split, cache_dir=cache, keep_in_memory=True)
    except Exception as err:  # noqa: BLE001 -- datasets/pyarrow raise many kinds; one line for the user
        raise ValueError(f"{shown} does not load ({type(err).__name__}: {' '.join(str(err).split())[:200]})") from None
    return ds.to_list(), list(ds.column_names)


def _splits(datasets, folder: Path, config: str | None) -> list[str]:
    """The splits a config declares (its data files' keys, else its info's); [] when it does not say."""
    builder = datasets.load_dataset_builder(str(folder), name=config)
    if builder.config.data_files:
        return list(builder.config.data_files)
    return list(builder.info.splits or [])


def without_hub_defaults(task: dict) -> dict:
    """A task section's dump without task.data.config / revision where they are at their defaults (null, main):
    the cache keys of a file dataset (warm start, step-0 eval) stay those it had before the keys existed."""
    data = task.get("data") if "data" in task else None
    if not isinstance(data, dict):
        return task
    kept = {k: v for k, v in data.items() if not (k == "config" and v is None or k == "revision" and v == "main")}
    return {**task, "data": kept}
