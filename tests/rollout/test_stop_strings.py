"""Stop strings (rollout.stop) in the hf backend: a row ends with the token that completes the first
stop string, which it keeps, and counts as finished (not truncated); the tokens before it are the
ones sampled without stop strings (same seed)."""

from __future__ import annotations

from harness.models import build_model, render_prompt
from harness.rollout.base import SamplingParams, cut_at_stop, stop_index
from harness.rollout.hf import HFBackend

STOPS = ("e", "a", "o")


def test_hf_stop_strings(one_torch_thread):
    model, tok = build_model("tiny-dense", seed=0)
    prompts = [render_prompt(tok, f"What is {a}+{a + 7}?\nAnswer:") for a in range(6)]
    be = HFBackend(model, tok)
    free = be.generate(prompts, 4, SamplingParams(max_new_tokens=40, seed=3))
    stopped = be.generate(prompts, 4, SamplingParams(max_new_tokens=40, seed=3, stop=STOPS))
    hits = 0
    for i in range(free.response_ids.shape[0]):
        n_free, n = int(free.lengths[i]), int(stopped.lengths[i])
        ids = free.response_ids[i, :n_free].tolist()
        at = stop_index(tok, ids, STOPS)
        if at is None:  # no stop string: as without
            assert stopped.response_ids[i, :n].tolist() == ids and bool(stopped.truncated[i]) == bool(free.truncated[i])
            continue
        hits += 1
        assert n == at + 1 and stopped.response_ids[i, :n].tolist() == ids[: at + 1]
        assert not stopped.truncated[i] and stopped.response_mask[i, n:].eq(0).all()
        assert stopped.texts[i] == cut_at_stop(free.texts[i], STOPS) and stopped.texts[i][-1] in STOPS
        assert not any(s in stopped.texts[i][:-1] for s in STOPS)  # the FIRST stop string ends it
        assert (stopped.sampler_logp[i, :n] < 0).all() and stopped.sampler_logp[i, n:].eq(0).all()
    assert 0 < hits < free.response_ids.shape[0]  # this seed has rows with and without a stop string


def test_stop_index_and_cut():
    _, tok = build_model("tiny-dense", seed=0)
    ids = tok.encode("12 + 5 = 17\n\nQuestion: next", add_special_tokens=False)
    assert tok.decode(ids[: stop_index(tok, ids, ("\n\nQuestion:",)) + 1]) == "12 + 5 = 17\n\nQuestion:"
    assert stop_index(tok, ids, ("nope",)) is None and stop_index(tok, ids, ()) is None
    assert cut_at_stop("ab END cd END", ("END", "cd")) == "ab END" and cut_at_stop("abc", ()) == "abc"
