"""Checkable preregistration (harness/experiment/verdict/prereg.py), in a temporary git repository: the
commit the hypotheses entered at, compared with the cells' start times (run.json attempts[0].started)."""

import json
import os
import subprocess

import pytest
import yaml
from verdict_fixture import study_yaml, write_folder

from harness.experiment.results import load_index
from harness.experiment.verdict.prereg import entered, preregistration

H = {"name": "h", "metric": "eval/pass_at_1", "at": "final", "contrast": "a - b", "direction": "greater", "sesoi": 0.05}


def _git(repo, *args, when="2026-01-01T00:00:00+00:00"):
    env = {**os.environ, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path):
    _git(tmp_path, "init", "-q")
    path = study_yaml(tmp_path / "experiments" / "toy.yaml", [H])
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "hypotheses")
    return tmp_path, path


def _cells(tmp_path, started):
    _, cells = load_index(write_folder(tmp_path / "res", {"a": [0.4, 0.4], "b": [0.3, 0.3]}, started))
    return cells


def test_hypotheses_committed_before_the_first_cell_are_confirmatory(repo):
    tmp_path, path = repo
    out = preregistration(path, _cells(tmp_path, "2026-01-02T09:00:00+0000"))
    assert out["confirmatory"] is True, out["reason"]
    assert out["since"] == _git(tmp_path, "rev-parse", "HEAD").strip()
    assert out["since_time"] == "2026-01-01T00:00:00+00:00" and out["first_start"] == "2026-01-02T09:00:00+0000"
    assert out["blob"] == _git(tmp_path, "hash-object", str(path)).strip()
    assert out["cell_starts"]["arm=a__seed=1"] == "2026-01-02T09:00:00+0000"


def test_hypotheses_committed_after_the_first_cell_are_exploratory(repo):
    tmp_path, path = repo
    out = preregistration(path, _cells(tmp_path, "2025-12-31T23:59:59+0000"))
    assert out["confirmatory"] is False and out["reason"].startswith("hypotheses changed after the first cell started")


def test_the_commit_is_the_oldest_with_the_current_hypotheses(repo):
    tmp_path, path = repo
    first = _git(tmp_path, "rev-parse", "HEAD").strip()
    raw = yaml.safe_load(path.read_text())
    raw["description"] = "another line, the hypotheses as they were"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    _git(tmp_path, "commit", "-qam", "description", when="2026-01-03T00:00:00+00:00")
    assert entered(path)[0] == first  # a change elsewhere in the file leaves the hypotheses' commit
    raw["hypotheses"][0]["sesoi"] = 0.01
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    _git(tmp_path, "commit", "-qam", "sesoi", when="2026-01-05T00:00:00+00:00")
    since, when = entered(path)
    assert since == _git(tmp_path, "rev-parse", "HEAD").strip() and when == "2026-01-05T00:00:00+00:00"
    out = preregistration(path, _cells(tmp_path, "2026-01-04T00:00:00+0000"))  # cells ran before the sesoi changed
    assert out["confirmatory"] is False and "changed after the first cell started" in out["reason"]


def test_uncommitted_hypotheses_are_exploratory(repo):
    tmp_path, path = repo
    raw = yaml.safe_load(path.read_text())
    raw["hypotheses"][0]["direction"] = "two-sided"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    out = preregistration(path, _cells(tmp_path, "2026-01-02T00:00:00+0000"))
    assert out["confirmatory"] is False and out["reason"].startswith("not committed")
    loose = study_yaml(tmp_path / "experiments" / "loose.yaml", [H])  # never added to git
    out = preregistration(loose, _cells(tmp_path / "l", "2026-01-02T00:00:00+0000"))
    assert (out["confirmatory"], out["reason"], out["since"]) == (False, "not committed", None)


def test_a_file_without_hypotheses_and_a_cell_without_a_start(repo, tmp_path):
    tmp_path, path = repo
    bare = study_yaml(tmp_path / "experiments" / "bare.yaml", [H])
    raw = yaml.safe_load(bare.read_text())
    del raw["hypotheses"]
    bare.write_text(yaml.safe_dump(raw))
    assert preregistration(bare, [])["reason"] == "no hypotheses"
    cells = _cells(tmp_path, "2026-01-02T00:00:00+0000")
    (tmp_path / "res" / "runs" / "arm=b__seed=2" / "run.json").unlink()
    out = preregistration(path, cells)
    assert out["confirmatory"] is False and out["reason"].endswith("start time: arm=b__seed=2")


def test_the_report_record_carries_the_preregistration(repo):
    """`harness reproduce STUDY --write-record` writes the same preregistration beside the cells' numbers."""
    from harness.experiment import reproduce as rp

    tmp_path, path = repo
    write_folder(tmp_path / "results" / "toy" / "smoke", {"a": [0.4, 0.4], "b": [0.3, 0.3]}, "2026-01-02T00:00:00+0000")
    out = rp.write_record(str(path), "smoke", tmp_path / "results", out=tmp_path / "record.json")
    prereg = json.loads(out.read_text())["preregistration"]
    assert prereg["confirmatory"] is True and prereg["since"] == _git(tmp_path, "rev-parse", "HEAD").strip()
    assert prereg["blob"] == _git(tmp_path, "hash-object", str(path)).strip()


def test_the_verdict_says_confirmatory_at_the_top(repo, capsys):
    from harness.cli import main

    tmp_path, path = repo
    write_folder(
        tmp_path / "results" / "toy" / "smoke", {"a": [0.4, 0.42], "b": [0.3, 0.3]}, "2026-01-02T00:00:00+0000"
    )
    assert main(["verdict", str(path), "--results", str(tmp_path / "results")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].startswith("**CONFIRMATORY**: hypotheses committed at ") and "before the first cell" in lines[2]
    assert main(["verdict", str(path), "--results", str(tmp_path / "results"), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["preregistration"]["confirmatory"] is True and payload["hypotheses"][0]["n"] == 2
