"""Model tests run offline (nothing may come from the HF hub) and single-threaded."""

import os

import pytest
import torch

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models are op-overhead bound: 1 thread is as fast as 2, and far faster when
    the 2 cores are shared (OpenMP threads spinning against other processes: 30x slower)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


from tests.models.hub_cache import hub_cache, tiny_folder  # noqa: E402, F401 -- fixtures: a Hub cache, a tiny model folder
