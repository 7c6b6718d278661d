"""`harness compare RUN_A RUN_B`: two runs' saved evals compared prompt by prompt (harness/train/eval/compare.py).

Hand-computed: n = 4 samples, A's correct counts (1, 2, 4, 0), B's (2, 2, 4, 1).
  pass@1: A (0.25 + 0.5 + 1 + 0) / 4 = 0.4375, B (0.5 + 0.5 + 1 + 0.25) / 4 = 0.5625, B - A = 0.125.
  pass@2 = 1 - C(4-c, 2) / C(4, 2): c=0 -> 0, c=1 -> 1 - 3/6 = 0.5, c=2 -> 1 - 1/6 = 5/6, c=4 -> 1.
    A (0.5 + 5/6 + 1 + 0) / 4 = 7/12, B (5/6 + 5/6 + 1 + 0.5) / 4 = 19/24, B - A = 5/24.
"""

import json

import pytest
import yaml

from harness.cli import main
from harness.config import ConfigError
from harness.train.eval.compare import compare_runs

CFG = {
    "seed": 1,
    "task": {"name": "arithmetic", "difficulty_mix": None, "options": {}},
    "rollout": {"max_new_tokens": 48, "top_p": 1.0, "temperature": 1.4},
    "eval": {"num_prompts": 4, "seed": 0, "n_samples": 4, "temperature": 1.4, "ks": [1, 2]},
    "objective": {"preset": "grpo"},
}


def make_run(path, counts_by_step, **changes):
    cfg = json.loads(json.dumps(CFG))
    for key, value in changes.items():
        section, name = key.split("__")
        cfg[section][name] = value
    path.mkdir(parents=True)
    (path / "config.yaml").write_text(yaml.safe_dump(cfg))
    (path / "eval_prompts").mkdir()
    for step, counts in counts_by_step.items():
        pass_at_1 = [c / cfg["eval"]["n_samples"] for c in counts]
        (path / "eval_prompts" / f"step_{step:06d}.json").write_text(json.dumps({"step": step, "pass_at_1": pass_at_1}))
    return path


@pytest.fixture
def runs(tmp_path):
    a = make_run(tmp_path / "a", {0: [1, 1, 2, 0], 20: [1, 2, 4, 0]})
    b = make_run(tmp_path / "b", {0: [1, 1, 2, 0], 10: [0, 0, 0, 0], 20: [2, 2, 4, 1]})
    return a, b


def test_hand_computed_pass_at_1_and_2(runs):
    r = compare_runs(*runs)
    assert r["step"] == 20 and r["prompts"] == 4 and r["n_samples"] == 4
    p1, p2 = r["metrics"]["pass_at_1"], r["metrics"]["pass_at_2"]
    assert (p1["a"], p1["b"], p1["delta"]) == pytest.approx((0.4375, 0.5625, 0.125))
    assert (p2["a"], p2["b"], p2["delta"]) == pytest.approx((7 / 12, 19 / 24, 5 / 24))
    # every per-prompt difference is >= 0 (0.25, 0, 0, 0.25 for pass@1), so no resample's mean is below 0
    assert p1["lo"] >= 0 and p1["hi"] <= 0.25 and p1["lo"] <= p1["delta"] <= p1["hi"]


def test_same_policy_at_step_0_differs_by_nothing(runs):
    r = compare_runs(*runs, step=0, ks=[1])
    m = r["metrics"]["pass_at_1"]
    assert list(r["metrics"]) == ["pass_at_1"]
    assert (m["delta"], m["lo"], m["hi"]) == (0.0, 0.0, 0.0)


def test_default_step_is_the_last_both_saved(tmp_path):
    a = make_run(tmp_path / "a", {0: [0, 0, 0, 0], 10: [1, 1, 1, 1]})
    b = make_run(tmp_path / "b", {0: [0, 0, 0, 0], 10: [2, 2, 2, 2], 20: [4, 4, 4, 4]})
    r = compare_runs(a, b)
    assert r["step"] == 10 and r["metrics"]["pass_at_1"]["delta"] == pytest.approx(0.25)


@pytest.mark.parametrize(
    "key, value",
    [
        ("eval__seed", 1),
        ("eval__num_prompts", 8),
        ("task__name", "countdown"),
        ("eval__temperature", 1.0),
        ("eval__n_samples", 8),
    ],
)
def test_evals_that_draw_differently_are_refused(tmp_path, key, value):
    a = make_run(tmp_path / "a", {0: [1, 1, 2, 0]})
    b = make_run(tmp_path / "b", {0: [1, 1, 2, 0]}, **{key: value})
    with pytest.raises(ConfigError, match=key.replace("__", ".")):
        compare_runs(a, b)


def test_a_step_one_run_lacks_is_refused(runs):
    with pytest.raises(ConfigError, match=r"--step: 10 has no saved eval in .*a; its evals: \[0, 20\]"):
        compare_runs(*runs, step=10)


def test_k_above_n_is_refused(runs):
    with pytest.raises(ConfigError, match="--ks: 8 is outside 1..eval.n_samples = 4"):
        compare_runs(*runs, ks=[1, 8])


def test_cli_prints_the_table_and_json(runs, capsys):
    assert main(["compare", str(runs[0]), str(runs[1]), "--ks", "1"]) == 0
    out = capsys.readouterr().out
    assert "eval at step 20: 4 prompts x 4 samples" in out
    assert "pass_at_1      0.438   0.562   +0.125" in out
    assert main(["compare", str(runs[0]), str(runs[1]), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["metrics"]["pass_at_2"]["delta"] == pytest.approx(5 / 24)


def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, runs, capsys):
    assert main(["compare", str(runs[0]), str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "missing: no config.yaml" in err
