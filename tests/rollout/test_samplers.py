"""The hf backend's token draw (harness/rollout/samplers.py): a logits processor that draws the token and records
its log-prob a step, instead of generate keeping every step's (b, V) scores. Against transformers' own sampling
generate with `output_scores` and the log-softmax over the stacked scores (what the backend did before): the same
tokens and the same sampler log-probs, bit for bit."""

import pytest
import torch

from harness.config import load_config
from harness.models import build_model
from harness.rollout import SamplingParams, make_backend
from harness.rollout.samplers import BatchSampler, processors


def _model():
    built = build_model("tiny-dense", seed=0)
    return built if isinstance(built, tuple) else (built, None)


def _prompts(n: int = 4):
    g = torch.Generator().manual_seed(0)
    return [torch.randint(3, 20, (k,), generator=g).tolist() for k in (6, 9, 4, 7)[:n]]


def _generate(model, tok, prompts, group, seed, max_new_tokens, **sampling):
    """generate on the left-padded rows (each prompt `group` times) under torch.manual_seed(seed) -> (its output,
    the prompt width)."""
    from harness.models.prefix_groups import left_pad

    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    ids, att = left_pad([p for p in prompts for _ in range(group)], pad)
    torch.manual_seed(seed)
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=att, max_new_tokens=max_new_tokens, pad_token_id=pad,
                             eos_token_id=tok.eos_token_id, return_dict_in_generate=True, **sampling)  # fmt: skip
    return out, ids.shape[1]


def _reference(model, tok, prompts, group, params, seed):
    """transformers' sampling generate (its multinomial draw) and the stacked-scores log-probs."""
    out, width = _generate(model, tok, prompts, group, seed, params.max_new_tokens, do_sample=True, top_k=0,
                           temperature=params.temperature, top_p=params.top_p, output_scores=True)  # fmt: skip
    resp = out.sequences[:, width:]
    scores = torch.stack(out.scores, dim=1).float()  # (b, T, V)
    return resp, torch.log_softmax(scores, dim=-1).gather(-1, resp.unsqueeze(-1)).squeeze(-1)


@pytest.mark.parametrize("temperature, top_p", [(1.0, 1.0), (0.7, 0.9)])
def test_batch_draw_equals_generates_own_sampling_bit_for_bit(temperature, top_p):
    model, tok = _model()
    model.eval()
    params = SamplingParams(max_new_tokens=16, temperature=temperature, top_p=top_p)
    want_ids, want_logp = _reference(model, tok, _prompts(), 4, params, seed=11)
    sampler = BatchSampler()
    out, width = _generate(model, tok, _prompts(), 4, 11, 16, do_sample=False,
                           logits_processor=processors(temperature, top_p, sampler))  # fmt: skip
    got_ids = out.sequences[:, width:]
    assert torch.equal(got_ids, want_ids)
    eos = got_ids == tok.eos_token_id
    live = (eos.cumsum(-1) - eos.long()) == 0  # up to and including a row's EOS (generate pads a row after it)
    assert len(sampler.logps) == want_ids.shape[1] and 0 < int(eos.any(-1).sum()) < len(got_ids)
    assert torch.equal(sampler.sampled_logp()[live], want_logp[live])  # bit for bit


def test_backend_sampler_logp_is_the_stacked_scores_log_softmax():
    """The backend under rollout.seeding=batch: tokens and masked log-probs as from generate's own sampling."""
    cfg = load_config("experiments/runs/smoke.yaml", ["rollout.seeding=batch"])
    model, tok = _model()
    be = make_backend(cfg.rollout, model, tok)
    params = SamplingParams(max_new_tokens=12, temperature=1.0, seed=5)
    got = be.generate(_prompts(), 4, params)
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=torch.Generator().manual_seed(5)))  # the chunk's seed
    want_ids, want_logp = _reference(model, tok, _prompts(), 4, params, seed)
    mask = got.response_mask.bool()
    assert torch.equal(got.response_ids[mask], want_ids[mask])
    assert torch.equal(got.sampler_logp, torch.where(mask, want_logp, torch.zeros_like(want_logp)))
    assert float(got.response_mask.sum()) > 16


def test_a_sampler_records_the_drawn_tokens_logprob_and_returns_the_token_alone():
    s = BatchSampler()
    torch.manual_seed(0)
    probs = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.0, 0.0, 1.0, 0.0]])
    out = s(None, torch.log(probs))
    tok = out.argmax(-1)
    assert int(tok[1]) == 2 and torch.isinf(out).sum() == 6 and out.max() == 0.0
    assert s.logps[0].shape == (2,) and float(s.logps[0][1]) == 0.0
    assert abs(float(s.logps[0][0]) - float(torch.log(probs[0, tok[0]]))) < 1e-6
