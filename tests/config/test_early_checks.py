"""Values that used to fail only after the model loaded (a traceback after seconds of work) are
checked by load_config: task options and difficulty_mix, Adam betas, model.overrides (keys and
values), a model folder that holds no model, group baselines with one response per group,
non-finite floats, a clip bound of 0. The CLI reports each before any model, tokenizer or
warm start loads, exit status 2, no traceback."""

from __future__ import annotations

import json

import pytest

from harness.config import ConfigError, load_config

SMOKE = "experiments/runs/smoke.yaml"


def _err(overrides, path=SMOKE) -> str:
    with pytest.raises(ConfigError) as e:
        load_config(path, overrides)
    return str(e.value)


@pytest.mark.parametrize(
    "override, needles",
    [
        ("task.options={ops: '+/'}", ["task.options", "ops"]),
        ("task.options={levels: 3}", ["task.options", "levels", "allowed"]),
        ("task.difficulty_mix={easy: 1, impossible: 1}", ["task.difficulty_mix", "impossible"]),
        ("task.difficulty_mix={easy: -1}", ["task.difficulty_mix", "easy"]),
        ("task.difficulty_mix={easy: 0}", ["task.difficulty_mix", "zero"]),
        ("task.options={difficulty_mix: {easy: 1}}", ["task.options", "task.difficulty_mix"]),
    ],
)
def test_task_options_and_difficulty_mix(override, needles):
    msg = _err([override])
    for n in needles:
        assert n in msg, msg


@pytest.mark.parametrize("betas", ["[1.0, 0.999]", "[0.9, 1.5]", "[-0.1, 0.9]"])
def test_adam_betas_lie_in_0_1(betas):
    msg = _err([f"train.betas={betas}"])
    assert "train.betas" in msg and "less than 1" in msg or "greater than or equal to 0" in msg, msg


@pytest.mark.parametrize(
    "override, key",
    [
        ("train.lr=.nan", "train.lr"),
        ("train.lr=.inf", "train.lr"),
        ("rollout.temperature=.inf", "rollout.temperature"),
        ("eval.temperature=.nan", "eval.temperature"),
        ("train.grad_clip=.inf", "train.grad_clip"),
        ("warm_start.lr=.inf", "warm_start.lr"),
    ],
)
def test_non_finite_floats(override, key):
    msg = _err([override])
    assert key in msg and "finite" in msg, msg


@pytest.mark.parametrize(
    "overrides, needles",
    [
        (["model.overrides={num_hiden_layers: 2}"], ["model.overrides.num_hiden_layers", "num_hidden_layers"]),
        (
            ["model.name=tiny-moe", "model.overrides={num_local_expert: 8}"],
            ["model.overrides.num_local_expert", "num_local_experts"],
        ),
        (["model.overrides={hidden_size: 130}"], ["model.overrides", "hidden_size", "130"]),
        (["model.overrides={hidden_size: big}"], ["model.overrides", "hidden_size", "big"]),
        (["model.overrides={vocab_size: 10}"], ["model.overrides", "vocab_size"]),
        (["model.overrides={dtype: bfloat16}"], ["model.overrides.dtype", "model.dtype"]),
    ],
)
def test_model_overrides_keys_and_values(overrides, needles):
    msg = _err(overrides)
    for n in needles:
        assert n in msg, msg


def test_model_overrides_that_are_valid_still_load():
    cfg = load_config(SMOKE, ["model.overrides={num_hidden_layers: 2, hidden_size: 64}"])
    assert cfg.model.overrides == {"num_hidden_layers": 2, "hidden_size": 64}
    moe = load_config(SMOKE, ["model.name=tiny-moe", "model.overrides={num_local_experts: 8, num_experts_per_tok: 2}"])
    assert moe.model.overrides["num_local_experts"] == 8


def test_a_folder_that_is_not_a_model(tmp_path):
    msg = _err([f"model.name={tmp_path}", "warm_start.enabled=false"])
    assert "model.name" in msg and str(tmp_path) in msg and "config.json" in msg
    (tmp_path / "config.json").write_text("{not json")
    assert "config.json" in _err([f"model.name={tmp_path}", "warm_start.enabled=false"])
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    msg = _err([f"model.name={tmp_path}", "warm_start.enabled=false"])  # no weights
    assert "weights" in msg or "safetensors" in msg, msg


@pytest.mark.parametrize("preset", ["grpo", "dapo", "dr_grpo", "gspo"])
def test_group_baseline_needs_two_responses_per_group(preset):
    msg = _err([f"objective.preset={preset}", "train.group_size=1", "train.mini_batches=1"])
    assert "train.group_size=1" in msg and "objective.baseline" in msg or "objective.scale" in msg, msg
    assert "dynamic" not in msg


def test_group_size_one_is_fine_without_a_group_statistic():
    cfg = load_config(
        SMOKE,
        [
            "objective.preset=reinforce_pp",
            "objective.baseline=batch_mean",
            "train.group_size=1",
            "train.mini_batches=1",
        ],
    )
    assert cfg.train.group_size == 1


@pytest.mark.parametrize("override", ["objective.eps_high=0", "objective.eps_low=0"])
def test_zero_clip_distance(override):
    msg = _err([override])
    assert override.split("=")[0] in msg and "> 0" in msg, msg


def test_zero_clip_distance_is_fine_without_clipping():
    load_config(SMOKE, ["objective.preset=gpg", "train.mini_batches=1"])  # eps unused, preset values


# ----------------------------------------------------------------------------- the CLI, before any model


@pytest.fixture
def no_model(monkeypatch):
    """Every way to a model, tokenizer or warm start raises: a test that reaches one fails."""
    import harness.models.registry as registry
    import harness.train.run.setup as run_setup
    import harness.train.run.warmstart as warmstart

    def boom(*a, **k):
        raise AssertionError("a model, tokenizer or warm start was loaded")

    for mod, names in (
        (registry, ("build_model", "load_model")),
        (warmstart, ("build_model", "load_model", "ensure_warm_start", "initial_policy")),
        (run_setup, ("initial_policy",)),
    ):
        for n in names:
            monkeypatch.setattr(mod, n, boom)
    import transformers

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", boom)
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", boom)


@pytest.mark.parametrize(
    "overrides, needle",
    [
        (["task.options={levels: 3}"], "task.options"),
        (["task.difficulty_mix={easy: 1, impossible: 1}"], "task.difficulty_mix"),
        (["train.betas=[0.9, 1.0]"], "train.betas"),
        (["model.overrides={num_hiden_layers: 2}"], "model.overrides.num_hiden_layers"),
        (["train.group_size=1", "train.mini_batches=1"], "train.group_size"),
        (["train.lr=.nan"], "train.lr"),
        (["objective.preset=dpo", "dpo.pairs_per_prompt=9"], "dpo.pairs_per_prompt"),
    ],
)
def test_cli_train_reports_before_any_model_loads(no_model, tmp_path, capsys, overrides, needle):
    from harness.cli import main

    out = tmp_path / "run"
    code = main(["train", SMOKE, *overrides, "tracking.mlflow=false", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert needle in err and SMOKE in err and "Traceback" not in err
    assert "\n\n" not in err.strip()  # one paragraph
    assert not (out / "config.yaml").exists()


def test_cli_a_folder_that_is_not_a_model(no_model, tmp_path, capsys):
    from harness.cli import main

    folder = tmp_path / "not-a-model"
    folder.mkdir()
    code = main(
        [
            "train",
            SMOKE,
            f"model.name={folder}",
            "warm_start.enabled=false",
            "tracking.mlflow=false",
            "--out",
            str(tmp_path / "run"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "model.name" in err and "Traceback" not in err
