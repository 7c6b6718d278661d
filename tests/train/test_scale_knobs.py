"""The knobs for models that do not fit (docs/scale.md): LoRA runs (the base frozen, pi_ref = the base with
the adapters off, adapter checkpoints, harness eval, the critic and PRIME's reward model), activation
checkpointing (the same gradients), bf16 autocast (fp32 weights and optimizer state, what it costs in
mismatch/*). Real tiny models without a warm start, a few seconds a run; tiny shapes for bf16 (this
CPU's bf16 matmuls are slow: machine.bf16_slow_reason)."""

import json
import warnings

import pytest
import torch
from safetensors.torch import load_file

from harness.config import ConfigError, ConfigWarning, load_config
from harness.models import build_model
from harness.models.logprobs import response_logprobs
from harness.models.lora import AdaptersOff, base_of, is_lora
from harness.train import train
from harness.train.core.policy_module import BASE_KEY, BaseMismatch, compute_precision, prepare_policy, reference_of

SMOKE = "experiments/runs/smoke.yaml"
# learning runs start from the engine tests' warm start (tests/train/conftest.py FAST: shared, cached), so
# rewards vary and the adapters, the critic and the reward model get a gradient
WARM = ["train.steps=3", "train.mini_batches=1", "train.checkpoint_every=1", "train.threads=1"]
TINY = [
    "warm_start.enabled=false",
    "train.steps=3",
    "train.prompts_per_step=4",
    "train.group_size=4",
    "train.mini_batches=1",
    "rollout.max_new_tokens=12",
    "eval.num_prompts=4",
    "eval.n_samples=2",
    "eval.ks=[1]",
    "eval.every=0",
    "train.checkpoint_every=1",
    "train.samples_to_log=1",
    "tracking.mlflow=false",
    "train.threads=1",
    "rollout.temperature=1.0",
    "eval.temperature=1.0",
]
LORA = "model.lora={r: 4, alpha: 8}"
SMALL = (
    "model.overrides={hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1, num_attention_heads: 2, "
    "num_key_value_heads: 1}"
)


def cfg_of(*overrides):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConfigWarning)
        return load_config(SMOKE, [*TINY, *overrides])


@pytest.fixture
def warm(fast_overrides):
    """Config maker: the engine tests' fast warm-started config (tests/train/conftest.py) + WARM + overrides."""

    def make(*overrides):
        return load_config(SMOKE, [*fast_overrides, *WARM, *overrides])

    return make


def metrics(run) -> list[dict]:
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]


def _ckpt(run, step: int):
    return run / "checkpoints" / f"step_{step:06d}"


# ---------------------------------------------------------------------------------- LoRA runs
def test_a_lora_run_trains_the_adapters_only_against_the_base(tmp_path, warm):
    """kl/ref is exactly 0 at step 0 (the policy is its base, B = 0) and grows after (pi_ref stays the base);
    checkpoints hold the adapters and the base digest, no model weights; the base never moves."""
    run = tmp_path / "lora"
    train(warm(LORA, "objective.preset=grpo"), run)  # grpo: kl_coef 0.04, a KL term against pi_ref
    recs = metrics(run)
    assert recs[0]["kl/ref"] == 0.0 and recs[2]["kl/ref"] > 0
    ckpt = _ckpt(run, 3)
    names = {p.name for p in ckpt.iterdir()}
    assert {"adapter_model.safetensors", "adapter_config.json", "trainer_state.pt"} <= names
    assert "model.safetensors" not in names and "config.json" not in names
    state = torch.load(ckpt / "trainer_state.pt", weights_only=False)
    assert len(state[BASE_KEY]) == 16
    adapters = load_file(str(ckpt / "adapter_model.safetensors"))
    assert adapters and all("lora_A" in k or "lora_B" in k for k in adapters)
    assert any(float(v.abs().max()) > 0 for k, v in adapters.items() if "lora_B" in k)  # B left zero: it trained

    from harness.train.run.final_eval import eval_run, load_trained_policy

    cfg = warm(LORA, "objective.preset=grpo")
    model, _ = load_trained_policy(cfg, ckpt, torch.device("cpu"))
    from harness.models import load_model
    from harness.train.run.warmstart import warm_start_folder

    start, _ = load_model(warm_start_folder(cfg))
    assert all(
        torch.equal(a, b)
        for a, b in zip(  # the base never moved
            [v for k, v in base_of(model).state_dict().items() if "lora_" not in k], start.state_dict().values()
        )
    )
    out = eval_run(run)  # harness eval of a LoRA run: the base rebuilt, the checkpoint's adapters
    final = json.loads((run / "summary.json").read_text())["final_eval"]
    assert out["eval/pass_at_1"] == final["eval/pass_at_1"]  # the same policy, prompts and sampling seeds


def test_reference_of_full_fine_tuning_is_a_frozen_copy_and_of_lora_the_adapters_off():
    model, _ = build_model("tiny-dense", seed=0)
    ref = reference_of(model)
    assert ref is not model and not any(p.requires_grad for p in ref.parameters()) and not ref.training
    lora = prepare_policy(build_model("tiny-dense", seed=0)[0], cfg_of(LORA))
    assert is_lora(lora) and isinstance(reference_of(lora), AdaptersOff)


def test_a_lora_checkpoint_on_another_base_is_refused(tmp_path):
    run = tmp_path / "lora"
    cfg = cfg_of(LORA, "objective.preset=grpo", "train.steps=1")
    train(cfg, run)
    path = _ckpt(run, 1) / "trainer_state.pt"  # the newest checkpoint: where a rerun resumes
    state = torch.load(path, weights_only=False)
    state[BASE_KEY] = "0" * 16  # as if the adapters had been trained on other base weights
    torch.save(state, path)
    (run / "summary.json").unlink()
    from harness.train.core.rundir import write_manifest

    write_manifest(_ckpt(run, 1))
    with pytest.raises(BaseMismatch, match="digest to 0000000000000000, but the base built from this config now"):
        train(cfg, run)


@pytest.mark.parametrize("preset, component", [("ppo", "critic"), ("prime", "prm")])
def test_components_train_in_full_beside_a_lora_policy(tmp_path, preset, component, warm):
    """PPO's value model and PRIME's reward model copy the policy with its adapters merged (a plain model)
    and train every weight; the run checkpoints and reports them."""
    run = tmp_path / preset
    cfg = warm(LORA, f"objective.preset={preset}", "train.steps=2")
    train(cfg, run)
    state = torch.load(_ckpt(run, 2) / "trainer_state.pt", weights_only=False)
    saved = state[component]
    assert saved and not any("lora_" in k for k in saved)
    from harness.models import load_model
    from harness.train.run.warmstart import warm_start_folder

    w0 = load_model(warm_start_folder(cfg))[0].state_dict()["model.layers.0.mlp.down_proj.weight"]
    key = next(k for k in saved if k.endswith("layers.0.mlp.down_proj.weight"))
    assert not torch.equal(saved[key], w0)  # the component's own copy trained
    assert all(k in metrics(run)[1] for k in (("loss/value",) if preset == "ppo" else ("loss/prm",)))


def test_lora_config_rules():
    with pytest.raises(ConfigError, match="ref_update_every=5 with model.lora: the reference is the base"):
        cfg_of(LORA, "objective.ref_update_every=5")
    with pytest.raises(ConfigError, match="model.lora.dropout=0.1 .the trainer's forwards drop adapter inputs"):
        cfg_of("model.lora={r: 4, dropout: 0.1}", "train.old_logp=rollout", "train.mini_batches=2")
    with pytest.raises(
        ConfigError,
        match="unknown key 'model.lora.rank'; allowed keys here: "
        r"\['alpha', 'dropout', 'r', 'target_modules'\]",
    ):
        cfg_of("model.lora={rank: 4}")


def test_a_killed_lora_run_resumes_to_the_uninterrupted_run(tmp_path, train_killed_at_update, warm):
    """Killed in step 3's update (step_000001 on disk: adapters + Adam moments of the adapters), the rerun
    loads the adapters in place and logs exactly the numbers of the uninterrupted run; the final adapters
    are equal bit for bit."""

    cfg = warm(LORA, "objective.preset=grpo", "train.steps=4", "train.checkpoint_every=2")
    clean = tmp_path / "clean"
    train(cfg, clean)
    run = tmp_path / "killed"
    train_killed_at_update(cfg, run)
    assert [r["step"] for r in metrics(run)] == [0, 1]
    state = torch.load(_ckpt(run, 1) / "trainer_state.pt", weights_only=False)
    assert state["optimizer"]["state"] and len(state["optimizer"]["state"]) == 56  # Adam moments: adapters only
    train(cfg, run)

    def strip(recs):
        return [{k: v for k, v in r.items() if not k.startswith("perf/")} for r in recs]

    resumed, uninterrupted = strip(metrics(run)), strip(metrics(clean))
    assert [r["step"] for r in resumed] == [0, 1, 2, 3, 4] and resumed == uninterrupted
    a, b = (load_file(str(_ckpt(r, 4) / "adapter_model.safetensors")) for r in (run, clean))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_adapters_start_from_the_run_seed_whatever_ran_before():
    """A's random init comes from the run seed, not from torch's global state (a warm start built in the
    same process draws from it): the same config gives the same adapters, another seed other adapters."""

    def a_weights(seed, burn):
        torch.manual_seed(123)
        torch.rand(burn)  # what a warm start built before would have drawn
        pm = prepare_policy(build_model("tiny-dense", seed=0)[0], cfg_of(LORA, f"seed={seed}"))
        return {n: p.detach().clone() for n, p in pm.named_parameters() if "lora_A" in n}

    x, y, z = a_weights(0, 1), a_weights(0, 1000), a_weights(1, 1)
    assert all(torch.equal(x[k], y[k]) for k in x)
    assert not any(torch.equal(x[k], z[k]) for k in x)
    torch.manual_seed(7)
    before = torch.rand(3)
    torch.manual_seed(7)
    prepare_policy(build_model("tiny-dense", seed=0)[0], cfg_of(LORA))
    assert torch.equal(torch.rand(3), before)  # torch's global generator untouched


# ---------------------------------------------------------------------------------- activation checkpointing
def test_gradient_checkpointing_config_rules(monkeypatch):
    with pytest.raises(ConfigError, match="train.gradient_checkpointing=true with objective.routing_replay=true"):
        cfg_of("model.name=tiny-moe", "train.gradient_checkpointing=true", "objective.routing_replay=true")
    import harness.config.scale as config_module  # the scale rules call meta_model by their own name

    class NoCheckpointing(torch.nn.Module):
        supports_gradient_checkpointing = False

    monkeypatch.setattr(config_module, "meta_model", lambda *a, **k: NoCheckpointing())
    with pytest.raises(ConfigError, match="model.name='tiny-dense' .NoCheckpointing. does not support activation"):
        cfg_of("train.gradient_checkpointing=true")


def _batch():
    gen = torch.Generator().manual_seed(0)
    prompts = [[1, *torch.randint(3, 40, (n,), generator=gen).tolist()] for n in (5, 9, 7)]
    resp = torch.randint(3, 40, (3, 10), generator=gen)
    mask = torch.ones(3, 10)
    mask[1, 6:] = 0
    return prompts, resp, mask


def _grads(model) -> dict[str, torch.Tensor]:
    """Gradients of a REINFORCE-like loss on a fixed batch (train mode: where checkpointing acts)."""
    prompts, resp, mask = _batch()
    model.train()
    model.zero_grad(set_to_none=True)
    logp, entropy, _ = response_logprobs(model, prompts, resp, mask, 0, 1.0, with_entropy=True)
    adv = torch.tensor([[1.0], [-0.5], [0.25]])
    (-(logp * adv).sum() / mask.sum() - 0.01 * entropy.sum() / mask.sum()).backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_gradient_checkpointing_gives_the_same_gradients_and_recomputes_the_layers(lora):
    """train.gradient_checkpointing: every gradient equal to the run without it to 1e-6, and each decoder
    layer's forward starts twice (recomputed in the backward; non-reentrant checkpointing stops the
    recompute once it has what the backward needs): the knob is not a no-op."""
    extra = [LORA] if lora else []
    grads, calls = {}, {}
    for on in (False, True):
        model = prepare_policy(
            build_model("tiny-dense", seed=0)[0], cfg_of(*extra, f"train.gradient_checkpointing={on}")
        )
        n = {"calls": 0}
        base_of(model).model.layers[0].register_forward_pre_hook(lambda *a, n=n: n.__setitem__("calls", n["calls"] + 1))
        grads[on], calls[on] = _grads(model), n["calls"]
    assert calls == {False: 1, True: 2}
    assert grads[True].keys() == grads[False].keys() and len(grads[True]) == (56 if lora else 38)
    worst = max(float((grads[True][k] - grads[False][k]).abs().max()) for k in grads[True])
    assert worst <= 1e-6, worst


# ---------------------------------------------------------------------------------- autocast
def test_autocast_refuses_bf16_weights_and_warns_on_a_slow_cpu(monkeypatch):
    with pytest.raises(ConfigError, match="model.dtype='bfloat16' already stores the weights in bf16"):
        cfg_of("train.autocast=bf16", "model.dtype=bfloat16")
    import harness.config.scale as config_module  # the scale rules call bf16_slow_reason by their own name

    monkeypatch.setattr(config_module, "bf16_slow_reason", lambda: "no bf16 kernels here")
    with pytest.warns(ConfigWarning, match="train.autocast='bf16': no bf16 kernels here"):
        load_config(SMOKE, [*TINY, "train.autocast=bf16"])
    monkeypatch.setattr(config_module, "bf16_slow_reason", lambda: None)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConfigWarning)
        load_config(SMOKE, [*TINY, "train.autocast=bf16"])
    assert load_config(SMOKE, [*TINY, "train.autocast=off"]).train.autocast is None  # YAML's off: off
    with pytest.raises(ConfigError, match="train.old_logp='rollout' needs .*train.autocast=bf16"):
        cfg_of("train.autocast=bf16", "train.old_logp=rollout", "train.mini_batches=2")


def test_the_slow_bf16_reason_follows_the_cpu_flags(monkeypatch):
    import harness.machine as machine

    monkeypatch.setattr(machine.torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(machine.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(machine, "isa_flags", lambda: ["avx", "avx2", "fma"])
    assert "neither avx512_bf16 nor amx_bf16" in machine.bf16_slow_reason()
    monkeypatch.setattr(machine, "isa_flags", lambda: ["avx2", "avx512f", "avx512_bf16"])
    assert machine.bf16_slow_reason() is None


def test_compute_precision_is_bf16_autocast_or_nothing():
    x, w = torch.randn(2, 8), torch.nn.Linear(8, 4)
    with compute_precision(cfg_of("train.autocast=bf16"), torch.device("cpu")):
        assert w(x).dtype == torch.bfloat16
    with compute_precision(cfg_of(), torch.device("cpu")):
        assert w(x).dtype == torch.float32


def test_autocast_keeps_fp32_weights_and_optimizer_and_shows_its_cost_in_mismatch(tmp_path):
    """Tiny shapes (bf16 matmuls are slow on a CPU without bf16 instructions). pi_old is recomputed
    (mini_batches=2), so mismatch/* compares the fp32 sampler with the trainer: under bf16 autocast the
    gap is orders of magnitude above fp32's rounding."""
    common = [SMALL, "train.steps=1", "train.mini_batches=2", "train.old_logp=recompute", "train.checkpoint_every=1"]
    runs = {}
    for name, extra in (("fp32", []), ("bf16", ["train.autocast=bf16"])):
        runs[name] = tmp_path / name
        train(cfg_of(*common, *extra), runs[name])
    kl = {k: metrics(r)[0]["mismatch/k3_kl"] for k, r in runs.items()}
    assert kl["fp32"] < 1e-9 and kl["bf16"] > 1000 * max(kl["fp32"], 1e-12), kl
    state = torch.load(_ckpt(runs["bf16"], 1) / "trainer_state.pt", weights_only=False)
    moments = [t for s in state["optimizer"]["state"].values() for t in (s["exp_avg"], s["exp_avg_sq"])]
    assert moments and all(t.dtype == torch.float32 for t in moments)
    weights = load_file(str(_ckpt(runs["bf16"], 1) / "model.safetensors"))
    assert all(v.dtype == torch.float32 for v in weights.values())
