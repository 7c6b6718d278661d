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
    calls = []  # (prompts run, rows) of each shared-prefix forward
    real = prefix_groups.grouped_response_logits

    def counted(model, prompt_ids, *args, **kwargs):
        calls.append((len(prefix_groups.prompt_groups(prompt_ids)[0]), len(prompt_ids)))
        return real(model, prompt_ids, *args, **kwargs)

    monkeypatch.setattr("harness.models.logprobs.grouped_response_logits", counted)
    plain, w_plain = _run(fast_config, tmp_path, False)
    assert calls == []
    shared, w_shared = _run(fast_config, tmp_path, True)
    # 8 prompts x 4 rows in micro-batches of 8: pi_old's and pi_ref's 4 each run 2 prompts for 8 rows (1 where
    # the task drew the same problem twice in a row: identical prompts share too)
    assert len(calls) == 12 and all(u in (1, 2) and b == 8 for u, b in calls[:8]), calls
    # the update's 2 mini-batches of 16 shuffled rows, 2 micro-batches each: a mini-batch's rows go in batch
    # order, so a prompt's rows in it are contiguous (shuffled, most rows would be a run of their own)
    update = calls[8:]
    assert len(update) == 4 and all(b == 8 for _, b in update)
    assert sum(u for u, _ in update) <= 20, update
    assert plain["kl/ref"] > 0 and plain["loss/policy"] != 0 and plain["grad/norm"] > 0
    for key in ("loss/policy", "loss/kl", "kl/ref", "kl/old", "entropy", "grad/norm", "mismatch/k3_kl", "reward/mean"):
        assert abs(shared[key] - plain[key]) <= 1e-4 * max(1.0, abs(plain[key])), (key, shared[key], plain[key])
    # AdamW's first step moves a weight by lr * g / (|g| + eps) (lr 1e-4 here): a gradient component near eps
    # carries the gradients' rounding (~1e-5 relative) into the weight at up to lr times its relative error
    worst = max(float((w_shared[k] - w_plain[k]).abs().max()) for k in w_plain)
    assert worst <= 1e-5, worst
