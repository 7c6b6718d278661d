"""Shared fixtures: offline Hugging Face, one small cached warm start for the whole session."""
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def warm_cache(tmp_path_factory):
    """A warm-start cache dir shared by the tests (a short SFT, built once per session)."""
    return str(tmp_path_factory.mktemp("warmstart"))
