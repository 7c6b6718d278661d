"""model.teacher (on-policy distillation, objective.distill_coef > 0): refused before a model loads, one line
naming the key, the value and what is allowed; the teacher's tokenizer read from its files (harness/models/vocab.py)."""

from __future__ import annotations

import json

import pytest

from harness.config import ConfigError, load_config
from harness.models import build_model, save_model
from harness.models.vocab import token_ids, vocab_difference

SMOKE = "experiments/runs/smoke.yaml"
DPO = "experiments/runs/dpo.yaml"


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    """A tiny model folder (the policy's tokenizer) and a copy whose tokenizer swaps the ids of 'a' and 'b'."""
    root = tmp_path_factory.mktemp("teachers")
    model, tok = build_model("tiny-dense", seed=3)
    same = save_model(model, tok, root / "same")
    other = save_model(model, tok, root / "other")
    data = json.loads((other / "tokenizer.json").read_text())
    vocab = data["model"]["vocab"]
    vocab["a"], vocab["b"] = vocab["b"], vocab["a"]
    (other / "tokenizer.json").write_text(json.dumps(data))
    return {"same": str(same), "other": str(other), "root": root}


def _refused(path: str, overrides: list[str], needles: list[str]) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(path, overrides)
    msg = str(e.value)
    assert "\n" not in msg.strip() and all(n in msg for n in needles), msg


def test_opd_without_a_teacher():
    _refused(SMOKE, ["objective.preset=opd"], ["objective.distill_coef=1.0", "model.teacher", "not set"])


def test_a_missing_teacher_folder(teacher):
    gone = str(teacher["root"] / "nowhere")
    _refused(SMOKE, ["objective.preset=opd", f"model.teacher={gone}"], [f"model.teacher={gone!r}", "existing folder"])
    empty = teacher["root"] / "empty"
    empty.mkdir(exist_ok=True)
    _refused(SMOKE, ["objective.preset=opd", f"model.teacher={empty}"], ["model.teacher", "not a Hugging Face model"])


def test_a_teacher_with_another_tokenizer(teacher):
    _refused(
        SMOKE,
        ["objective.preset=opd", f"model.teacher={teacher['other']}"],
        ["model.teacher", "another tokenizer", "token 'a' is id", "model.name='tiny-dense'"],
    )


def test_a_teacher_nothing_reads(teacher):
    # distill_coef 0 (every preset but opd): the teacher would be loaded for nothing
    _refused(SMOKE, [f"model.teacher={teacher['same']}"], ["model.teacher", "objective.distill_coef=0.0", "> 0"])
    _refused(
        SMOKE,
        ["objective.preset=opd", "objective.distill_coef=0", f"model.teacher={teacher['same']}"],
        ["objective.distill_coef=0.0"],
    )
    _refused(
        SMOKE,
        ["objective.preset=opd", "objective.distill_coef=-1", f"model.teacher={teacher['same']}"],
        ["distill_coef"],
    )


def test_distillation_under_the_dpo_trainer(teacher):
    _refused(DPO, [f"model.teacher={teacher['same']}"], ["model.teacher", "DPO trainer", "objective.distill_coef=0"])
    _refused(DPO, ["objective.distill_coef=1.0"], ["objective.distill_coef=1.0"])


def test_accepted(teacher):
    cfg = load_config(SMOKE, ["objective.preset=opd", f"model.teacher={teacher['same']}"])
    assert cfg.model.teacher == teacher["same"] and cfg.objective.distill_coef == 1.0
    assert not cfg.objective.distill_task_advantage
    mix = load_config(SMOKE, ["objective.distill_coef=0.5", "model.teacher=tiny-dense"])  # grpo + the teacher's term
    assert mix.objective.algorithm == "grpo" and mix.objective.distill_task_advantage


def test_vocab_difference_names_a_token():
    ours = token_ids("tiny-dense")
    assert len(ours) == 100 and vocab_difference(ours, dict(ours)) is None
    assert "token '<pad>' is id 0" in vocab_difference(ours, {**ours, "<pad>": 7})
    assert "'zz' (id 100) is not in the policy's" in vocab_difference(ours, {**ours, "zz": 100})
