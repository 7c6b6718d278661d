"""The typed batch (harness/train/core/batch.py): row selection and the one micro-batch iterator."""

import torch

from harness.train.core.batch import Batch, micro_slices


def test_micro_slices_cover_every_row_once_in_order():
    assert list(micro_slices(5, 2)) == [[0, 1], [2, 3], [4]]
    assert list(micro_slices(4, None)) == [[0, 1, 2, 3]]
    assert list(micro_slices(0, None)) == [] and list(micro_slices(0, 3)) == []


def _batch(B=4, T=3):
    return Batch(
        [[1, i] for i in range(B)],
        torch.arange(B * T).view(B, T),
        torch.ones(B, T),
        torch.ones(B, T),
        torch.zeros(B, T),
        adv=torch.arange(B).float(),
    )


def test_rows_select_every_field_and_keep_the_step_row_numbers():
    b = _batch().rows([3, 1])
    assert b.prompt_ids == [[1, 3], [1, 1]] and b.adv.tolist() == [3.0, 1.0] and b.index == [3, 1]
    assert b.response_ids.tolist() == [[9, 10, 11], [3, 4, 5]] and b.old_logp is None
    parts = list(b.micro_batches(1))
    assert [p.index for p in parts] == [[3], [1]]  # a micro-batch of a mini-batch names the step's rows


def test_micro_batches_of_an_empty_selection_yield_nothing():
    assert list(_batch().rows([]).micro_batches(None)) == []
