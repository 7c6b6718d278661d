"""train.pad_to_multiple_of through a run (harness/train/core/scoring.py, forward.py, harness/models/value.py): every
trainer forward packed to the multiple, and the step's numbers those of the unpadded run to rounding."""

import json

import pytest

import harness.models.logprobs as lp
from harness.train import train


def _records(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize(
    "preset, extra",
    [
        ("grpo", []),
        ("ppo", []),
        ("grpo", ["model.name=tiny-moe", "train.old_logp=recompute", "objective.routing_replay=true"]),
    ],
)
def test_a_run_padded_computes_what_it_computes_unpadded(preset, extra, fast_config, tmp_path, monkeypatch):
    """One step each way (ppo: the critic's forwards too; an MoE: the router's old/new comparison on the same
    packing): the same losses, KL, entropy, values and router metrics to rounding, every trainer forward packed to
    the multiple (fails if the knob is not wired to the score, the update, the critic or the router's forward)."""
    seen = []
    pack = lp.pack

    def spy(*a, **kw):
        ids, att, index = pack(*a, **kw)
        seen.append(ids.shape[1])
        return ids, att, index

    monkeypatch.setattr(lp, "pack", spy)
    import harness.models.value as value

    monkeypatch.setattr(value, "pack", spy)
    runs = {}
    for m in (1, 16):
        seen.clear()
        cfg = fast_config(f"objective.preset={preset}", "train.steps=1", f"train.pad_to_multiple_of={m}", *extra)
        train(cfg, tmp_path / f"run{m}")
        runs[m] = (_records(tmp_path / f"run{m}")[0], list(seen))
    (plain, plain_widths), (padded, padded_widths) = runs[1], runs[16]
    assert padded_widths and all(w % 16 == 0 for w in padded_widths), padded_widths
    assert any(w % 16 for w in plain_widths)  # the workload's own widths are no multiple of 16 (else: no test)
    assert len(padded_widths) == len(plain_widths)  # the same forwards, each padded
    assert padded["perf/batch_width"] % 16 == 0 and padded["perf/batch_width"] >= plain["perf/batch_width"]
    keys = ["loss/policy", "entropy", "reward/mean", "grad/norm", "ratio/mean"]
    keys += [k for k in plain if k.startswith(("kl", "value/", "loss/value", "router/"))]
    for key in keys:
        assert padded[key] == pytest.approx(plain[key], rel=1e-4, abs=1e-6), key
