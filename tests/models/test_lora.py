"""LoRA adapters (harness/models/lora.py): which modules take them, the reference with adapters off, the
merged weights an engine gets, the saved adapters, the base digest. A real tiny Llama, real peft."""

import pytest
import torch

from harness.config import ConfigError, load_config
from harness.models import build_model
from harness.models.lora import (
    AdaptersOff,
    adapter_state,
    add_lora,
    base_digest,
    base_of,
    check_targets,
    load_adapter,
    merged_copy,
    merged_state_dict,
    meta_model,
    save_plain,
)

SMOKE = "experiments/runs/smoke.yaml"
LLAMA_LINEAR = ["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"]


def _ids():
    return torch.randint(3, 40, (2, 12), generator=torch.Generator().manual_seed(0))


def _lora(targets="all-linear", r=4, seed=0):
    model, _ = build_model("tiny-dense", seed=seed)
    return add_lora(model, r, 2.0 * r, 0.0, targets)


def _train_adapters(pm, std=0.05):
    """Move every adapter away from its start (B = 0), as training would."""
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in pm.named_parameters():
            if "lora_" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * std)


def test_all_linear_is_every_projection_and_not_the_tied_head():
    model, _ = build_model("tiny-dense", seed=0)
    chosen = check_targets(model, "all-linear")
    assert sorted({n.rsplit(".", 1)[-1] for n in chosen}) == LLAMA_LINEAR
    assert len(chosen) == 4 * 7  # 4 layers x (q, k, v, o, gate, up, down)


@pytest.mark.parametrize(
    "targets, message",
    [
        (
            ["qq_proj"],
            "'qq_proj' names no module of this model that takes an adapter; the model has: ['down_proj', "
            "'embed_tokens', 'gate_proj', 'k_proj', 'lm_head', 'o_proj', 'q_proj', 'up_proj', 'v_proj']",
        ),
        (["rotary_emb"], "it is a LlamaRotaryEmbedding, which takes no LoRA adapter"),
        ("q_proj", "a list of module names (e.g. [q_proj, v_proj]) or 'all-linear'"),
        (["lm_head"], "share one weight matrix (tie_word_embeddings)"),
    ],
)
def test_a_bad_target_is_one_line_naming_what_the_model_has(targets, message):
    model, _ = build_model("tiny-dense", seed=0)
    with pytest.raises(ValueError) as err:
        check_targets(model, targets)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_config_refuses_a_bad_target_before_any_model_loads(monkeypatch):
    import harness.models.registry as registry

    monkeypatch.setattr(registry, "build_model", lambda *a, **k: pytest.fail("a model was loaded"))
    with pytest.raises(
        ConfigError,
        match=r"model.lora.target_modules: 'qproj' names no module .* the model has: "
        r"\['down_proj'.*'v_proj'\]",
    ):
        load_config(SMOKE, ["model.lora={target_modules: [qproj]}"])
    with pytest.raises(ConfigError, match="MixtralExperts, which takes no LoRA adapter"):
        load_config(SMOKE, ["model.name=tiny-moe", "model.lora={target_modules: [experts]}"])
    cfg = load_config(SMOKE, ["model.lora={r: 8, target_modules: [q_proj, self_attn.v_proj]}"])
    assert cfg.model.lora.r == 8 and cfg.model.lora.alpha == 32.0  # the default alpha


def test_meta_model_of_smollm2_has_the_llama_names_without_weights():
    model = meta_model("smollm2-135m")
    assert next(model.parameters()).device.type == "meta"
    assert sorted({n.rsplit(".", 1)[-1] for n in check_targets(model, "all-linear")}) == LLAMA_LINEAR


def test_only_the_adapters_train_and_the_policy_starts_as_its_base():
    base, _ = build_model("tiny-dense", seed=0)
    pm = _lora()
    trainable = [n for n, p in pm.named_parameters() if p.requires_grad]
    assert trainable and all("lora_A" in n or "lora_B" in n for n in trainable)
    with torch.no_grad():
        assert torch.equal(pm(input_ids=_ids()).logits, base(input_ids=_ids()).logits)  # B = 0 at the start


def test_adapters_off_is_the_base_and_leaves_them_on_afterwards():
    base, _ = build_model("tiny-dense", seed=0)
    pm = _lora()
    _train_adapters(pm)
    with torch.no_grad():
        on = pm(input_ids=_ids()).logits
        off = AdaptersOff(pm)(input_ids=_ids()).logits
        assert torch.equal(off, base(input_ids=_ids()).logits)
        assert (on - off).abs().max() > 1e-2  # the adapters do move the policy
        assert torch.equal(pm(input_ids=_ids()).logits, on)  # enabled again after the context
    assert AdaptersOff(pm).device == pm.device


def test_merged_weights_are_the_adapted_policy_and_leave_the_module_untouched():
    pm = _lora()
    _train_adapters(pm)
    before = {k: v.clone() for k, v in pm.state_dict().items()}
    merged = merged_state_dict(pm)
    plain, _ = build_model("tiny-dense", seed=0)
    assert set(merged) == set(plain.state_dict())  # the plain model's names, no adapter tensors
    plain.load_state_dict(merged)
    with torch.no_grad():
        assert (plain(input_ids=_ids()).logits - pm(input_ids=_ids()).logits).abs().max() < 1e-5
        copy_ = merged_copy(pm)
        assert (copy_(input_ids=_ids()).logits - pm(input_ids=_ids()).logits).abs().max() < 1e-5
    assert all(torch.equal(before[k], v) for k, v in pm.state_dict().items())  # W never merged in place
    assert type(copy_) is type(base_of(pm)) and not any("lora_" in n for n, _ in copy_.named_parameters())


def test_saved_adapters_load_into_a_fresh_policy_and_misfits_are_refused():
    pm = _lora()
    _train_adapters(pm)
    state = adapter_state(pm)
    fresh = _lora()
    load_adapter(fresh, state)
    with torch.no_grad():
        assert torch.equal(fresh(input_ids=_ids()).logits, pm(input_ids=_ids()).logits)
    with pytest.raises(RuntimeError, match="do not fit this model's"):
        load_adapter(_lora(targets=["q_proj"]), state)


def test_the_base_digest_sees_the_base_and_not_the_adapters():
    pm = _lora()
    d0 = base_digest(pm)
    plain, _ = build_model("tiny-dense", seed=0)
    assert base_digest(plain) == d0  # the same base with or without adapter layers
    _train_adapters(pm)
    assert base_digest(pm) == d0
    other, _ = build_model("tiny-dense", seed=1)
    assert base_digest(other) != d0


def test_save_plain_writes_the_merged_model_an_engine_loads(tmp_path):
    """What the vLLM backend writes at its start: a plain transformers folder with the adapters merged."""
    from transformers import AutoModelForCausalLM

    pm = _lora()
    _train_adapters(pm)
    save_plain(pm, tmp_path)
    assert not (tmp_path / "adapter_config.json").exists()
    plain = AutoModelForCausalLM.from_pretrained(tmp_path)
    with torch.no_grad():
        assert (plain(input_ids=_ids()).logits - pm(input_ids=_ids()).logits).abs().max() < 1e-5
    assert not any("lora_" in n for n, _ in plain.named_parameters())
