"""pass@k against brute force; DAPO overlong penalty and dynamic sampling."""

from __future__ import annotations

import itertools

import pytest
import torch

from harness.objective import dynamic_sampling_keep, overlong_penalty, pass_at_k


def _brute(n: int, c: int, k: int) -> float:
    """Share of the k-subsets of n samples (the first c correct) holding a correct sample."""
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(i < c for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", range(1, 9))
def test_pass_at_k_matches_enumeration(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(_brute(n, c, k), abs=1e-12), (n, c, k)


def test_pass_at_k_hand_values_and_edges():
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)  # pass@1 = c/n
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)  # 1 - C(3,2)/C(4,2) = 1 - 3/6
    assert pass_at_k(5, 0, 3) == 0.0
    assert pass_at_k(5, 3, 3) == 1.0  # n - c = 2 < k: exactly 1
    assert isinstance(pass_at_k(200, 17, 100), float) and 0 < pass_at_k(200, 17, 100) <= 1


@pytest.mark.parametrize(
    "args, word",
    [((5, 6, 1), "c"), ((5, -1, 1), "c"), ((5, 2, 0), "k >= 1"), ((5, 2, 6), "k <= n"), ((0, 0, 1), "n >= 1")],
)
def test_pass_at_k_validates(args, word):
    with pytest.raises(ValueError, match=word):
        pass_at_k(*args)
    with pytest.raises(TypeError):
        pass_at_k(5.5, 2, 1)


def test_overlong_penalty_by_hand():
    # max_len 20, buffer 4: free up to 16, linear to -1 at 20, -1 beyond
    L = torch.tensor([10, 16, 17, 18, 20, 25])
    got = overlong_penalty(L, max_len=20, buffer=4, penalty=1.0)
    # 17: -(17-16)/4 = -0.25; 18: -0.5; 20: -1
    torch.testing.assert_close(got, torch.tensor([0.0, 0.0, -0.25, -0.5, -1.0, -1.0], dtype=got.dtype))
    torch.testing.assert_close(overlong_penalty(L, 20, 4, 0.5), got * 0.5)
    assert (overlong_penalty(L, 20, 0) == 0).all()
    with pytest.raises(ValueError, match="overlong_buffer"):
        overlong_penalty(L, 20, 21)


def test_dynamic_sampling_keep():
    r = torch.tensor([1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.6])
    assert dynamic_sampling_keep(r, 3).tolist() == [False, True, False, True]
    with pytest.raises(ValueError, match="group_size"):
        dynamic_sampling_keep(r, 1)
