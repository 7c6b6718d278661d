"""Shared fixtures: offline Hugging Face, the repo root as cwd, the shared warm-start cache."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# Tests run from the repo root (relative paths such as experiments/runs/smoke.yaml and the
# shared warm-start cache results/warmstart resolve against it).
os.chdir(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pytest  # noqa: E402


def pytest_report_header(config):
    """The machine whose kernels computed every number below (harness/machine.py)."""
    from harness import machine

    d = machine.describe()
    versions = ", ".join(f"{k} {v}" for k, v in d["packages"].items())
    return [f"machine: {machine.one_line(d)}", f"packages: {versions}"]


@pytest.fixture(scope="session")
def warm_cache():
    """The warm-start cache the tests share (the default one: entries are keyed by model, task
    and SFT settings, so sharing with `make demo` and the smoke runs is safe)."""
    return "results/warmstart"
