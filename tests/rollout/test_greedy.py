"""Temperature 0 is greedy decoding (ReMax's baseline response, harness/objective/remax.py): the hf backend's
rows equal transformers' own greedy generate (do_sample=False, the argmax a step), whatever the seed or
the seeding, and each recorded log-prob is that of the argmax token under softmax(logits)."""

import pytest
import torch

from harness.config import load_config
from harness.models import build_model
from harness.models.prefix_groups import left_pad
from harness.rollout import SamplingParams, make_backend


def _prompts():
    g = torch.Generator().manual_seed(0)
    return [torch.randint(3, 20, (k,), generator=g).tolist() for k in (6, 9, 4, 7)]


def _argmax_decoding(model, tok, prompts, max_new_tokens):
    """transformers' greedy search on the left-padded prompts -> (responses (b, T), log-probs of their tokens)."""
    ids, att = left_pad(prompts, tok.pad_token_id)
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=att, max_new_tokens=max_new_tokens, do_sample=False,
                             pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                             return_dict_in_generate=True, output_logits=True)  # fmt: skip
    resp = out.sequences[:, ids.shape[1] :]
    logits = torch.stack(out.logits, dim=1).float()
    return resp, torch.log_softmax(logits, -1).gather(-1, resp.unsqueeze(-1)).squeeze(-1)


@pytest.mark.parametrize("seeding", ["batch", "prompt"])
def test_temperature_zero_is_argmax_decoding(seeding):
    model, tok = build_model("tiny-dense", seed=0)
    model.eval()
    backend = make_backend(
        load_config("experiments/runs/smoke.yaml", [f"rollout.seeding={seeding}"]).rollout, model, tok
    )
    want_ids, want_logp = _argmax_decoding(model, tok, _prompts(), 12)
    runs = [backend.generate(_prompts(), 1, SamplingParams(max_new_tokens=12, temperature=0.0, seed=s)) for s in (1, 2)]
    for got in runs:
        mask = got.response_mask.bool()
        assert torch.equal(got.response_ids[mask], want_ids[:, : mask.shape[1]][mask])
        assert torch.allclose(got.sampler_logp[mask], want_logp[:, : mask.shape[1]][mask], atol=1e-6)
        assert (got.sampler_logp[mask] <= 0).all() and float(got.response_mask.sum()) > 8
    assert torch.equal(runs[0].response_ids, runs[1].response_ids)  # no draw: the seed changes nothing
    # a sampled rollout at temperature 1 is not the greedy one (the test can tell them apart)
    sampled = backend.generate(_prompts(), 1, SamplingParams(max_new_tokens=12, temperature=1.0, seed=1))
    assert not torch.equal(sampled.response_ids, runs[0].response_ids)
