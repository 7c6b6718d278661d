"""Bad input to every `harness` subcommand ends in one message and exit status 2, with a
traceback only under --debug; `harness eval` and `harness summarize` check their paths."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from harness.cli import main

SMOKE = "experiments/runs/smoke.yaml"


def _bad_config(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("train:\n  steps: 3\n  steps: 4\n")
    return p


@pytest.mark.parametrize(
    "argv",
    [
        ["config", "{bad}"],
        ["config", SMOKE, "train.steps=["],
        ["train", "{bad}", "--out", "{tmp}/run"],
        ["warmstart", "{bad}"],
        ["grid", "{bad_study}", "--list"],
        ["tune", "{bad_study}"],
    ],
)
def test_config_errors_exit_2_without_traceback(tmp_path, capsys, argv):
    bad_study = tmp_path / "study.yaml"
    bad_study.write_text("base: {train: {steps: 2}}\nseeds: [0]\nseeds: [1]\n")
    argv = [a.format(bad=_bad_config(tmp_path), bad_study=bad_study, tmp=tmp_path) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("harness: ") and "Traceback" not in err and "duplicate" in err or "YAML" in err, err


def test_debug_flag_shows_the_traceback(tmp_path):
    from harness.config import ConfigError

    with pytest.raises(ConfigError):
        main(["--debug", "config", str(_bad_config(tmp_path))])
    with pytest.raises(ConfigError):  # also after the subcommand
        main(["config", str(_bad_config(tmp_path)), "--debug"])


def test_debug_flag_for_study_and_bench_commands(tmp_path, monkeypatch):
    import harness.bench.cli as bench_cli
    from harness.experiment import StudyError

    study = tmp_path / "study.yaml"
    study.write_text("base: {train: {steps: 2}}\nseeds: [0]\nseeds: [1]\n")
    with pytest.raises(StudyError):
        main(["--debug", "grid", str(study)])
    with pytest.raises(StudyError):
        main(["summarize", "/missing/dir", "--debug"])
    monkeypatch.setattr(bench_cli, "_case", lambda *a, **k: (_ for _ in ()).throw(AssertionError("ran")))
    with pytest.raises(ValueError, match="--models"):
        main(["--debug", "bench", "--models", "gpt-17", "--no-trl"])


def test_subprocess_exit_status_and_stderr(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run(
        [sys.executable, "-m", "harness.cli", "config", SMOKE, "train.steps=["],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr and "train.steps=[" in r.stderr, r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "harness.cli", "--debug", "config", SMOKE, "train.steps=["],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode != 0 and "Traceback" in r.stderr


def test_eval_of_a_missing_folder(tmp_path, capsys):
    missing = tmp_path / "nope"
    assert main(["eval", str(missing)]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "Traceback" not in err
    assert not missing.exists()


def test_eval_of_a_folder_without_a_run(tmp_path, capsys):
    assert main(["eval", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "config.yaml" in err and "Traceback" not in err


@pytest.mark.parametrize("flag", ["--n-samples", "--num-prompts"])
@pytest.mark.parametrize("value", ["0", "-2"])
def test_eval_counts_must_be_positive(tmp_path, capsys, flag, value):
    with pytest.raises(SystemExit) as e:
        main(["eval", str(tmp_path), flag, value])
    assert e.value.code == 2
    assert flag in capsys.readouterr().err


def test_eval_run_refuses_a_zero_sample_count(tmp_path):
    from harness.config import ConfigError
    from harness.train.run.final_eval import eval_run

    with pytest.raises(ConfigError, match="n_samples"):
        eval_run(tmp_path, n_samples=0)


def test_summarize_a_missing_folder(capsys):
    assert main(["summarize", "/missing/dir"]) == 2
    err = capsys.readouterr().err
    assert "/missing/dir" in err and "experiments//" not in err and "Traceback" not in err


def test_summarize_a_folder_without_cells(tmp_path, capsys):
    assert main(["summarize", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "cells.json" in err and "looked for" not in err


@pytest.mark.parametrize("flag", ["--prompts", "--group-size", "--max-new-tokens", "--checkpoint-every", "--steps"])
def test_bench_counts_must_be_positive(monkeypatch, capsys, flag):
    import harness.bench.cli as bench_cli

    def never(*a, **k):
        raise AssertionError("a benchmark case ran")

    monkeypatch.setattr(bench_cli, "_case", never)  # a silently ignored 0 would run the full workload
    with pytest.raises(SystemExit) as e:
        main(["bench", "--models", "tiny-dense", "--backends", "hf", "--no-trl", flag, "0"])
    assert e.value.code == 2 and flag in capsys.readouterr().err


def test_bench_unknown_model_exits_2(monkeypatch, capsys):
    import harness.bench.cli as bench_cli

    monkeypatch.setattr(bench_cli, "_case", lambda *a, **k: (_ for _ in ()).throw(AssertionError("ran")))
    assert main(["bench", "--models", "gpt-17", "--no-trl"]) == 2
    err = capsys.readouterr().err
    assert "--models" in err and "Traceback" not in err


def test_mlflow_sync_of_a_folder_without_cells_json_is_a_clean_error(tmp_path, capsys, monkeypatch):
    """Checked before anything is written to MLflow: exit 2, the folder named, no traceback."""
    from harness.cli import main

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    (tmp_path / "not_a_study").mkdir()
    assert main(["mlflow-sync", str(tmp_path / "not_a_study")]) == 2
    err = capsys.readouterr().err
    assert "not_a_study" in err and "cells.json" in err and "Traceback" not in err
    assert not (tmp_path / "mlflow.db").exists()
