"""On-policy distillation end to end: `harness train` with a teacher named in YAML (model.teacher, a tiny model
folder saved here) runs, and logs the mean reverse KL to the teacher each step (docs/objective.md, "Advantage")."""

from __future__ import annotations

import json
import math

import yaml

from harness.cli import main
from harness.models import build_model, save_model


def _config(tmp_path, teacher) -> str:
    """A YAML run of the tiny model (no warm start: the student is tiny-dense from seed 0) distilling from `teacher`."""
    cfg = {
        "seed": 0,
        "model": {"name": "tiny-dense", "teacher": str(teacher)},
        "task": {"name": "arithmetic", "difficulty_mix": {"easy": 1}},
        "warm_start": {"enabled": False},
        "rollout": {"backend": "hf", "max_new_tokens": 12, "temperature": 1.0},
        "train": {"steps": 2, "prompts_per_step": 4, "group_size": 2, "checkpoint_every": 2, "samples_to_log": 1},
        "eval": {"every": 0, "num_prompts": 2, "n_samples": 1, "ks": [1], "temperature": 1.0},
        "objective": {"preset": "opd"},
        "tracking": {"mlflow": False},
    }
    path = tmp_path / f"opd_{teacher.name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def _records(run) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_harness_train_distils_from_a_teacher_folder(tmp_path):
    teacher = save_model(*build_model("tiny-dense", seed=11), tmp_path / "teacher")  # another init: KL > 0
    assert main(["train", _config(tmp_path, teacher), "--out", str(tmp_path / "run")]) == 0
    records = [r for r in _records(tmp_path / "run") if "distill/reverse_kl" in r]
    assert len(records) == 2  # one per step
    for r in records:
        assert math.isfinite(r["distill/reverse_kl"]) and r["distill/reverse_kl"] > 0
        assert math.isfinite(r["distill/teacher_logp_mean"]) and r["distill/teacher_logp_mean"] < 0
        assert 0 < r["perf/teacher_seconds"] <= r["perf/score_seconds"]
        assert r["adv/abs_mean"] > 0


def test_a_teacher_equal_to_the_student_gives_no_reverse_kl(tmp_path):
    # the student's own initial weights as the teacher: at step 0 k_t = 0 on every sampled token (same tokens, same
    # temperature), so the advantages are 0 and the policy takes no step
    twin = save_model(*build_model("tiny-dense", seed=0), tmp_path / "twin")
    assert main(["train", _config(tmp_path, twin), "--out", str(tmp_path / "run")]) == 0
    step0 = next(r for r in _records(tmp_path / "run") if "distill/reverse_kl" in r)
    assert abs(step0["distill/reverse_kl"]) < 1e-5 and step0["adv/abs_mean"] < 1e-5
