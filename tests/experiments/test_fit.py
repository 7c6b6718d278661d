"""The compute-curve fit (harness/experiment/fit/, docs/fit.md): recovery of known parameters, interval
coverage, refusals, the CLI's table and figure on a fake study, MLflow, and the log-spaced eval schedule."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from fit_fixture import TOKENS_PER_STEP, write_run, write_study  # noqa: E402

from harness.cli import main  # noqa: E402
from harness.config import ConfigError, load_config  # noqa: E402
from harness.experiment.fit.bootstrap import Pool, intervals  # noqa: E402
from harness.experiment.fit.data import RunCurve, read_curve  # noqa: E402
from harness.experiment.fit.sigmoid import curve, fit_points  # noqa: E402
from harness.experiment.fit.study_fit import Options, at_bound, fit_study, refusal  # noqa: E402
from harness.train.eval.evaluate import is_eval_step  # noqa: E402

TRUTH = {"r0": 0.2, "a": 0.6, "b": 1.5, "c_mid": 30.0}
STEPS = np.array([0, 1, 2, 4, 8, 16, 32, 64, 128])


def _curve(rng, noise=0.02, steps=STEPS, truth=TRUTH) -> RunCurve:
    y = curve(steps, **truth) + rng.normal(0, noise, len(steps))
    y[0] = truth["r0"]
    return RunCurve(steps, steps.astype(float), y)


@pytest.mark.parametrize("truth", [TRUTH, {"r0": 0.05, "a": 0.9, "b": 0.7, "c_mid": 5e6}])
def test_the_fit_recovers_known_parameters_from_noisy_curves(truth):
    rng = np.random.default_rng(3)
    c = np.concatenate([[0.0], np.geomspace(truth["c_mid"] / 100, truth["c_mid"] * 100, 14)])
    for _ in range(5):
        y = curve(c, **truth) + rng.normal(0, 0.01, len(c))
        y[0] = truth["r0"]
        f = fit_points(c, y, truth["r0"], True)
        assert f.a == pytest.approx(truth["a"], abs=0.02)
        assert f.b == pytest.approx(truth["b"], rel=0.25)  # B carries the most noise (the transition's few points)
        assert f.c_mid == pytest.approx(truth["c_mid"], rel=0.15)
        assert f.rmse < 0.015 and f.n == 14


def test_the_bootstrap_intervals_cover_the_truth_at_their_rate():
    """200 studies of 8 seeds, 90% intervals over seeds: each parameter's interval holds the truth 80-98%."""
    rng = np.random.default_rng(1)
    hits = np.zeros(3)
    for _ in range(200):
        pool = Pool(list(range(8)), [_curve(rng) for _ in range(8)], True)
        ci = intervals(pool, pool.fit(), 200, 0.9, rng)
        hits += [ci[k][0] <= TRUTH[k] <= ci[k][1] for k in ("a", "b", "c_mid")]
    assert all(0.80 <= h / 200 <= 0.98 for h in hits), hits / 200


def test_degenerate_curves_are_refused_with_the_reason():
    rng = np.random.default_rng(0)
    flat = RunCurve(STEPS, STEPS.astype(float), np.full(len(STEPS), 0.3))
    assert refusal(flat).startswith("flat")
    few = _curve(rng, steps=STEPS[:4])  # 3 evals after the first
    assert refusal(few).startswith("too few points: 3")
    falling = RunCurve(STEPS, STEPS.astype(float), 0.5 - 0.03 * np.arange(len(STEPS)))
    assert refusal(falling).startswith("no rise")
    bump = RunCurve(STEPS, STEPS.astype(float), np.array([0.2, 0.6, 0.5, 0.45, 0.4, 0.35, 0.3, 0.25, 0.22]))
    assert refusal(bump).startswith("no rise: the evals fall")
    assert refusal(_curve(rng)) is None
    noisy = RunCurve(STEPS, STEPS.astype(float), np.array([0.2, 0.26, 0.15, 0.24, 0.17, 0.27, 0.16, 0.26, 0.15]))
    assert refusal(noisy).startswith("no rise")
    prompts = np.tile(np.r_[0.2, 0.21, 0.2, 0.22, 0.21, 0.2, 0.22, 0.21, 0.22][:, None], (1, 16))
    prompts[:, ::2] += np.where(np.arange(9) > 0, 0.3, 0.0)[:, None]  # half the prompts rise, half fall
    prompts[:, 1::2] -= np.where(np.arange(9) > 0, 0.29, 0.0)[:, None]
    split = RunCurve(STEPS, STEPS.astype(float), prompts.mean(1), prompts)
    assert refusal(split).startswith("no rise beyond noise")  # paired over the prompts: +0.01 +- 0.07


def test_the_compute_axes_are_read_from_the_run_records(tmp_path):
    steps = [0, 1, 2, 4, 8]
    write_run(tmp_path / "r", 8, steps, np.tile(np.linspace(0.1, 0.5, 5)[:, None], (1, 4)))
    gen = read_curve(tmp_path / "r", "eval/pass_at_1", "generated_tokens")
    assert gen.steps.tolist() == steps and gen.compute.tolist() == [s * TOKENS_PER_STEP for s in steps]
    assert gen.prompts.shape == (5, 4) and gen.y == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5])
    assert read_curve(tmp_path / "r", "eval/pass_at_1", "trained_tokens").compute[-1] == 8 * TOKENS_PER_STEP
    assert read_curve(tmp_path / "r", "eval/pass_at_1", "wall_seconds").compute[-1] == 8 * 3.0  # evals left out
    flops = read_curve(tmp_path / "r", "eval/pass_at_1", "flops", params=10.0).compute[-1]
    assert flops == 8 * (6 * 10 * TOKENS_PER_STEP + 2 * 10 * TOKENS_PER_STEP)
    other = read_curve(tmp_path / "r", "eval/pass_at_1/easy", "steps")
    assert len(other.y) == 0  # a metric the run did not log: no points (refused as too few)


def _study(tmp_path) -> Path:
    d = tmp_path / "results" / "toy" / "smoke"
    d.mkdir(parents=True)
    grpo = {**TRUTH, "c_mid": 30 * TOKENS_PER_STEP}  # half the gain at step 30
    arms = {"grpo": grpo, "dapo": {**grpo, "a": 0.75}, "flat": "flat"}
    return write_study(d, arms, seeds=(1, 2, 3), steps=128, eval_steps=STEPS.tolist(), noise=0.03)


def test_fit_study_rows_refusals_and_paired_comparison(tmp_path):
    sf = fit_study(_study(tmp_path), Options(n_boot=300))
    rows = pd.DataFrame(sf.rows)
    assert len(rows) == 12  # 3 arms x (3 seeds + the pooled arm)
    grpo = rows[(rows.arm == "arm=grpo") & (rows.level == "arm")].iloc[0]
    assert grpo.status == "fit" and grpo.resampled == "seeds+prompts" and grpo.seeds == 3 and not grpo.at_bound
    assert grpo.A_lo <= TRUTH["a"] <= grpo.A_hi and grpo.A_lo < grpo.A < grpo.A_hi
    assert grpo.extrap_points == 3 and grpo.extrap_rmse < 0.05  # seeds' last evals, beyond half the compute
    flat = rows[rows.arm == "arm=flat"]
    assert set(flat.status) == {"refused"}
    assert "arm=flat, seed 2: flat" in " ".join(flat.reason)
    (cmp,) = sf.compare
    assert cmp["arm"] == "arm=dapo" and cmp["reference"] == "arm=grpo" and cmp["seeds"] == 3
    assert cmp["d_a_lo"] > 0  # dapo's asymptote is higher
    assert cmp["d_b_lo"] < 0 < cmp["d_b_hi"]  # same efficiency


def test_the_cli_writes_the_table_the_comparison_and_the_figure(tmp_path, capsys):
    d = _study(tmp_path)
    assert main(["fit", str(d), "--no-mlflow", "--bootstrap", "200", "--reference", "arm=dapo"]) == 0
    out = capsys.readouterr().out
    assert "arm=grpo - arm=dapo (3 paired seeds" in out and "arm=flat: refused" in out
    table = pd.read_csv(d / "fit.csv")
    assert {"A", "A_lo", "A_hi", "B", "C_mid", "extrap_rmse", "reason"} <= set(table.columns)
    assert pd.read_csv(d / "fit_compare.csv").arm.tolist() == ["arm=grpo"]
    assert (d / "fit.png").read_bytes()[:4] == b"\x89PNG"
    assert main(["fit", str(d), "--no-mlflow", "--compute", "steps", "--out", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / "fit_steps_eval_pass_at_1.csv").exists()


@pytest.mark.parametrize(
    "args,says",
    [
        (["--level", "1.5"], "--level 1.5"),
        (["--reference", "nope"], "--reference 'nope' is not an arm"),
        (["--metric", "reward/mean"], "--metric 'reward/mean'"),
        (["--bootstrap", "5"], "--bootstrap 5"),
    ],
)
def test_the_cli_refuses_bad_options(tmp_path, capsys, args, says):
    assert main(["fit", str(_study(tmp_path)), "--no-mlflow", *args]) == 2
    assert says in capsys.readouterr().err


def test_a_metric_no_run_logs_is_refused_naming_those_they_log(tmp_path, capsys):
    """A misspelt --metric used to fit nothing and exit 0 (every run refused for want of points)."""
    assert main(["fit", str(_study(tmp_path)), "--no-mlflow", "--metric", "eval/pass_at_99"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "harness: --metric 'eval/pass_at_99': no run of the study logs it; allowed: ['eval/pass_at_1']"


@pytest.mark.parametrize("out", ["afile", "afile/below"])
def test_an_out_that_is_or_lies_under_a_file_is_refused(tmp_path, capsys, out):
    """--out naming a file used to end in a FileExistsError traceback after the fits were computed."""
    (tmp_path / "afile").write_text("x")
    with pytest.raises(SystemExit) as done:
        main(["fit", str(_study(tmp_path)), "--no-mlflow", "--out", str(tmp_path / out)])
    assert done.value.code == 2
    assert "argument --out:" in capsys.readouterr().err


def test_fits_are_logged_to_mlflow_on_the_cells_and_the_study_run(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    from harness.experiment.fit.outputs import log_mlflow, write_outputs
    from harness.tracking.runs import RUN_ID_FILE

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    d = _study(tmp_path)
    client = MlflowClient(uri)
    exp = client.create_experiment("toy/smoke", artifact_location=str(tmp_path / "art"))
    cells = json.loads((d / "cells.json").read_text())
    for c in cells:
        (Path(c["run_dir"]) / RUN_ID_FILE).write_text(client.create_run(exp, run_name=c["id"]).info.run_id)
    opts = Options(n_boot=200)
    sf = fit_study(d, opts)
    assert log_mlflow(d, sf, opts, write_outputs(d, sf, opts), uri) == len(cells) + 1
    grpo = client.get_run((d / "runs" / "arm=grpo__seed=1" / RUN_ID_FILE).read_text())
    assert {"fit/A", "fit/A_lo", "fit/B", "fit/C_mid", "fit/extrap_rmse"} <= set(grpo.data.metrics)
    flat = client.get_run((d / "runs" / "arm=flat__seed=1" / RUN_ID_FILE).read_text())
    assert flat.data.tags["fit/status"].startswith("refused: arm=flat, seed 1: flat")
    parent = client.get_run((d / "mlflow_study_run_id").read_text())
    assert (
        math.isfinite(parent.data.metrics["fit/arm_grpo/A"]) and "fit/arm_dapo_vs_arm_grpo/d_a" in parent.data.metrics
    )
    arts = {a.path for a in client.list_artifacts(parent.info.run_id, "fit")}
    assert arts == {"fit/fit.csv", "fit/fit_compare.csv", "fit/fit.png"}


SMOKE = "experiments/runs/smoke.yaml"


def test_log_spacing_schedules_evals_evenly_in_log_compute():
    cfg = load_config(SMOKE, ["train.steps=100", "eval.spacing=log", "eval.points=8"])
    assert cfg.eval.log_steps(100) == [1, 2, 4, 7, 14, 27, 52, 100]
    evals = [s for s in range(100) if is_eval_step(cfg, s, False)]
    assert evals == [0, 1, 2, 4, 7, 14, 27, 52]  # and the final record (step 100) always
    ratios = np.diff(np.log(cfg.eval.log_steps(1000)))
    assert ratios.max() / ratios.min() < 1.6  # evenly spaced in log (where integers allow)
    small = load_config(SMOKE, ["train.steps=8", "eval.spacing=log", "eval.points=8"])
    assert small.eval.log_steps(8) == list(range(1, 9))  # distinct steps even when log spacing crowds


@pytest.mark.parametrize(
    "overrides,says",
    [
        (["eval.spacing=log", "eval.points=3"], "eval.points=3 with eval.spacing=log"),
        (["eval.spacing=log"], "eval.points=None with eval.spacing=log"),
        (["eval.spacing=log", "eval.points=50", "train.steps=20"], "allowed 4 to train.steps=20"),
        (["eval.points=6"], "eval.points=6 is read only with eval.spacing=log"),
        (["eval.spacing=cubic"], "'eval.spacing': Input should be 'every' or 'log'"),
        (["objective.preset=dpo", "eval.spacing=log", "eval.points=5"], "DPO trainer"),
    ],
)
def test_bad_eval_spacing_is_refused_before_a_model_loads(overrides, says):
    with pytest.raises(ConfigError) as err:
        load_config(SMOKE, overrides)
    assert says in str(err.value)


def test_a_study_of_one_arm_writes_a_comparison_of_nothing(tmp_path, capsys):
    d = tmp_path / "one"
    d.mkdir()
    write_study(d, {"grpo": {**TRUTH, "c_mid": 30 * TOKENS_PER_STEP}}, seeds=(1,), steps=128, eval_steps=STEPS.tolist())
    assert main(["fit", str(d), "--no-mlflow", "--bootstrap", "100"]) == 0
    cmp = pd.read_csv(d / "fit_compare.csv")
    assert len(cmp) == 0 and {"arm", "reference", "d_a"} <= set(cmp.columns)
    row = pd.read_csv(d / "fit.csv").query("level == 'arm'").iloc[0]
    assert row.resampled == "prompts" and row.A_lo < row.A < row.A_hi  # one seed: the prompts alone


def test_a_parameter_the_data_cannot_pin_is_flagged_at_its_bound():
    """A step between two evals: any B steeper than the evals can resolve fits it, so B ends on its bound."""
    c = np.concatenate([[0.0], np.geomspace(1, 1000, 8)])
    y = np.where(c > 10, 0.6, 0.2)
    pool = Pool([1], [RunCurve(np.arange(9), c, y)], True)
    assert at_bound(pool.fit(), pool) == "B"
    smooth = Pool([1], [_curve(np.random.default_rng(0), noise=0.005)], True)
    assert at_bound(smooth.fit(), smooth) == ""


def test_the_fit_figures_title_fits_its_width():
    """The title names the arms without their axis prefix while that fits, else counts them (seen: 8 arms ran
    off the figure's edge)."""
    from types import SimpleNamespace

    from harness.experiment.fit.outputs import title

    opts = SimpleNamespace(metric="eval/pass_at_1", compute="generated_tokens")
    few = SimpleNamespace(rows=[{"arm": "arm=grpo"}, {"arm": "arm=grpo"}, {"arm": "arm=dapo"}])
    assert title({"name": "s", "scale": "cpu"}, few, opts).startswith("s (cpu): grpo vs dapo\n")
    many = SimpleNamespace(rows=[{"arm": f"arm=grpo_stale{k}_long_name"} for k in range(8)])
    first = title({"name": "s", "scale": "cpu"}, many, opts).split("\n")[0]
    assert first == "s (cpu): 8 arms (legend)" and len(first) <= 80
