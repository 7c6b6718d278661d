"""A researcher's own variants (tests/plugins/my_variants.py) train through the same loop as the built-in
presets: one step changes the parameters, the losses and the plugin surrogate's clip fraction are finite."""

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from harness.train import train
from harness.train.run.warmstart import ensure_warm_start

PLUGINS = str(Path(__file__).resolve().parents[1] / "plugins")


@pytest.mark.parametrize(
    "objective",
    [
        ["objective.preset=median_tanh"],  # the plugin's preset
        ["objective.baseline=median", "objective.clip=tanh_clip", "objective.tanh_width=0.3"],  # its modes on grpo
    ],
)
def test_one_step_with_the_plugin(objective, fast_config, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(PLUGINS)
    cfg = fast_config("objective.plugins=[my_variants]", *objective, "train.steps=1", "train.checkpoint_every=1")
    before = load_file(str(ensure_warm_start(cfg) / "model.safetensors"))
    train(cfg, tmp_path / "run")
    after = load_file(str(tmp_path / "run" / "checkpoints" / "step_000001" / "model.safetensors"))
    assert sum(not torch.equal(before[k], after[k]) for k in before) >= len(before) // 2
    rec = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0])
    for key in ("loss/policy", "clip/frac", "ratio/mean", "grad/norm"):
        assert math.isfinite(rec[key]), (key, rec.get(key))
    assert rec["adv/abs_mean"] > 0
