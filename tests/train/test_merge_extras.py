"""The objective's extras come from several bags (the batch's, the forward's hooks, the components', the step's):
one key in two of them is an error naming both, not a silent replacement of one value by the other."""

import pytest
import torch

from harness.train.core.forward import merge_extras


def test_disjoint_bags_merge_into_one():
    a, b = torch.ones(2), torch.zeros(2)
    merged = merge_extras(batch={"topk": a}, forward={}, components={"values": b}, step={"entropy_coef": 0.1})
    assert merged.keys() == {"topk", "values", "entropy_coef"} and merged["topk"] is a and merged["values"] is b


def test_a_key_in_two_bags_is_refused_naming_both():
    with pytest.raises(ValueError, match=r"'values' is provided by both batch and components"):
        merge_extras(batch={"values": torch.ones(1)}, forward={}, components={"values": torch.zeros(1)})
