"""A Hugging Face Hub cache laid out as huggingface_hub writes it, for tests without a network.

    hub_repo(cache, "org/tiny", folder)   # cache/models--org--tiny/{blobs/<sha256>, snapshots/<commit>/<file>
                                          #   -> ../../blobs/<sha256>, refs/main = <commit>}

Each file is a blob named by its sha256, linked (relative symlink) from the snapshot folder of its commit;
refs/<ref> holds the commit's 40 hex digits (huggingface_hub's docs, "Understand caching").
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

COMMIT = "0123456789abcdef0123456789abcdef01234567"
OTHER_COMMIT = "fedcba9876543210fedcba9876543210fedcba98"


def hub_repo(
    cache: Path, repo_id: str, files: Path, commit: str = COMMIT, repo_type: str = "model", refs=("main",)
) -> Path:
    """Copy every file under `files` into the cache as the snapshot `commit` of `repo_id`; -> the snapshot folder."""
    repo = Path(cache) / f"{repo_type}s--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / commit
    for src in sorted(p for p in Path(files).rglob("*") if p.is_file()):
        blob = repo / "blobs" / hashlib.sha256(src.read_bytes()).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, blob)
        link = snapshot / src.relative_to(files)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    for ref in refs:
        (repo / "refs" / ref).write_text(commit)
    return snapshot


@pytest.fixture
def hub_cache(tmp_path, monkeypatch) -> Path:
    """An empty Hub cache at tmp_path/hf/hub (HF_HOME), read offline (HF_HUB_OFFLINE=1)."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cache = tmp_path / "hf" / "hub"
    cache.mkdir(parents=True)
    return cache


@pytest.fixture(scope="session")
def tiny_folder(tmp_path_factory) -> Path:
    """tiny-dense (seed 0) saved as a plain HF folder."""
    from harness.models import build_model, save_model

    model, tok = build_model("tiny-dense", seed=0)
    return save_model(model, tok, tmp_path_factory.mktemp("tiny") / "tiny-dense")
