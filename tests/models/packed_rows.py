"""Three prompt + response rows of uneven lengths for the packed-forward tests (test_response_head.py,
test_padded_widths.py): prompts of 12, 5 and 9 tokens, responses of 7 tokens, the second one 4 long."""

import torch

from harness.models import build_model


def tiny_model(name: str):
    """A tiny model from the registry (its first part where it builds a tuple), in eval mode."""
    m = build_model(name, seed=0)
    return (m[0] if isinstance(m, tuple) else m).eval()


def three_rows(vocab: int):
    """-> prompts (3 lists of 12, 5, 9 ids), responses (3, 7), mask (3, 7) with row 1 ending after 4 tokens."""
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(3, vocab, (n,), generator=g).tolist() for n in (12, 5, 9)]  # P_i: 12, 5, 9
    resp = torch.randint(3, vocab, (3, 7), generator=g)
    mask = torch.ones(3, 7)
    mask[1, 4:] = 0  # a short response: lengths 7, 4, 7
    return prompts, resp, mask
