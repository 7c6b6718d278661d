"""Rollout/train mismatch on the tiny MoE (docs/studies.md (c)): router noise, bf16 rollout,
routing replay, and the mismatch/* and router/* metrics of the RL loop."""

import json

import pytest
import torch

from harness.config import ConfigError, load_config
from harness.models import build_model, render_prompt
from harness.models.logprobs import response_logprobs
from harness.rollout.base import SamplingParams
from harness.rollout.hf import HFBackend
from harness.train import train

# tiny MoE from scratch, 4 prompts x 4 samples, one step, a minimal eval: about a second per run
TINY = [
    "model.name=tiny-moe",
    "warm_start.enabled=false",
    "train.old_logp=recompute",
    "task.difficulty_mix={easy: 1}",
    "tracking.mlflow=false",
    "train.steps=1",
    "train.checkpoint_every=1",
    "train.threads=1",
    "train.prompts_per_step=4",
    "train.group_size=4",
    "train.samples_to_log=0",
    "rollout.max_new_tokens=16",
    "eval.every=0",
    "eval.num_prompts=1",
    "eval.n_samples=1",
    "eval.ks=[1]",
]
NOISE = "rollout.router_noise=1.0"
REPLAY = "objective.routing_replay=true"


@pytest.fixture(scope="module")
def step0(tmp_path_factory):
    """overrides -> the metric record of the run's first step (runs cached per module)."""
    cache = {}

    def run(*overrides: str) -> dict:
        if overrides not in cache:
            out = tmp_path_factory.mktemp("run")
            train(load_config("experiments/runs/smoke.yaml", [*TINY, *overrides]), out)
            cache[overrides] = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
        return cache[overrides]

    return run


def test_no_mismatch_without_noise_in_fp32(step0):
    rec = step0()
    # same module, same precision: the sampler's log-probs are the trainer's up to float error
    assert rec["mismatch/k3_kl"] < 1e-10 and rec["mismatch/max_abs_dp"] < 1e-5
    assert rec["mismatch/ratio_gt2_frac"] == 0.0
    assert rec["router/disagree_rollout_train"] < 0.01  # at most rare near-tie flips (padding of the prefill)
    assert 0.0 <= rec["router/disagree_old_new"] <= 1.0


def test_router_noise_raises_mismatch(step0):
    clean, noisy = step0(), step0(NOISE)
    assert noisy["router/disagree_rollout_train"] > 0.1 > clean["router/disagree_rollout_train"]
    assert noisy["mismatch/k3_kl"] > 1e-6 and noisy["mismatch/k3_kl"] > 100 * clean["mismatch/k3_kl"]
    assert noisy["mismatch/max_abs_dp"] > clean["mismatch/max_abs_dp"]


def test_routing_replay_forces_the_rollout_choices(step0):
    noisy, replayed = step0(NOISE), step0(NOISE, REPLAY)
    assert replayed["router/disagree_rollout_train"] == 0.0
    # the experts match the rollout's; only the mixing weights still differ (noisy vs clean softmax)
    assert 0.0 < replayed["mismatch/k3_kl"] < noisy["mismatch/k3_kl"]
    assert replayed["mismatch/max_abs_dp"] < noisy["mismatch/max_abs_dp"]


def test_separate_old_forward_gives_the_same_metrics(step0):
    """mini_batches=2: the old policy's log-probs come from their own forward, not the update's."""
    for extra in [(NOISE,), (NOISE, REPLAY)]:
        single, split = step0(*extra), step0(*extra, "train.mini_batches=2", "train.micro_batch_size=4")
        for key in ("mismatch/k3_kl", "mismatch/max_abs_dp", "router/disagree_rollout_train"):
            assert split[key] == pytest.approx(single[key], rel=1e-3, abs=1e-9), (extra, key)


def test_bf16_rollout_gives_mismatch(step0):
    fp32, bf16 = step0(), step0("rollout.dtype=bfloat16")
    assert bf16["mismatch/k3_kl"] > 1e-8 and bf16["mismatch/k3_kl"] > 100 * fp32["mismatch/k3_kl"]
    assert bf16["mismatch/max_abs_dp"] > 10 * fp32["mismatch/max_abs_dp"]


def test_old_new_router_disagreement_follows_the_update(step0):
    still = step0("train.lr=1e-9")
    moved = step0("train.lr=0.05", "objective.entropy_coef=0.5")  # the entropy bonus always has a gradient
    assert still["router/disagree_old_new"] == 0.0
    assert moved["router/disagree_old_new"] > 0.01


# ----------------------------------------------------------------------------- the hf backend


def _moe_prompts():
    model, tok = build_model("tiny-moe", seed=0)
    texts = ["What is 2+3?\nAnswer:", "12*4=", "Compute 7-1 please, then stop:"]  # different lengths
    return model, tok, [render_prompt(tok, t) for t in texts]


def test_recorded_routing_aligns_with_the_training_forward():
    model, tok, prompts = _moe_prompts()
    torch.set_num_threads(1)
    be = HFBackend(model, tok, max_batch=4)  # two chunks of different widths
    be.eos_id = tok.convert_tokens_to_ids("1")  # a frequent character as EOS: responses end at different lengths
    r = be.generate(prompts, 2, SamplingParams(max_new_tokens=12, seed=5))
    lengths = r.response_mask.sum(-1)
    assert len(set(lengths.tolist())) > 1 and not r.truncated.all()
    routing = r.extras["routing"]  # (B, S, L, k)
    L, k = len(model.model.layers), model.config.num_experts_per_tok
    assert routing.shape[0] == 6 and routing.shape[2:] == (L, k)
    ends = (torch.tensor([len(p) for p in r.prompt_ids]) + lengths.long()).unsqueeze(1)  # (B, 1) P_i + n_i
    pos = torch.arange(routing.shape[1]).unsqueeze(0)  # (1, S)
    routed = (routing >= 0).all(-1).all(-1)  # (B, S)
    assert routed[(pos < ends - 1).expand_as(routed)].all()  # every prompt token and response token but the last
    assert (routing[(pos >= ends).expand_as(routed)] == -1).all()  # nothing past the response
    m = r.response_mask.bool()
    with torch.no_grad():
        replayed, _, _ = response_logprobs(
            model, r.prompt_ids, r.response_ids, r.response_mask, tok.pad_token_id, routing=routing
        )
        shifted, _, _ = response_logprobs(
            model,
            r.prompt_ids,
            r.response_ids,
            r.response_mask,
            tok.pad_token_id,
            routing=torch.roll(routing, 1, dims=1),
        )
    torch.testing.assert_close(replayed[m], r.sampler_logp[m], rtol=0, atol=1e-5)
    assert (shifted - r.sampler_logp)[m].abs().max() > 1e-3  # a misaligned replay would be caught


def test_router_noise_is_seeded_and_only_at_rollout():
    model, tok, prompts = _moe_prompts()
    torch.set_num_threads(1)
    be = HFBackend(model, tok, router_noise=1.0)
    a, b = (be.generate(prompts, 2, SamplingParams(max_new_tokens=8, seed=1)) for _ in range(2))
    c = be.generate(prompts, 2, SamplingParams(max_new_tokens=8, seed=2))
    assert torch.equal(a.extras["routing"], b.extras["routing"]) and torch.equal(a.response_ids, b.response_ids)
    assert not torch.equal(a.extras["routing"], c.extras["routing"])
    clean = HFBackend(model, tok).generate(prompts, 2, SamplingParams(max_new_tokens=8, seed=1))
    assert not torch.equal(a.extras["routing"], clean.extras["routing"])
    # the training module itself is left without hooks: its forward is the clean one
    with torch.no_grad():
        lp, _, _ = response_logprobs(model, clean.prompt_ids, clean.response_ids, clean.response_mask, tok.pad_token_id)
    m = clean.response_mask.bool()
    torch.testing.assert_close(lp[m], clean.sampler_logp[m], rtol=0, atol=1e-5)


def test_bf16_engine_is_a_synced_copy():
    model, tok, prompts = _moe_prompts()
    be = HFBackend(model, tok, dtype="bfloat16")
    assert be.engine is not model and be.engine.dtype == torch.bfloat16 and model.dtype == torch.float32
    with torch.no_grad():
        model.lm_head.weight.add_(0.5)  # (tied with the embeddings)
    be.sync_weights(model)
    for (name, a), b in zip(be.engine.named_parameters(), model.parameters()):
        assert torch.equal(a, b.to(torch.bfloat16)), name
    assert HFBackend(model, tok, dtype="float32").engine is model  # same precision: shared, sync is a no-op


def test_router_noise_on_a_dense_model_is_refused_by_the_backend():
    model, tok = build_model("tiny-dense", seed=0)
    with pytest.raises(ValueError, match="rollout.router_noise"):
        HFBackend(model, tok, router_noise=0.5)


# ----------------------------------------------------------------------------- config errors


@pytest.mark.parametrize(
    "overrides, needles",
    [
        (["model.name=tiny-moe", REPLAY, "rollout.backend=vllm"], ["objective.routing_replay", "rollout.backend=vllm"]),
        (["model.name=tiny-dense", REPLAY], ["objective.routing_replay", "model.name='tiny-dense'", "MoE"]),
        (["model.name=smollm2-135m", NOISE], ["rollout.router_noise", "model.name='smollm2-135m'", "MoE"]),
    ],
)
def test_config_errors_name_the_keys(overrides, needles):
    with pytest.raises(ConfigError) as err:
        load_config("experiments/runs/smoke.yaml", overrides)
    for n in needles:
        assert n in str(err.value)
    assert load_config("experiments/runs/smoke.yaml", ["model.name=tiny-moe", REPLAY, NOISE]).objective.routing_replay


# ----------------------------------------------------------------------------- the formulas


def test_mismatch_formulas_on_known_numbers():
    from harness.train.core.mismatch import MismatchStats

    p_train = torch.tensor([[0.5, 0.2, 0.9, 0.01]])
    p_roll = torch.tensor([[0.2, 0.5, 0.9, 0.99]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])  # the last token is padding: ignored
    st = MismatchStats()
    st.add_logprobs(p_train.log(), p_roll.log(), mask)
    k3 = [(2.5 - 1) - torch.tensor(2.5).log(), (0.4 - 1) - torch.tensor(0.4).log(), 0.0]  # (r - 1) - log r
    out = st.result()
    assert out["mismatch/k3_kl"] == pytest.approx(float(sum(k3)) / 3, rel=1e-5)
    assert out["mismatch/max_abs_dp"] == pytest.approx(0.3, rel=1e-5)
    assert out["mismatch/ratio_gt2_frac"] == pytest.approx(2 / 3)  # r = 2.5 > 2 and r = 0.4 < 1/2


def test_set_disagreement_ignores_slot_order():
    from harness.train.core.routing import set_disagreement

    a = torch.tensor([[0, 1], [0, 1], [2, 3]])  # (tokens, k)
    b = torch.tensor([[1, 0], [1, 2], [0, 1]])
    assert set_disagreement(a, b, torch.tensor([True, True, True])) == (3.0, 6.0)  # 0 + 1 + 2 slots differ
    assert set_disagreement(a, b, torch.tensor([True, True, False])) == (1.0, 4.0)
