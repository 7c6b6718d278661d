"""Every preset trains through the same loop: parameters change, losses stay finite."""

import json
import math

import pytest
import torch
from safetensors.torch import load_file

from harness.objective.presets import BUILTIN_PRESETS, preset_trainer
from harness.train import train
from harness.train.run.warmstart import ensure_warm_start

# every preset the package ships that runs under the RL trainer (dpo has its own tests: test_dpo.py)
PRESETS = [name for name in BUILTIN_PRESETS if preset_trainer(name) == "rl"]
# the fast config samples G = 4: pass@k needs k < G
EXTRA = {"passk": ["objective.passk_k=2"]}
EXTRA["opd"] = ["model.teacher=tiny-dense"]  # a teacher: the seeded fresh tiny model (test_distill_train.py: a folder)


def _weights(folder):
    return load_file(str(folder / "model.safetensors"))


@pytest.mark.parametrize("preset", PRESETS)
def test_one_step_changes_parameters_and_losses_are_finite(preset, fast_config, tmp_path):
    cfg = fast_config(f"objective.preset={preset}", *EXTRA.get(preset, []), "train.steps=1", "train.checkpoint_every=1")
    before = _weights(ensure_warm_start(cfg))
    train(cfg, tmp_path / "run")
    after = _weights(tmp_path / "run" / "checkpoints" / "step_000001")
    changed = sum(not torch.equal(before[k], after[k]) for k in before)
    assert changed >= len(before) // 2, f"{preset}: only {changed}/{len(before)} tensors changed"
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    step0 = records[0]
    for key in ("loss/policy", "clip/frac", "ratio/mean", "entropy", "reward/mean", "length/mean", "grad/norm"):
        assert key in step0 and math.isfinite(step0[key]), (preset, key, step0.get(key))
    assert step0["adv/abs_mean"] > 0, f"{preset}: no learning signal in the test batch"
    # the update's parts and the collector's time, every step (docs/objective.md, "Metrics": "Timing")
    for key in ("perf/policy_update_seconds", "perf/sync_seconds", "perf/gc_seconds", "perf/gc_full"):
        assert key in step0 and step0[key] >= 0, (preset, key, step0.get(key))
    assert step0["perf/policy_update_seconds"] <= step0["perf/update_seconds"]
    width = step0["perf/batch_width"]  # the longest prompt + the response width: the forwards' row length
    assert width == int(width) and step0["length/mean"] < width <= 1024 + cfg.rollout.max_new_tokens
    assert not any(k.startswith("perf/cuda_") for k in step0)  # the allocator's counts: CUDA only
    assert "eval/pass_at_1" in records[-1] and "eval/pass_at_1" in step0
    if preset == "prime":  # the implicit reward model trained beside the policy (docs/objective.md, "PRIME")
        for key in ("prm/loss", "prm/accuracy", "reward/process_mean", "loss/prm", "perf/peak_mem_mb"):
            assert key in step0 and math.isfinite(step0[key]), (key, step0.get(key))
        assert 0.0 <= step0["prm/accuracy"] <= 1.0
        # pi_phi starts as the warm start = pi_ref: q = 0, so the first scores are 0, the BCE log 2
        assert step0["reward/process_mean"] == 0.0 and step0["prm/loss"] == pytest.approx(math.log(2), abs=1e-6)
        state = torch.load(tmp_path / "run" / "checkpoints" / "step_000001" / "trainer_state.pt", weights_only=False)
        prm = state["prm"]
        moved = sum(not torch.equal(before[k], prm["lm." + k]) for k in before if "lm." + k in prm)
        assert moved >= len(before) // 2 and state["prm_optimizer"]["state"], "the reward model took no step"
    if preset == "opd":  # the teacher's reverse KL and its forward's seconds (docs/objective.md, "Advantage")
        assert step0["distill/reverse_kl"] > 0 and step0["perf/teacher_seconds"] > 0
    if preset == "remax":  # the greedy responses' reward, the baseline (docs/objective.md, "Advantage"), logged
        assert 0.0 <= step0["reward/greedy_mean"] <= 1.0 and 0.0 <= step0["reward/above_greedy_frac"] <= 1.0
    if preset == "lambda_grpo":  # λ (from lambda_init 0) logged, stepped with the policy, checkpointed
        assert math.isfinite(step0["agg/lambda"]) and step0["agg/lambda"] != 0.0
        state = torch.load(tmp_path / "run" / "checkpoints" / "step_000001" / "trainer_state.pt", weights_only=False)
        assert float(state["lambda"]["value"]) != 0.0 and state["lambda_optimizer"]["state"]
    if preset == "grpo":  # the final checkpoint loads on its own for `harness eval RUN_DIR`
        from harness.train.run.final_eval import eval_run

        result = eval_run(tmp_path / "run", n_samples=2, num_prompts=4)
        assert 0.0 <= result["eval/pass_at_1"] <= 1.0 and (tmp_path / "run" / "eval.json").exists()
        # --vs-initial on the run's own eval set reproduces the run's first and last evals
        # (same prompts, same sampling seed), and the paired delta is their difference
        paired = eval_run(tmp_path / "run", vs_initial=True)
        assert paired["initial"]["eval/pass_at_1"] == pytest.approx(step0["eval/pass_at_1"], abs=1e-6)
        assert paired["eval/pass_at_1"] == pytest.approx(records[-1]["eval/pass_at_1"], abs=1e-6)
        delta = paired["delta/pass_at_1"]
        assert delta == pytest.approx(records[-1]["eval/pass_at_1"] - step0["eval/pass_at_1"], abs=1e-6)
        lo, hi = paired["delta/pass_at_1/ci95"]
        assert lo <= delta <= hi
        # the run's own summary holds the same paired rise, from its saved per-prompt evals
        rise = json.loads((tmp_path / "run" / "summary.json").read_text())["paired_rise"]
        assert (rise["from_step"], rise["to_step"], rise["prompts"]) == (0, 1, cfg.eval.num_prompts)
        assert rise["delta_pass_at_1"] == pytest.approx(delta, abs=1e-6)
        assert rise["ci95"] == pytest.approx([lo, hi], abs=1e-9)
        assert rise["p_le_0"] == pytest.approx(paired["delta/pass_at_1/p_le_0"], abs=1e-9)


def test_tiny_moe_trains(fast_config, tmp_path):
    # no warm start (its SFT is the slow part): rewards may all be 0, this checks the MoE path runs
    cfg = fast_config("model.name=tiny-moe", "warm_start.enabled=false", "train.steps=1", "train.checkpoint_every=1")
    train(cfg, tmp_path / "moe")
    rec = json.loads((tmp_path / "moe" / "metrics.jsonl").read_text().splitlines()[0])
    assert math.isfinite(rec["loss/policy"])
