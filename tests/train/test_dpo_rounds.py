"""Iterative DPO/RPO (dpo.rounds) and several pairs per prompt (dpo.pairs_per_prompt):
round r's pairs come from the policy at its start on fresh prompts, that policy is round r's
reference, every round ends with a checkpoint, a kill inside round 1 resumes exactly."""

import json
import math

import pytest
import torch

from harness.cli import main
from harness.config import ConfigError, load_config
from harness.models import load_model
from harness.tasks import make_task
from harness.train import train
from harness.train.core.collect import step_seed
from harness.train.dpo import step as dpo_module
from harness.train.dpo.pairs import PAIRS_SALT, read_pairs
from harness.train.dpo.step import all_logps, encode_pairs
from harness.train.run.warmstart import ensure_warm_start, make_render

CONFIG = "experiments/runs/dpo.yaml"
FAST = [
    "rollout.max_new_tokens=40",
    "train.lr=2e-4",
    "train.checkpoint_every=10",
    "dpo.num_prompts=16",
    "dpo.samples_per_prompt=8",
    "dpo.pairs_per_prompt=2",
    "dpo.batch_size=4",
    "dpo.epochs=1",
    "dpo.max_steps=5",
    "dpo.rounds=2",
    "eval.every=100",
    "eval.num_prompts=8",
    "eval.n_samples=4",
    "eval.ks=[1,4]",
    "tracking.mlflow=false",
]


def _records(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def rounds_run(warm_cache, tmp_path_factory):
    out = tmp_path_factory.mktemp("dpo-rounds") / "run"
    overrides = [*FAST, f"warm_start.cache_dir={warm_cache}"]
    assert main(["train", CONFIG, *overrides, "--out", str(out)]) == 0
    return out, load_config(CONFIG, overrides)


def _round0_steps(run) -> int:
    """Optimizer steps of round 0: one epoch of its pairs in batches of 4 (FAST)."""
    return math.ceil(json.loads((run / "summary.json").read_text())["rounds"][0]["pairs"] / 4)


def test_two_rounds_have_their_own_pairs_steps_and_checkpoints(rounds_run):
    run, cfg = rounds_run
    summary = json.loads((run / "summary.json").read_text())
    r0, r1 = summary["rounds"]
    n0 = _round0_steps(run)
    assert 1 <= n0 < 5, "the test needs round 0 to end before dpo.max_steps"
    assert summary["steps"] == 5 and r0["round"] == 0 and r1["round"] == 1
    records = _records(run)
    assert [r["step"] for r in records] == list(range(6))
    assert [r["dpo/round"] for r in records[:-1]] == [0.0] * n0 + [1.0] * (5 - n0)
    assert records[n0]["pairs/count"] == r1["pairs"] == len(read_pairs(run / "pairs.round1.jsonl"))
    # round 1 draws fresh prompts, from its own seed
    task = make_task(cfg.task.name)
    want = {p.prompt for p in task.problems(cfg.dpo.num_prompts, seed=step_seed(cfg.seed, 1, PAIRS_SALT))}
    got = {p.prompt for p in read_pairs(run / "pairs.round1.jsonl")}
    assert got <= want and got != {p.prompt for p in read_pairs(run / "pairs.jsonl")}


def test_pairs_per_prompt_caps_pairs_per_prompt(rounds_run):
    run, cfg = rounds_run
    report = json.loads((run / "pairs_report.json").read_text())
    pairs = read_pairs(run / "pairs.jsonl")
    n = report["prompts_with_pairs"]
    assert (
        n + report["skipped_no_correct"] + report["skipped_no_wrong"] + report["skipped_only_truncated_wrong"]
    ) == cfg.dpo.num_prompts
    assert n < len(pairs) <= cfg.dpo.pairs_per_prompt * n, "some prompt gives 2 pairs (~20% accuracy, 8 samples)"
    task = make_task(cfg.task.name)
    problems = {p.prompt: p for p in task.problems(cfg.dpo.num_prompts, seed=step_seed(cfg.seed, 0, PAIRS_SALT))}
    for p in pairs:
        assert task.score(problems[p.prompt], p.chosen, truncated=False).correct
        assert not task.score(problems[p.prompt], p.rejected, truncated=False).correct


def test_kill_inside_round_one_resumes_exactly(rounds_run, warm_cache, tmp_path, monkeypatch):
    ref_run, _ = rounds_run
    n0 = _round0_steps(ref_run)
    cfg = load_config(CONFIG, [*FAST, f"warm_start.cache_dir={warm_cache}"])
    run = tmp_path / "killed"
    real_loss, calls = dpo_module.dpo_loss, []

    def dying_loss(*args, **kwargs):
        calls.append(1)
        if len(calls) == n0 + 1:  # round 1's first step: after round 0's closing checkpoint
            raise RuntimeError("killed")
        return real_loss(*args, **kwargs)

    monkeypatch.setattr(dpo_module, "dpo_loss", dying_loss)
    with pytest.raises(RuntimeError, match="killed"):
        train(cfg, run)
    assert [r["step"] for r in _records(run)] == list(range(n0))
    # round 0's last step is checkpointed although checkpoint_every (10) does not divide it
    ckpt = run / "checkpoints" / f"step_{n0 - 1:06d}"
    assert (run / "checkpoints" / "latest").read_text().strip() == ckpt.name
    # round 1's pairs were built before its first step, and its reference is that checkpoint's
    # policy (not the warm start, round 0's reference)
    ref = torch.load(run / "pairs_ref.round1.pt")
    policy, tok = load_model(ckpt)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    enc = encode_pairs(read_pairs(run / "pairs.round1.jsonl"), tok, make_render(tok, cfg.model.prompt_suffix))
    chosen, rejected = all_logps(policy, enc, pad, 4)
    assert torch.allclose(ref["chosen"], chosen, atol=1e-4) and torch.allclose(ref["rejected"], rejected, atol=1e-4)
    warm, _ = load_model(ensure_warm_start(cfg))
    assert not torch.allclose(ref["chosen"], all_logps(warm, enc, pad, 4)[0], atol=1e-3)
    monkeypatch.setattr(dpo_module, "dpo_loss", real_loss)
    train(cfg, run)
    got, want = _records(run), _records(ref_run)
    assert [r["step"] for r in got] == [r["step"] for r in want]
    for a, b in zip(got, want):
        for key in ("loss/policy", "rewards/margin", "logps/chosen", "eval/pass_at_1", "eval/pairs/margin"):
            if key in b:
                assert a[key] == pytest.approx(b[key], abs=1e-5), (a["step"], key)
    assert abs(got[n0]["rewards/margin"]) < 1e-4  # round 1 starts with policy == its new reference


@pytest.mark.parametrize(
    "overrides, words",
    [
        (
            ["dpo.pairs_per_prompt=5", "dpo.samples_per_prompt=8"],
            ["dpo.pairs_per_prompt=5", "samples_per_prompt // 2 = 4"],
        ),
        (["dpo.rounds=2", "dpo.pairs=some.jsonl"], ["dpo.rounds=2", "dpo.pairs=generate"]),
    ],
)
def test_bad_round_knobs_name_the_key(overrides, words):
    with pytest.raises(ConfigError) as e:
        load_config(CONFIG, overrides)
    assert all(w in str(e.value) for w in words), str(e.value)
