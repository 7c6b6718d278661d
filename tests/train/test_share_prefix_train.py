"""train.share_prefix in a run: one step with pi_old recomputed (mini_batches=2) and a k3 KL against pi_ref, so
the update, pi_old's and pi_ref's forwards all take the shared-prefix path (harness/models/prefix_groups.py).
The same rollout (the policy is the same at step 0), the same metrics and weights up to rounding."""

import json

from safetensors.torch import load_file

from harness.models import prefix_groups
from harness.train import train

ONE_STEP = [
    "train.steps=1",
    "train.mini_batches=2",
    "train.old_logp=recompute",
    "train.micro_batch_size=8",  # 2 groups of 4 a micro-batch
    "train.checkpoint_every=1",
    "objective.preset=grpo",
    "objective.kl_coef=0.04",
    "train.threads=1",
]


def _run(fast_config, tmp_path, share: bool):
    run = tmp_path / f"share_{share}"
    train(fast_config(*ONE_STEP, f"train.share_prefix={share}"), run)
    rec = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
    return rec, load_file(str(run / "checkpoints" / "step_000001" / "model.safetensors"))


def test_a_step_with_shared_prefixes_equals_the_plain_step(fast_config, tmp_path, monkeypatch):
    calls = {"n": 0}
    real = prefix_groups.grouped_response_logits

    def counted(*args, **kwargs):
        calls["n"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr("harness.models.logprobs.grouped_response_logits", counted)
    plain, w_plain = _run(fast_config, tmp_path, False)
    assert calls["n"] == 0
    shared, w_shared = _run(fast_config, tmp_path, True)
    # 32 rows in micro-batches of 8: pi_old 4, pi_ref 4, the update's 2 mini-batches 2 each
    assert calls["n"] == 12
    assert plain["kl/ref"] > 0 and plain["loss/policy"] != 0 and plain["grad/norm"] > 0
    for key in ("loss/policy", "loss/kl", "kl/ref", "kl/old", "entropy", "grad/norm", "mismatch/k3_kl", "reward/mean"):
        assert abs(shared[key] - plain[key]) <= 1e-4 * max(1.0, abs(plain[key])), (key, shared[key], plain[key])
    worst = max(float((w_shared[k] - w_plain[k]).abs().max()) for k in w_plain)
    assert worst <= 1e-6, worst
