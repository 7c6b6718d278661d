"""Generation on a GPU, tested here for what runs without one (no GPU, vLLM's CPU build): the hf backend's static
cache under torch.compile (its generate arguments, the padding that keeps the cache's shape, when it is used); the
vLLM engine's arguments for a CUDA device (CUDA graphs, sleep mode), its sleep/wake order around generate and sync
on a fake engine, the bucketed weight sync and the weight check timed apart from the sync."""

import pytest
import torch

from harness.models import build_model
from harness.rollout import make_backend
from harness.rollout.hf import COMPILE_PAD_TO, HFBackend, compiled_generate_kwargs, pad_left_to
from harness.rollout.vllm_backend import VLLMBackend, checkpoint_state, engine_args, weight_buckets


@pytest.fixture(scope="module")
def tiny():
    return build_model("tiny-dense", seed=0)


def test_compiled_generation_asks_for_a_static_cache_and_cuda_graphs():
    on_gpu = compiled_generate_kwargs("cuda")
    assert on_gpu["cache_implementation"] == "static"
    assert on_gpu["compile_config"].mode == "reduce-overhead"  # CUDA graphs
    assert not getattr(on_gpu["compile_config"], "_compile_all_devices", False)  # transformers compiles on cuda
    on_cpu = compiled_generate_kwargs("cpu")  # rollout.compile=true set by hand on a CPU: compiled there too
    assert on_cpu["compile_config"]._compile_all_devices is True


def test_prompts_are_padded_to_a_repeating_width():
    ids = torch.tensor([[0, 5, 6], [7, 8, 9]])
    att = torch.tensor([[0, 1, 1], [1, 1, 1]])
    got_ids, got_att = pad_left_to(ids, att, 4, pad_id=0)
    assert got_ids.tolist() == [[0, 0, 5, 6], [0, 7, 8, 9]] and got_att.tolist() == [[0, 0, 1, 1], [0, 1, 1, 1]]
    same = pad_left_to(got_ids, got_att, 4, pad_id=0)
    assert same[0] is got_ids
    assert COMPILE_PAD_TO == 64


def test_the_backend_compiles_only_where_nothing_hooks_the_forward(tiny):
    model, tok = tiny
    assert HFBackend(model, tok, compile=True).compile
    assert not HFBackend(model, tok).compile  # the default: as before
    assert not HFBackend(model, tok, compile=True, share_prefix=True).compile  # its own dynamic cache
    moe, moe_tok = build_model("tiny-moe", seed=0)
    assert not HFBackend(moe, moe_tok, compile=True).compile  # routing hooks
    assert not HFBackend(moe, moe_tok, compile=True, router_noise=0.1).compile


def test_make_backend_passes_the_resolved_lever(tiny, monkeypatch):
    from harness import device_defaults
    from harness.config import load_config

    model, tok = tiny
    monkeypatch.setattr(device_defaults, "run_device", lambda: "cuda")
    assert make_backend(load_config(None).rollout, model, tok).compile  # auto on CUDA
    monkeypatch.setattr(device_defaults, "run_device", lambda: "cpu")
    assert not make_backend(load_config(None).rollout, model, tok).compile  # auto on a CPU: as before


def test_the_compiled_path_pads_and_passes_the_static_cache(tiny, monkeypatch):
    """What generate is handed with rollout.compile (the compile itself is transformers'; not run here)."""
    from harness.rollout.base import SamplingParams

    model, tok = tiny
    seen = {}
    real = model.generate

    def spy(**kw):
        seen.update(kw)
        kw.pop("cache_implementation"), kw.pop("compile_config")
        return real(**kw)

    backend = HFBackend(model, tok, compile=True)
    monkeypatch.setattr(model, "generate", spy)
    batch = backend.generate([[1, 5, 6], [1, 7]], 2, SamplingParams(max_new_tokens=4, seed=0))
    assert seen["cache_implementation"] == "static" and seen["input_ids"].shape[1] == COMPILE_PAD_TO
    assert batch.response_ids.shape[0] == 4


def test_vllm_engine_arguments_for_a_gpu_and_a_cpu():
    gpu = engine_args("/m", "bfloat16", 0, 1024, 256, 0.3, on_cpu=False, sleep=True)
    assert gpu["enforce_eager"] is False and gpu["enable_sleep_mode"] is True  # CUDA graphs, sleep mode
    assert gpu["enable_prefix_caching"] and gpu["logprobs_mode"] == "processed_logprobs"
    cpu = engine_args("/m", "float32", 0, 1024, 256, 0.3, on_cpu=True, sleep=True)
    assert cpu["enforce_eager"] is True and "enable_sleep_mode" not in cpu  # eager only on a CPU; no sleep there
    assert "enable_sleep_mode" not in engine_args("/m", "bfloat16", 0, 1024, 256, 0.3, on_cpu=False)


def test_weight_buckets_keep_the_order_and_the_size():
    t = lambda n: torch.zeros(n, dtype=torch.float32)  # noqa: E731 - n floats, 4n bytes
    items = [("a", t(100)), ("b", t(100)), ("c", t(300)), ("d", t(50)), ("e", t(10))]
    buckets = weight_buckets(items, 800)
    assert [[n for n, _ in b] for b in buckets] == [["a", "b"], ["c"], ["d", "e"]]
    assert [[n for n, _ in b] for b in weight_buckets(items, 100)] == [["a"], ["b"], ["c"], ["d"], ["e"]]
    assert [[n for n, _ in b] for b in weight_buckets(items, 0)] == [["a", "b", "c", "d", "e"]]
    assert weight_buckets([], 800) == []


class _FakeLLM:
    def __init__(self, calls):
        self.calls = calls

    def sleep(self, level):
        self.calls.append(("sleep", level))

    def wake_up(self):
        self.calls.append(("wake_up",))

    def collective_rpc(self, name, kwargs=None):
        self.calls.append(("rpc", name, [n for n, _ in kwargs["weights"]]))

    def reset_prefix_cache(self):
        self.calls.append(("reset_prefix_cache",))


def _fake_backend(calls, sleep=True, bucket_mb=0):
    b = object.__new__(VLLMBackend)
    b.llm, b.sleeping, b.sleep_between, b.in_process = _FakeLLM(calls), False, sleep, True
    b.sync_bucket_mb, b.num_syncs, b.verify_first, b.verify_every, b.engine_threads = bucket_mb, 0, 1, 0, None
    b._generate = lambda *a: calls.append(("generate",)) or "batch"
    b.verify_sync = lambda model: calls.append(("verify",))
    return b


def test_vllm_sleeps_through_the_update_and_wakes_for_the_sync(tiny):
    model, _ = tiny
    calls = []
    b = _fake_backend(calls)
    assert b.generate([[1]], 1, None) == "batch"
    assert calls == [("generate",), ("sleep", 1)] and b.sleeping  # the update runs with the engine asleep
    calls.clear()
    b.sync_weights(model)
    assert [c[0] for c in calls] == ["wake_up", "rpc", "reset_prefix_cache", "verify"]
    calls.clear()
    b.generate([[1]], 1, None)
    assert calls == [("generate",), ("sleep", 1)]  # awake since the sync: no second wake-up
    b.generate([[1]], 1, None)
    assert calls[-3:] == [("wake_up",), ("generate",), ("sleep", 1)]
    calls.clear()
    awake = _fake_backend(calls, sleep=False)  # a CPU engine: never sleeps
    awake.generate([[1]], 1, None)
    assert calls == [("generate",)]


def test_the_bucketed_sync_loads_every_weight_in_order(tiny):
    model, _ = tiny
    calls = []
    b = _fake_backend(calls, sleep=False, bucket_mb=1)  # 1 MB buckets of tiny-dense's ~3 MB of fp32
    b.push_weights(model)
    rpcs = [c for c in calls if c[0] == "rpc"]
    assert len(rpcs) > 1 and all(c[1] == "harness_load_weights" for c in rpcs)
    assert [n for c in rpcs for n in c[2]] == list(checkpoint_state(model))
    assert calls[-1] == ("reset_prefix_cache",)
    calls.clear()
    _fake_backend(calls, sleep=False).push_weights(model)  # 0: one layerwise reload, as before
    assert [c[1] for c in calls if c[0] == "rpc"] == ["harness_reload_weights"]


def test_the_check_is_timed_apart_from_the_sync(tiny):
    import time

    model, _ = tiny
    calls = []
    b = _fake_backend(calls, sleep=False)
    b.verify_sync = lambda m: time.sleep(0.2)
    b.sync_weights(model)
    assert b.last_verify_seconds >= 0.2 and b.last_sync_seconds < 0.2
    b.sync_weights(model)  # verify_first = 1: the second sync is not checked
    assert b.last_verify_seconds == 0.0


def test_a_rollout_section_used_alone_resolves_its_auto_for_the_device(tiny):
    from harness import device_defaults
    from harness.config import RolloutSection
    from harness.rollout import lever

    model, _ = tiny
    section = RolloutSection()  # not through a run config: its levers still `auto`
    assert section.compile == "auto"
    assert lever(section, "compile", model) is False and lever(section, "share_prefix", model) is False  # a CPU model
    assert device_defaults.lever("rollout.compile", "auto", "cuda") is True
    assert device_defaults.lever("rollout.sync_bucket_mb", "auto", "cuda") == 512
    assert device_defaults.lever("rollout.sync_bucket_mb", 64, "cuda") == 64


def test_the_static_cache_and_the_padding_sample_what_the_dynamic_cache_does(tiny, monkeypatch):
    """rollout.compile's generate on a CPU with the compile itself switched off (transformers' disable_compile): the
    static cache and the extra left padding draw the same tokens, log-probs to fp32 rounding."""
    import harness.rollout.hf as hf
    from harness.rollout.base import SamplingParams

    model, tok = tiny
    real = hf.compiled_generate_kwargs
    monkeypatch.setattr(hf, "compiled_generate_kwargs", lambda dev: {**real("cuda"), "disable_compile": True})
    params = SamplingParams(max_new_tokens=6, seed=3)
    static = HFBackend(model, tok, compile=True).generate([[1, 5, 6], [1, 7]], 2, params)
    dynamic = HFBackend(model, tok).generate([[1, 5, 6], [1, 7]], 2, params)
    assert torch.equal(static.response_ids, dynamic.response_ids)
    assert float((static.sampler_logp - dynamic.sampler_logp).abs().max()) < 1e-5
