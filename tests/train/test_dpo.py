"""DPO trainer (harness/train/dpo/step.py): pairs from the warm start, a few steps that move the
policy and grow the margin, the JSONL reader's errors, resume (after a kill and after the end)."""

import json
import math

import pytest
import torch
from safetensors.torch import load_file

from harness.cli import main
from harness.config import load_config
from harness.tasks import make_task
from harness.train import train
from harness.train.core.collect import step_seed
from harness.train.dpo import step as dpo_module
from harness.train.dpo.pairs import PAIRS_SALT, PairsFileError, PreferencePair, read_pairs, write_pairs
from harness.train.run.eval_cache import eval_cache_path, load_eval
from harness.train.run.warmstart import ensure_warm_start

CONFIG = "experiments/runs/dpo.yaml"  # its warm start is the smoke config's (shared cache, tests/conftest.py)
FAST = [
    "rollout.max_new_tokens=40",
    "train.lr=2e-4",
    "train.checkpoint_every=2",
    "dpo.num_prompts=16",
    "dpo.samples_per_prompt=8",
    "dpo.batch_size=4",
    "dpo.epochs=10",
    "dpo.max_steps=4",
    "dpo.rounds=1",  # offline DPO (iterative rounds: test_dpo_rounds.py)
    "eval.every=2",
    "eval.num_prompts=8",
    "eval.n_samples=4",
    "eval.ks=[1,4]",
    "tracking.mlflow=false",
]


def _records(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def dpo_run(warm_cache, tmp_path_factory):
    """One short DPO run through the CLI (objective.preset=dpo dispatches to the DPO trainer)."""
    out = tmp_path_factory.mktemp("dpo") / "run"
    overrides = [*FAST, f"warm_start.cache_dir={warm_cache}"]
    assert main(["train", CONFIG, *overrides, "--out", str(out)]) == 0
    return out, load_config(CONFIG, overrides)


def test_dpo_config_is_accepted():
    cfg = load_config("experiments/runs/smoke.yaml", ["objective.preset=dpo", "dpo.pairs=some/file.jsonl"])
    assert cfg.objective.algorithm == "dpo" and cfg.dpo.pairs == "some/file.jsonl"
    assert load_config(CONFIG).objective.algorithm == "dpo"


def test_generated_pairs_are_correct_vs_wrong(dpo_run):
    run, cfg = dpo_run
    report = json.loads((run / "pairs_report.json").read_text())
    pairs = read_pairs(run / "pairs.jsonl")  # the saved file is itself a valid dpo.pairs input
    assert report["pairs"] == len(pairs) >= report["prompts_with_pairs"] >= 1
    assert (
        report["prompts_with_pairs"]
        + report["skipped_no_correct"]
        + report["skipped_no_wrong"]
        + report["skipped_only_truncated_wrong"]
    ) == cfg.dpo.num_prompts
    task = make_task(cfg.task.name)
    prompts = {p.prompt: p for p in task.problems(cfg.dpo.num_prompts, seed=step_seed(cfg.seed, 0, PAIRS_SALT))}
    for pair in pairs:
        problem = prompts[pair.prompt]  # a train-split prompt of the pair-building draw
        assert pair.difficulty == problem.difficulty
        assert task.score(problem, pair.chosen, truncated=False).correct, pair
        assert not task.score(problem, pair.rejected, truncated=False).correct, pair
    assert _records(run)[0]["pairs/count"] == len(pairs)


def test_dpo_steps_move_the_policy_and_grow_the_margin(dpo_run):
    run, cfg = dpo_run
    before = load_file(str(ensure_warm_start(cfg) / "model.safetensors"))
    after = load_file(str(run / "checkpoints" / "step_000004" / "model.safetensors"))
    changed = sum(not torch.equal(before[k], after[k]) for k in before)
    assert changed >= len(before) // 2, f"only {changed}/{len(before)} tensors changed"

    records = _records(run)
    assert [r["step"] for r in records] == [0, 1, 2, 3, 4]
    train_recs = records[:-1]
    for r in train_recs:
        for key in (
            "loss/policy",
            "rewards/chosen",
            "rewards/rejected",
            "rewards/margin",
            "rewards/accuracy",
            "logps/chosen",
            "logps/rejected",
            "perf/step_seconds",
            "perf/elapsed_seconds",
        ):
            assert key in r and math.isfinite(r[key]), (r["step"], key, r.get(key))
    assert abs(train_recs[0]["rewards/margin"]) < 1e-4  # step 0: policy == reference
    assert train_recs[0]["loss/dpo"] == pytest.approx(math.log(2), abs=1e-4)  # -log sigma(0)
    coef = cfg.objective.dpo_sft_coef  # dpo.yaml adds RPO's NLL term on the chosen answer
    for r in train_recs:
        assert r["loss/policy"] == pytest.approx(r["loss/dpo"] + coef * r.get("loss/sft", 0.0), abs=1e-5)
    assert train_recs[-1]["rewards/margin"] > 0.05
    # the margin over ALL pairs, at the periodic evals (steps 0, 2) and the end (4), grows
    margins = [r["eval/pairs/margin"] for r in records if "eval/pairs/margin" in r]
    assert len(margins) == 3 and abs(margins[0]) < 1e-4 and margins[0] < margins[1] < margins[2]
    evals = [r["step"] for r in records if "eval/pass_at_1" in r]
    assert evals == [0, 2, 4]
    assert "perf/elapsed_seconds" in records[-1] and "loss/policy" not in records[-1]

    summary = json.loads((run / "summary.json").read_text())
    assert summary["algorithm"] == "dpo" and summary["steps"] == 4 and summary["pairs"]["pairs"] >= 1
    assert "eval/pass_at_1" in summary["initial_eval"] and "eval/pass_at_1" in summary["final_eval"]


def test_step0_eval_is_the_warm_starts_cached_eval(dpo_run):
    """DPO's step-0 eval goes through the same warm-start eval cache as the RL loop's."""
    run, cfg = dpo_run
    cached = load_eval(eval_cache_path(cfg, ensure_warm_start(cfg)))
    assert cached is not None
    first = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
    assert {k: v for k, v in first.items() if k in cached[0]} == cached[0]
    assert json.loads((run / "eval_prompts" / "step_000000.json").read_text())["pass_at_1"] == cached[1]


def test_resume_after_completed_run_is_a_noop(dpo_run, capsys):
    run, cfg = dpo_run
    files = {p: p.read_bytes() for p in (run / "metrics.jsonl", run / "summary.json", run / "pairs.jsonl")}
    summary = train(cfg, run)
    assert "nothing to do" in capsys.readouterr().out
    assert summary == json.loads(files[run / "summary.json"])
    assert all(p.read_bytes() == data for p, data in files.items())


def test_killed_run_resumes_without_lost_or_duplicated_steps(dpo_run, warm_cache, tmp_path, monkeypatch):
    """Pairs read from a file (the first run's); die in step 3 (checkpoint at step 1), rerun:
    steps 0..4 logged once and equal to the uninterrupted run. (MLflow dedupe on resume is the
    tracker's, tested with the RL loop in test_resume.py; a fresh sqlite store costs too long here.)"""
    ref_run, _ = dpo_run
    cfg = load_config(CONFIG, [*FAST, f"warm_start.cache_dir={warm_cache}", f"dpo.pairs={ref_run / 'pairs.jsonl'}"])
    run = tmp_path / "killed"
    real_loss, calls = dpo_module.dpo_loss, []

    def dying_loss(*args, **kwargs):
        calls.append(1)
        if len(calls) == 4:  # in step 3, after the checkpoint of step 1 (checkpoint_every=2)
            raise RuntimeError("killed")
        return real_loss(*args, **kwargs)

    monkeypatch.setattr(dpo_module, "dpo_loss", dying_loss)
    with pytest.raises(RuntimeError, match="killed"):
        train(cfg, run)
    assert [r["step"] for r in _records(run)] == [0, 1]
    assert (run / "pairs.jsonl").read_text() == (ref_run / "pairs.jsonl").read_text()
    monkeypatch.setattr(dpo_module, "dpo_loss", real_loss)
    train(cfg, run)

    got, want = _records(run), _records(ref_run)
    assert [r["step"] for r in got] == [0, 1, 2, 3, 4]
    for a, b in zip(got, want):
        for key in ("loss/policy", "rewards/margin", "logps/chosen", "eval/pass_at_1", "eval/pairs/margin"):
            if key in b:
                assert a[key] == pytest.approx(b[key], abs=1e-5), (a["step"], key)


# ----------------------------------------------------------------------------- the JSONL reader

GOOD = {"prompt": "1+2=?\n", "chosen": "1+2=3\nAnswer: 3", "rejected": "1+2=4\nAnswer: 4", "difficulty": "easy"}


def _write(tmp_path, *lines):
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


@pytest.mark.parametrize(
    "bad, line, words",
    [
        ({k: v for k, v in GOOD.items() if k != "rejected"}, 2, ["'rejected'", "missing"]),
        ({**GOOD, "difficulty": 3}, 2, ["'difficulty'", "non-empty string"]),
        ({**GOOD, "chosen": "  "}, 2, ["'chosen'", "non-empty string"]),
        ({**GOOD, "rejected": GOOD["chosen"]}, 2, ["'rejected'", "'chosen'"]),
        ("{not json", 2, ["not valid JSON"]),
        ('["a", "b"]', 2, ["JSON object"]),
    ],
)
def test_reader_names_line_and_field(tmp_path, bad, line, words):
    path = _write(tmp_path, GOOD, bad)
    with pytest.raises(PairsFileError) as e:
        read_pairs(path)
    msg = str(e.value)
    assert f"line {line}" in msg and str(path) in msg, msg
    assert all(w in msg for w in words), msg


def test_reader_round_trip_blank_lines_and_missing_file(tmp_path):
    pairs = [PreferencePair(**GOOD), PreferencePair(**{**GOOD, "rejected": "oops"})]
    write_pairs(tmp_path / "p.jsonl", pairs)
    assert read_pairs(tmp_path / "p.jsonl") == pairs
    path = _write(tmp_path, GOOD, "", {**GOOD, "extra": 1}, "", {**GOOD, "prompt": None})
    with pytest.raises(PairsFileError, match="line 5: field 'prompt'"):  # blank lines still count
        read_pairs(path)
    with pytest.raises(PairsFileError, match="no such file"):
        read_pairs(tmp_path / "absent.jsonl")
    with pytest.raises(PairsFileError, match="no preference pairs"):
        read_pairs(_write(tmp_path, ""))


def test_cli_rejects_a_bad_pairs_file_before_loading_a_model(tmp_path, capsys):
    path = _write(tmp_path, GOOD, {**GOOD, "chosen": 7})
    code = main(
        ["train", CONFIG, f"dpo.pairs={path}", "dpo.rounds=1", "tracking.mlflow=false", "--out", str(tmp_path / "run")]
    )
    err = capsys.readouterr().err
    assert code == 2 and "line 2" in err and "'chosen'" in err, err
    assert not (tmp_path / "run" / "config.yaml").exists()
