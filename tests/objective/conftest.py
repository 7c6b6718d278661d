"""Shared helpers for the objective tests: a tiny shared-parameter 'policy' so that gradients
of different micro-batches land on the same weights (as in gradient accumulation)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny tensors: intra-op threads only spin (10x slower on a loaded 2-core box). Restored after."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(autouse=True)
def _float64():
    """Hand values are compared at 1e-9..1e-6: float64 inside this folder only, restored after."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


class TinyPolicy:
    """logp[i, t] = log_softmax(X[i, t] @ W)[tok[i, t]]; W (d, V) is the only parameter."""

    def __init__(self, B: int = 6, T: int = 5, d: int = 4, V: int = 7, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        f64 = torch.float64
        self.W = torch.randn(d, V, generator=g, dtype=f64, requires_grad=True)
        self.X = torch.randn(B, T, d, generator=g, dtype=f64)
        self.tok = torch.randint(0, V, (B, T), generator=g)
        self.noise = 0.3 * torch.randn(B, T, generator=g, dtype=f64)  # old policy = current + noise (off-policy)

    def logp(self, rows: slice | None = None) -> torch.Tensor:
        rows = rows if rows is not None else slice(None)
        lp = torch.log_softmax(self.X[rows] @ self.W, dim=-1)
        return lp.gather(-1, self.tok[rows].unsqueeze(-1)).squeeze(-1)  # (B, T)

    def grad(self, loss: torch.Tensor) -> torch.Tensor:
        (g,) = torch.autograd.grad(loss, self.W)
        return g


@pytest.fixture
def tiny_policy() -> TinyPolicy:
    return TinyPolicy()


@pytest.fixture
def make_policy():
    """Factory: make_policy(B=..., T=..., seed=...) -> TinyPolicy."""
    return TinyPolicy
