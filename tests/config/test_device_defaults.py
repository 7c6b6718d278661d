"""harness/device_defaults.py: every lever left `auto` resolves on a CPU to the value the knob had before it could be
auto (so no CPU run, golden record or report moves), and to the GPU's setting on CUDA (tested without a GPU: the
resolver takes the device's kind); an explicit value is kept on both; the resolved value is visible (the config,
`harness config --explain`, run.json) and a study's cell keeps `auto` for the device that runs it."""

import pytest
import torch

from harness import device_defaults
from harness.config import ConfigError, dump_config, explain_config, load_config

# the knobs' values before they could be `auto` (main at 99cdc71): what a CPU must keep
BEFORE = {
    "train.share_prefix": False,
    "rollout.share_prefix": False,
    "train.micro_batch_size": None,
    "train.pad_to_multiple_of": 1,  # a new knob: the longest row's own width
    "train.autocast": None,
    "train.tf32": False,  # a new knob: torch's settings untouched
    "train.ref_compute_dtype": False,  # a new knob: pi_ref in the policy's dtype
    "model.attn_implementation": None,  # a new knob: transformers' own choice
    "rollout.compile": False,  # a new knob: generate's dynamic cache, no compile
    "rollout.vllm_sleep": False,  # a new knob: no sleep mode
    "rollout.sync_bucket_mb": 0,  # a new knob: one layerwise reload
}


def _get(cfg, key):
    section, name = key.split(".")
    return getattr(getattr(cfg, section), name)


@pytest.fixture
def on_cuda(monkeypatch):
    """Configs validated as on a machine with a GPU (no GPU needed: only the resolver reads the device)."""
    monkeypatch.setattr(device_defaults, "run_device", lambda: "cuda")


def test_every_auto_resolves_to_the_value_before_on_a_cpu(monkeypatch):
    monkeypatch.setattr(device_defaults, "run_device", lambda: "cpu")
    assert set(device_defaults.LEVERS) == set(BEFORE)
    assert device_defaults.CPU_VALUES == BEFORE
    for overrides in ([], ["train.prompts_per_step=4", "rollout.max_new_tokens=256"], ["model.dtype=bfloat16"]):
        cfg = load_config(None, overrides)
        assert cfg.auto_device == "cpu"
        assert cfg.auto_levers == BEFORE
        assert {k: _get(cfg, k) for k in BEFORE} == BEFORE


def test_a_resolved_cpu_config_is_the_one_recorded_before():
    """A run directory's config.yaml written before the levers could be auto (explicit false/null) equals a config
    that leaves them auto on a CPU: the run resumes, its numbers are the same."""
    cfg = load_config(None, ["train.share_prefix=false", "train.autocast=null", "rollout.share_prefix=false"])
    assert cfg == load_config(None)


def test_on_cuda_each_auto_takes_the_gpu_setting(on_cuda):
    cfg = load_config(None)  # 16 prompts x 8 samples, one mini-batch of 128 rows, 64 new tokens
    assert cfg.auto_device == "cuda"
    want = {
        "train.share_prefix": False,
        "rollout.share_prefix": False,
        "train.micro_batch_size": 64,  # 128 rows x (256 + 64) tokens over 32768: the largest divisor <= 102
        "train.pad_to_multiple_of": 64,
        "train.autocast": "bf16",
        "train.tf32": True,
        "train.ref_compute_dtype": True,
        "model.attn_implementation": "sdpa",
        "rollout.compile": True,
        "rollout.vllm_sleep": True,
        "rollout.sync_bucket_mb": 512,
    }
    assert cfg.auto_levers == want
    assert {k: _get(cfg, k) for k in want} == want


def test_on_cuda_an_explicit_value_is_kept(on_cuda):
    cfg = load_config(
        None,
        [
            "train.autocast=null",
            "train.micro_batch_size=8",
            "train.tf32=false",
            "rollout.compile=false",
            "rollout.sync_bucket_mb=0",
            "model.attn_implementation=eager",
        ],
    )
    assert cfg.train.autocast is None and cfg.train.micro_batch_size == 8 and cfg.train.tf32 is False
    assert cfg.rollout.compile is False and cfg.rollout.sync_bucket_mb == 0
    assert cfg.model.attn_implementation == "eager"
    assert cfg.train.ref_compute_dtype is False  # follows the (explicit) autocast: no bf16 compute, no bf16 pi_ref
    assert "train.autocast" not in cfg.auto_levers and "train.ref_compute_dtype" in cfg.auto_levers


def test_on_cuda_the_padding_gives_way_to_the_shared_prefix(on_cuda):
    """train.pad_to_multiple_of's auto is 1 where train.share_prefix is on (its forward lays out its own widths);
    both named explicitly is refused before any model loads, naming both keys."""
    assert load_config(None, ["train.share_prefix=true"]).train.pad_to_multiple_of == 1
    assert load_config(None, ["train.pad_to_multiple_of=16"]).train.pad_to_multiple_of == 16
    with pytest.raises(ConfigError, match=r"train.pad_to_multiple_of=16 with train.share_prefix=true"):
        load_config(None, ["train.share_prefix=true", "train.pad_to_multiple_of=16"])


@pytest.mark.parametrize("bad", ["0", "-64", "many", "2.5"])
def test_a_bad_pad_multiple_is_refused_naming_the_key(bad):
    with pytest.raises(ConfigError, match=r"train.pad_to_multiple_of") as err:
        load_config(None, [f"train.pad_to_multiple_of={bad}"])
    assert "auto" in str(err.value) or "greater than or equal to 1" in str(err.value)


def test_the_cuda_resolver_reads_the_rest_of_the_config():
    base = {k: "auto" for k in device_defaults.LEVERS}
    base.update({"train.prompts_per_step": 16, "train.group_size": 4, "train.mini_batches": 1})
    base.update({"rollout.max_new_tokens": 64, "rollout.max_prompt_tokens": None, "model.dtype": "float32"})
    got = device_defaults.resolve(base, "cuda")
    assert got["train.micro_batch_size"] == 64  # the bench's 64 rows in one micro-batch (it ran 16)
    long = device_defaults.resolve({**base, "rollout.max_new_tokens": 1024, "rollout.max_prompt_tokens": 512}, "cuda")
    assert long["train.micro_batch_size"] == 16  # 32768 // 1536 = 21 -> 16, a divisor of 64
    bf16 = device_defaults.resolve({**base, "model.dtype": "bfloat16"}, "cuda")
    assert bf16["train.autocast"] is None and bf16["train.ref_compute_dtype"] is False
    lora = device_defaults.resolve({**base, "model.lora": {"r": 8}}, "cuda")
    assert lora["train.ref_compute_dtype"] is False  # pi_ref is the base with the adapters off
    own = device_defaults.resolve({**base, "model.overrides": {"attn_implementation": "eager"}}, "cuda")
    assert own["model.attn_implementation"] is None  # model.overrides' choice wins
    assert device_defaults.resolve(base, "cpu") == device_defaults.CPU_VALUES
    assert device_defaults.resolve({**base, "train.tf32": True}, "cuda").get("train.tf32") is None  # not auto
    assert device_defaults.micro_batch_rows(12, 1000, 2500) == 2 and device_defaults.micro_batch_rows(7, 10**6) == 1


def test_the_resolved_value_is_visible(on_cuda):
    cfg = load_config(None)
    explained = explain_config(cfg)
    assert "train.autocast: 'bf16'  (auto, resolved for cuda; on cpu: None)" in explained
    assert "train.micro_batch_size: 64  (auto, resolved for cuda; on cpu: None)" in explained
    assert cfg.to_dict()["train"]["autocast"] == "bf16"  # what a run records (config.yaml, MLflow's params)
    assert "autocast: bf16" in dump_config(cfg)
    kept = dump_config(cfg, keep_auto=True)  # a study's cell: resolved again where it runs
    assert "autocast: auto" in kept and "micro_batch_size: auto" in kept
    line = device_defaults.describe(cfg.auto_levers, cfg.auto_device)
    assert line.startswith("auto levers on cuda: ") and "train.autocast=bf16" in line


def test_a_study_cell_keeps_auto_for_the_device_that_runs_it(monkeypatch):
    from harness.experiment.study import Cell

    monkeypatch.setattr(device_defaults, "run_device", lambda: "cpu")
    cell = Cell(id="c", axes={}, overrides={}, data={}, tags={}, config=load_config(None, ["train.tf32=true"]))
    text = cell.config_yaml()
    assert "share_prefix: auto" in text and "compile: auto" in text and "tf32: true" in text
    monkeypatch.setattr(device_defaults, "run_device", lambda: "cuda")
    import yaml

    from harness.config import build_config

    there = build_config(yaml.safe_load(text))
    assert there.train.autocast == "bf16" and there.train.tf32 is True and there.rollout.compile is True


def test_auto_is_refused_where_it_is_not_a_value():
    from harness.config import ConfigError

    with pytest.raises(ConfigError, match="micro_batch_size"):
        load_config(None, ["train.micro_batch_size=0"])
    with pytest.raises(ConfigError, match="sync_bucket_mb"):
        load_config(None, ["rollout.sync_bucket_mb=true"])


def test_tf32_and_the_reference_in_the_compute_dtype():
    from harness.models import build_model
    from harness.train.core.policy_module import matmul_precision, reference_of

    before = (torch.backends.cuda.matmul.allow_tf32, torch.get_float32_matmul_precision())
    try:
        matmul_precision(False)  # a CPU's auto: nothing touched
        assert (torch.backends.cuda.matmul.allow_tf32, torch.get_float32_matmul_precision()) == before
        matmul_precision(True)
        assert torch.backends.cuda.matmul.allow_tf32 and torch.get_float32_matmul_precision() == "high"
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before[0]
        torch.set_float32_matmul_precision(before[1])
    model, _ = build_model("tiny-dense", seed=0)
    assert reference_of(model).dtype == torch.float32
    ref = reference_of(model, torch.bfloat16)
    assert ref.dtype == torch.bfloat16 and model.dtype == torch.float32 and not ref.training


@pytest.mark.parametrize(
    "override, allowed",
    [
        ("train.tf32=maybe", "valid boolean"),
        ("train.ref_compute_dtype=3", "valid boolean"),
        ("rollout.sync_bucket_mb=-5", "greater than or equal to 0"),
        ("rollout.vllm_sleep=2", "valid boolean"),
    ],
)
def test_a_bad_lever_value_is_one_line_naming_the_key_and_both_forms(override, allowed):
    """A lever is `value | auto`: pydantic fails each member of the union apart; the user reads one line."""
    with pytest.raises(ConfigError) as err:
        load_config(None, [override])
    msg = str(err.value)
    key, value = override.split("=")
    assert "\n" not in msg and f"'{key}':" in msg and allowed in msg and "'auto'" in msg, msg
    assert f"(got {value!r})" in msg or f"(got {value})" in msg, msg
