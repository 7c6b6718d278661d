"""The zoo's tricks that are knobs of a component, each on in a config that trains one step (docs/objective.md):
the step runs, its loss is finite, the parameters move and the trick logs its metric."""

from __future__ import annotations

import json
import math

import pytest
import torch
from safetensors.torch import load_file

from harness.train import train
from harness.train.run.warmstart import ensure_warm_start

CASES = {
    "positive_nll": (["objective.positive_nll_coef=0.1"], "loss/positive_nll"),
    "optimal_token": (["objective.baseline=optimal_token", "objective.scale=none"], "adv/abs_mean"),
    "pf_ppo": (["objective.pf_ppo_reweight=pow"], "pf_ppo/distinct_frac"),
    # a barely warmed MoE (its own warm start): the router's aux loss moves the routers and the layers below them
    "router_aux": (
        ["model.name=tiny-moe", "warm_start.steps=2", "objective.router_aux_loss_coef=0.02"],
        "loss/router_aux",
    ),
}
MOVES_HALF = {"positive_nll", "optimal_token", "pf_ppo"}  # warmed: every case with a learning signal


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_step_with_the_trick_on(name, fast_config, tmp_path):
    overrides, key = CASES[name]
    cfg = fast_config(*overrides, "train.steps=1", "train.checkpoint_every=1")
    before = load_file(str(ensure_warm_start(cfg) / "model.safetensors"))
    train(cfg, tmp_path / "run")
    after = load_file(str(tmp_path / "run" / "checkpoints" / "step_000001" / "model.safetensors"))
    changed = sum(not torch.equal(before[k], after[k]) for k in before)
    assert changed >= (len(before) // 2 if name in MOVES_HALF else 1), (name, changed)
    step0 = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0])
    assert math.isfinite(step0["loss/policy"]) and key in step0 and math.isfinite(step0[key]), step0.get(key)
