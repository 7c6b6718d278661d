"""Models and datasets named by their Hugging Face Hub id (`org/name`), resolved through huggingface_hub's cache.

    snap = hub_snapshot("Qwen/Qwen2.5-0.5B-Instruct", "main", key="model.name")
    snap.folder          # .../hub/models--Qwen--Qwen2.5-0.5B-Instruct/snapshots/<commit>: a plain HF folder
    snap.record()        # {repo_id, revision, commit, folder}: what a run records to load the same files again

A name is a Hub id when it is not an existing path and has the Hub's `org/name` form; an existing folder
always wins (a relative `org/name` folder in the working directory is that folder). The snapshot is what
`huggingface_hub.snapshot_download` keeps: downloaded once (a token from the usual place: HF_TOKEN or
`huggingface-cli login`), then read from the cache. Offline (HF_HUB_OFFLINE=1, read from the environment at
each call, as the library's own constant is read once at import) only the cache is read, and a repo or a
revision that is not in it is refused in one line naming the key. The cache is HF_HUB_CACHE, else
HF_HOME/hub, else huggingface_hub's default (~/.cache/huggingface/hub).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

# huggingface_hub (about a second to import) is imported where a Hub id is resolved: a reward worker or a
# `harness config` of a run without Hub ids never loads it

# the Hub's repo id: a namespace and a name of letters, digits, '-', '_', '.' (huggingface_hub validate_repo_id)
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
_TRUE = {"1", "on", "yes", "true"}
# HF_DATASETS_OFFLINE as the user set it: harness/tasks/dataset/read.py sets it for its own file reads later
_DATASETS_OFFLINE = os.environ.get("HF_DATASETS_OFFLINE", "")
# weights of other frameworks (and loose originals) that a transformers model folder does not load
_NOT_LOADED = ["*.h5", "*.msgpack", "*.ot", "*.onnx", "onnx/*", "*.tflite", "original/*", "*.gguf"]


@dataclass(frozen=True)
class HubSnapshot:
    """One resolved snapshot: the repo, the revision asked for, the commit it is, and its folder in the cache."""

    repo_id: str
    revision: str
    commit: str
    folder: Path

    def record(self) -> dict[str, str]:
        return {"repo_id": self.repo_id, "revision": self.revision, "commit": self.commit, "folder": str(self.folder)}


def looks_like_hub_id(name: str) -> bool:
    """Whether `name` is to be read as a Hub id: not an existing path, and of the form org/name."""
    return not Path(name).exists() and bool(_HUB_ID.match(name))


def hub_id_problem(name: str) -> str | None:
    """Why a name with a '/' that is not an existing path is no Hub id either (None: it is one, or has no '/')."""
    if "/" not in name or Path(name).exists() or _HUB_ID.match(name):
        return None
    return "is neither an existing folder nor a Hugging Face Hub id (org/name: one '/', letters, digits, '-', '_', '.')"


def hub_cache() -> Path:
    """huggingface_hub's cache folder as the environment names it now: HF_HUB_CACHE, else HF_HOME/hub."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.path.expandvars(os.path.expanduser(os.environ["HF_HUB_CACHE"])))
    if os.environ.get("HF_HOME"):
        return Path(os.path.expandvars(os.path.expanduser(os.environ["HF_HOME"]))) / "hub"
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def hub_offline(datasets: bool = False) -> bool:
    """HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) as the environment says now; for a dataset HF_DATASETS_OFFLINE too,
    as the user set it (before the file reader's own default)."""
    values = [os.environ.get(n, "") for n in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")]
    return any(v.strip().lower() in _TRUE for v in values + ([_DATASETS_OFFLINE] if datasets else []))


def hub_snapshot(repo_id: str, revision: str, key: str, repo_type: str = "model") -> HubSnapshot:
    """The snapshot of `repo_id` at `revision` (a branch, a tag or a commit), downloaded if absent and the
    network allowed; ValueError naming `key` (one line) when it cannot be had."""
    offline = hub_offline(datasets=repo_type == "dataset")
    return _snapshot(repo_id, revision, key, repo_type, str(hub_cache()), offline)


@lru_cache(maxsize=64)
def _snapshot(repo_id: str, revision: str, key: str, repo_type: str, cache: str, offline: bool) -> HubSnapshot:
    """hub_snapshot, memoised per process on everything that decides it (the checks and the run resolve once)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    try:
        folder = snapshot_download(
            repo_id,
            repo_type=repo_type,
            revision=revision,
            cache_dir=cache,
            local_files_only=offline,
            ignore_patterns=_NOT_LOADED if repo_type == "model" else None,
        )
    except LocalEntryNotFoundError:
        raise ValueError(_not_cached(repo_id, revision, key, repo_type, cache, offline)) from None
    except HfHubHTTPError as err:  # RepositoryNotFoundError, RevisionNotFoundError, GatedRepoError, ...
        why = " ".join(str(err).split())[:200]
        raise ValueError(f"{key}={repo_id!r} (revision {revision!r}) cannot be downloaded: {why}") from None
    folder = Path(folder)
    return HubSnapshot(repo_id, revision, folder.name, folder)


def _not_cached(repo_id: str, revision: str, key: str, repo_type: str, cache: str, offline: bool) -> str:
    """The one line for a repo (or a revision of it) that the cache does not hold."""
    kind = "" if repo_type == "model" else f" --repo-type {repo_type}"
    get = f"download it once with `hf download {repo_id}{kind}"
    why = "HF_HUB_OFFLINE=1" if offline else "the Hub cannot be reached"
    held = cached_revisions(repo_id, repo_type, cache)
    if held is None:
        return f"{key}={repo_id!r} is not in the Hugging Face cache at {cache} (nor a folder here) and {why}: {get}`"
    return (
        f"{key}={repo_id!r}: revision {revision!r} is not in the Hugging Face cache at {cache} (it holds "
        f"{sorted(held)}) and {why}: {get} --revision {revision}`"
    )


def cached_revisions(repo_id: str, repo_type: str, cache: str) -> set[str] | None:
    """The refs and commits the cache holds of `repo_id` (scan_cache_dir); None: the repo is not cached."""
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    try:
        info = scan_cache_dir(cache)
    except CacheNotFound:
        return None
    for repo in info.repos:
        if repo.repo_id == repo_id and repo.repo_type == repo_type:
            return {r.commit_hash for r in repo.revisions} | {ref for r in repo.revisions for ref in r.refs}
    return None


def model_path(name: str, revision: str = "main", key: str = "model.name") -> str:
    """What to load for a model name: a Hub id's snapshot folder, any other name (built-in, folder) unchanged."""
    return str(hub_snapshot(name, revision, key).folder) if looks_like_hub_id(name) else name


def section_model(section) -> str:
    """model_path of a `model` section (its name and revision; a stand-in without a revision reads 'main')."""
    return model_path(section.name, getattr(section, "revision", "main") or "main")
