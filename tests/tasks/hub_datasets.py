"""A small gsm8k-like dataset repo in a Hugging Face Hub cache (tests/models/hub_cache.py): two configs declared
in its README.md, as a Hub dataset declares them."""

from __future__ import annotations

from tests.models.hub_cache import hub_repo
from tests.tasks.conftest import gsm8k_rows, write_jsonl

CARD = """---
configs:
- config_name: main
  data_files:
  - split: train
    path: main/train.jsonl
  - split: test
    path: main/test.jsonl
- config_name: socratic
  data_files:
  - split: train
    path: socratic/train.jsonl
---
"""


def gsm_repo(cache, tmp_path):
    """org/gsm: config main (train 30 rows, test 10 rows), config socratic (train 5 rows)."""
    files = tmp_path / "gsm-files"
    write_jsonl(files / "main" / "train.jsonl", gsm8k_rows(30))
    write_jsonl(files / "main" / "test.jsonl", gsm8k_rows(10, start=100))
    write_jsonl(files / "socratic" / "train.jsonl", gsm8k_rows(5, start=200))
    (files / "README.md").write_text(CARD)
    return hub_repo(cache, "org/gsm", files, repo_type="dataset")
