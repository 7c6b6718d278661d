"""Fixtures of the rollout tests."""

import pytest
import torch


@pytest.fixture(scope="module")
def one_torch_thread():
    """Run the module with 1 torch thread: the hf-side reference computations are
    op-overhead bound, and 2 OpenMP threads on a busy 2-core machine ran them 10x slower."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
