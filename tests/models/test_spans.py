"""A trajectory's span (harness/models/spans.py): the forward lays out every token up to the model's last, the
tool's tokens between its turns included, so the log-probs are those of the sequence the model sampled from."""

from __future__ import annotations

import torch

from harness.models import build_model
from harness.models.logprobs import response_logprobs
from harness.models.prefix_groups import grouped_response_logits
from harness.models.spans import span_lengths, span_mask


def test_span_lengths_by_hand():
    mask = torch.tensor([[1.0, 1, 1, 0, 0], [1, 1, 0, 0, 1], [0, 0, 0, 0, 0], [0, 1, 0, 1, 0]])
    assert span_lengths(mask).tolist() == [3, 5, 0, 4]  # a prefix mask's span is its count: single-turn rows
    assert span_mask(mask).tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0], [1, 1, 1, 1, 0]]


def test_a_trajectory_is_scored_as_the_whole_sequence_it_was_sampled_in():
    torch.manual_seed(0)
    model, _ = build_model("tiny-dense", seed=0, overrides={"num_hidden_layers": 2})
    prompt, response = [1, 40, 41, 42], [50, 51, 60, 61, 62, 52, 2]
    mask = torch.tensor([[1.0, 1, 0, 0, 0, 1, 1]])  # model turn, a tool's 3 tokens, model turn
    ids = torch.tensor([prompt + response])
    with torch.no_grad():
        full = torch.log_softmax(model(input_ids=ids).logits[0].float(), -1)  # (P + T, V)
        want = torch.stack([full[len(prompt) - 1 + t, tok] for t, tok in enumerate(response)]) * mask[0]
        logp, _, _ = response_logprobs(model, [prompt], torch.tensor([response]), mask, pad_id=0)
        grouped = grouped_response_logits(model, [prompt], torch.tensor([response]), mask, pad_id=0)
    assert torch.allclose(logp[0], want, atol=1e-5), (logp, want)
    # the last turn's tokens follow the tool's: a layout of only the mask's count of tokens would lose them
    assert logp[0, 5] != 0 and logp[0, 6] != 0
    grouped_logp = torch.log_softmax(grouped[0].float(), -1).gather(-1, torch.tensor(response)[:, None])[:, 0]
    assert torch.allclose(grouped_logp * mask[0], want, atol=1e-5)
