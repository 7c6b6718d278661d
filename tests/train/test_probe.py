"""The one-update probe (harness/probes/engine.py) on the real tiny model.

Common random numbers: two arms with the SAME objective see the same policy, batch, update
seed and probe sampling seed, so every probe number of theirs must be identical (a paired
difference of exactly 0); an arm with another objective must differ. And the summary's paired
difference is the mean of the per-batch differences."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from harness.config import load_config
from harness.probes.engine import Arm, paired, run_one_update_probe, with_section
from harness.probes.length import _stats as length_stats
from harness.probes.length import summarize

CONFIG = "experiments/runs/smoke.yaml"
SMALL = [
    "warm_start.steps=300",
    "rollout.temperature=1.0",
    "eval.temperature=1.0",
    "train.prompts_per_step=8",
    "train.group_size=4",
    "rollout.max_new_tokens=40",
    "tracking.mlflow=false",
    "train.mini_batches=2",
    "train.threads=1",
]


@pytest.fixture(scope="module")
def probe_result(warm_cache):
    base = load_config(CONFIG, [*SMALL, f"warm_start.cache_dir={warm_cache}", "objective.kl_coef=0.0"])
    dr = load_config(CONFIG, [*SMALL, f"warm_start.cache_dir={warm_cache}", "objective.preset=dr_grpo"])
    arms = [Arm("grpo", base), Arm("grpo_again", base), Arm("dr_grpo", dr)]
    res = run_one_update_probe(
        arms, batches=2, probe_prompts=6, probe_samples=4, stats=length_stats, log=lambda s: None
    )
    return arms, res


def test_identical_arms_give_identical_numbers(probe_result):
    _, res = probe_result
    for row in res.per_batch:
        a, b = row["grpo"], row["grpo_again"]
        assert set(a) == set(b)
        for k in a:
            va, vb = a[k], b[k]
            assert (math.isnan(va) and math.isnan(vb)) or va == vb, (k, va, vb)


def test_another_objective_gives_another_update(probe_result):
    _, res = probe_result
    # dr_grpo drops the std and sums over tokens / C: another loss scale and another gradient
    assert any(row["grpo"]["grad/norm"] != row["dr_grpo"]["grad/norm"] for row in res.per_batch)


def test_paired_is_the_mean_of_per_batch_differences(probe_result):
    arms, res = probe_result
    key = "eval/length/mean"
    diffs = [row["grpo"][key] - row["dr_grpo"][key] for row in res.per_batch]
    e = paired(res, key, "grpo", "dr_grpo")
    assert e["n"] == 2 and e["mean"] == pytest.approx(sum(diffs) / 2, abs=1e-12)
    same = paired(res, key, "grpo", "grpo_again")
    assert same["mean"] == 0.0 and same["half"] == 0.0 and not same["excludes_zero"]
    s = summarize(res, arms)
    assert {e["b"] for e in s["pairs"]} == {"grpo_again", "dr_grpo"}
    shares = [e["mean"] for e in s["stats"] if math.isfinite(e["mean"])]  # NaN: no group with a signal
    assert shares and all(0.0 <= v <= 1.0 for v in shares), s["stats"]  # shares of the gradient weight


def test_with_section_validates():
    cfg = load_config(CONFIG, ["tracking.mlflow=false"])
    assert with_section(cfg, "train", prompts_per_step=7).train.prompts_per_step == 7
    with pytest.raises(ValidationError, match="prompts_per_step"):
        with_section(cfg, "train", prompts_per_step=0)
