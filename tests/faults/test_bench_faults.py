"""benchmarks/faults.py: the step accounting (fast) and a 2-trial run on the smallest config
(slow: six `harness train` subprocesses). Figures only: no timing is asserted."""

from __future__ import annotations

import pytest

from harness.bench.faults import count_steps, main, render


def test_count_steps_finds_lost_and_duplicated():
    assert count_steps([0, 1, 2, 3], 3) == {"lost": 0, "duplicated": 0}
    assert count_steps([0, 1, 1, 3], 3) == {"lost": 1, "duplicated": 1}
    assert count_steps([], 2) == {"lost": 3, "duplicated": 0}


def test_render_counts_a_trial_with_a_lost_step_as_not_survived():
    row = {
        "trial": 0,
        "kills": 1,
        "killed_after": [(1, 0.1)],
        "attempts": 2,
        "finished": True,
        "lost_file": 1,
        "lost_mlflow": 0,
        "dup_file": 0,
        "dup_mlflow": 0,
        "wall_s": 30.0,
        "overhead_s": 10.0,
        "error": None,
    }
    out = render(
        {"reference_wall_s": 20.0, "step_s": 0.2, "rows": [row, {**row, "trial": 1, "lost_file": 0}]}, "SIGKILL"
    )
    assert "kills survived: 1/2" in out and "steps lost: 1 in metrics.jsonl, 0 in MLflow" in out


@pytest.mark.slow
def test_two_trials_on_the_smallest_config(capsys):
    assert main(["--trials", "2", "--steps", "4", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    import re

    survived, kills = map(int, re.search(r"kills survived: (\d+)/(\d+)", out).groups())
    assert kills >= 1 and survived == kills, out
    assert (
        "steps lost: 0 in metrics.jsonl, 0 in MLflow" in out
        and "steps duplicated: 0 in metrics.jsonl, 0 in MLflow" in out
    )
    assert "wall overhead of resume: mean" in out
