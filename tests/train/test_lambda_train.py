"""λ-GRPO through the RL trainer (docs/objective.md, "λ-GRPO"): at λ = 0 (lambda_init) the first step is
token_mean's exactly -- the same policy weights bit for bit -- while λ itself takes its own step."""

from __future__ import annotations

import json

import torch
from safetensors.torch import load_file

from harness.train import train


def _run(cfg, path):
    train(cfg, path)
    ckpt = path / "checkpoints" / "step_000001"
    rec = json.loads((path / "metrics.jsonl").read_text().splitlines()[0])
    return load_file(str(ckpt / "model.safetensors")), rec, torch.load(ckpt / "trainer_state.pt", weights_only=False)


def test_lambda_zero_trains_exactly_like_token_mean(fast_config, tmp_path):
    common = (
        "train.steps=1",
        "train.checkpoint_every=1",
        "train.threads=1",
        "train.mini_batches=1",
        "train.inner_epochs=1",
    )  # one optimizer step: the one at λ = lambda_init = 0
    lam_w, lam_rec, lam_state = _run(fast_config("objective.preset=lambda_grpo", *common), tmp_path / "lam")
    tm_w, tm_rec, tm_state = _run(
        fast_config("objective.preset=lambda_grpo", "objective.agg=token_mean", *common), tmp_path / "tm"
    )
    assert all(torch.equal(lam_w[k], tm_w[k]) for k in tm_w)
    for key in ("loss/policy", "clip/frac", "grad/norm", "adv/abs_mean"):
        assert lam_rec[key] == tm_rec[key], key
    # the one optimizer step ran at λ = 0; λ moved in it (its own AdamW, lambda_lr)
    assert float(lam_state["lambda"]["value"]) != 0.0 and "lambda" not in tm_state
    assert "agg/lambda" in lam_rec and "agg/lambda" not in tm_rec
