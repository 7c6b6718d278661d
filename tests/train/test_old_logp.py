"""train.old_logp=rollout: the hf sampler's log-probs stand in for pi_old's recomputed ones.

Equivalence: with 2 mini-batches (so pi_old's log-probs enter the ratio of the second one),
one step with old_logp=rollout must land on the same parameters as old_logp=recompute, and
both must have moved. Where the sampler's log-probs are not the policy's, the config refuses.
"""

import pytest
from safetensors.torch import load_file

from harness.config import ConfigError, load_config
from harness.train import train
from harness.train.run.warmstart import ensure_warm_start
from tests.train.same_weights import assert_same_weights

STEP = ["train.steps=1", "train.mini_batches=2", "train.checkpoint_every=1"]


def test_rollout_logp_matches_recompute(fast_config, tmp_path):
    params = {}
    for mode in ("recompute", "rollout"):
        cfg = fast_config(*STEP, f"train.old_logp={mode}")
        train(cfg, tmp_path / mode)
        params[mode] = load_file(str(tmp_path / mode / "checkpoints" / "step_000001" / "model.safetensors"))
    before = load_file(str(ensure_warm_start(cfg) / "model.safetensors"))
    moved = max(float((params["rollout"][k] - before[k]).abs().max()) for k in before)
    assert moved > 1e-4  # the update did something
    # same rollouts (seeded), same ratios up to fp32 noise (~1e-6 in a logp) -> the same Adam steps, but for
    # the few weights whose gradient is at rounding level (tests/train/same_weights.py); a wrong pi_old
    # changes the second mini-batch's gradient and hundreds of weights
    assert_same_weights(
        params["rollout"], params["recompute"], atol=1e-5, lr=cfg.train.lr, steps=cfg.train.mini_batches
    )


@pytest.mark.parametrize(
    "override,named",
    [
        ("rollout.dtype=bfloat16", "rollout.dtype"),
        ("rollout.top_p=0.9", "rollout.top_p"),
        ("rollout.backend=vllm", "rollout.backend"),
        ("objective.tis_cap=2.0", "objective.tis_cap"),
    ],
)
def test_rollout_logp_refused_where_inexact(override, named):
    with pytest.raises(ConfigError, match=named):
        load_config("experiments/runs/smoke.yaml", ["train.old_logp=rollout", override])


def test_auto_reuses_only_where_exact():
    assert load_config("experiments/runs/smoke.yaml", ["train.old_logp=auto"]).reuses_rollout_logp()
    for inexact in ("rollout.dtype=bfloat16", "rollout.backend=vllm", "rollout.top_p=0.9"):
        cfg = load_config("experiments/runs/smoke.yaml", ["train.old_logp=auto", inexact])  # no error: recompute
        assert not cfg.reuses_rollout_logp()
    assert not load_config("experiments/runs/smoke.yaml", ["train.old_logp=recompute"]).reuses_rollout_logp()


def test_old_logp_unknown_value_named():
    with pytest.raises(ConfigError, match="train.old_logp"):
        load_config("experiments/runs/smoke.yaml", ["train.old_logp=sampler"])
