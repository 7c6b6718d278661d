"""Summary table and generic figures from run folders (fake runs: no training)."""

from __future__ import annotations

import json
import math

import pytest

from harness.experiment.generic_figures import curves
from harness.experiment.render import make_figures
from harness.experiment.stats import t_interval
from harness.experiment.summary import summary_table, write_csv


@pytest.fixture
def study_dir(tmp_path):
    d = tmp_path / "results" / "toy" / "smoke"
    cells = []
    for arm in ("grpo", "dapo"):
        for seed in (1, 2, 3):
            cid = f"preset={arm}__seed={seed}"
            run = d / "runs" / cid
            run.mkdir(parents=True)
            recs = []
            for step in range(5):
                r = {
                    "step": step,
                    "reward/mean": 0.1 * step,
                    "reward/accuracy": 0.1 * step,
                    "length/mean": 20 + step,
                    "length/correct": 15 + step,
                    "length/incorrect": 30 + seed,
                    "length/truncated_frac": 0.1,
                }
                if step % 2 == 0:
                    r["eval/pass_at_1"] = 0.1 * step + 0.01 * seed + (0.2 if arm == "dapo" else 0)
                recs.append(r)
            recs.append({"step": 5, "eval/pass_at_1": 0.6 + 0.01 * seed, "eval/pass_at_2": 0.7})
            (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
            (run / "summary.json").write_text(
                json.dumps(
                    {
                        "steps": 5,
                        "wall_seconds": 12.5,
                        "initial_eval": {"eval/pass_at_1": 0.01 * seed},
                        "final_eval": {"eval/pass_at_1": 0.6 + 0.01 * seed},
                        "paired_rise": {"delta_pass_at_1": 0.05 * seed, "ci95": [0.01 * seed, 0.1 * seed]},
                    }
                )
            )
            (run / "eval.json").write_text(
                json.dumps(
                    {
                        "eval/pass_at_1": 0.55,
                        "eval/pass_at_8": 0.9,
                        "eval/pass_at_1/easy": 0.8,
                        "eval/pass_at_1/hard": 0.2,
                    }
                )
            )
            cells.append(
                {
                    "id": cid,
                    "variant": f"preset={arm}",
                    "axes": {"objective.preset": arm, "seed": seed},
                    "seed": seed,
                    "run_dir": str(run),
                }
            )
    (d / "cells.json").write_text(json.dumps(cells))
    (d / "study.json").write_text(
        json.dumps(
            {
                "name": "toy",
                "scale": "smoke",
                "experiment": "toy/smoke",
                "axes": ["objective.preset", "seed"],
                "seeds": [1, 2, 3],
            }
        )
    )
    return d


def test_summary_table_one_row_per_cell(study_dir):
    df = summary_table(study_dir)
    assert len(df) == 6
    row = df[df.cell == "preset=grpo__seed=2"].iloc[0]
    assert row["objective.preset"] == "grpo" and row["seed"] == 2
    assert row.initial_pass_at_1 == pytest.approx(0.02) and row.final_pass_at_1 == pytest.approx(0.55)
    assert row.final_pass_at_k == pytest.approx(0.9) and row.k == 8
    assert row.mean_length_incorrect == pytest.approx(32) and row.mean_length_correct == pytest.approx(17)
    assert row.final_pass_at_1_hard == pytest.approx(0.2) and row.wall_seconds == pytest.approx(12.5)
    assert (row.paired_rise_pass_at_1, row.paired_rise_ci95_lo, row.paired_rise_ci95_hi) == pytest.approx(
        (0.1, 0.02, 0.2)
    )
    out = write_csv(study_dir, study_dir / "summary.csv")
    assert out.read_text().splitlines()[0].startswith("cell,variant,objective.preset,seed")


def test_t_interval_and_curves(study_dir):
    m, h = t_interval([1.0, 2.0, 3.0])
    assert m == pytest.approx(2.0) and h == pytest.approx(4.302653 * 1 / math.sqrt(3), rel=1e-5)
    assert t_interval([5.0]) == (5.0, 0.0)
    c = curves(json.loads((study_dir / "cells.json").read_text()), "eval/pass_at_1")
    assert set(c) == {"preset=grpo", "preset=dapo"}
    assert c["preset=grpo"]["steps"] == [0, 2, 4, 5] and c["preset=grpo"]["n"] == 3
    assert c["preset=dapo"]["mean"][1] == pytest.approx(0.2 + 0.2 + 0.02)


def test_generic_figures_written_atomically(study_dir):
    out = make_figures(study_dir, study_dir / "figures", log_mlflow=False)
    assert sorted(p.name for p in out.iterdir()) == ["eval_pass_at_1.png", "lengths.png"]
    assert not list(study_dir.glob(".figures.tmp*"))


def test_notebook_gets_the_study_folder(study_dir, tmp_path):
    nb = tmp_path / "nb.py"
    nb.write_text(
        "# %%\nimport os, pathlib\n"
        "d = pathlib.Path(os.environ['HARNESS_FIGURES_DIR'])\n"
        "assert (pathlib.Path(os.environ['HARNESS_STUDY_DIR']) / 'cells.json').exists()\n"
        "(d / 'custom.png').write_bytes(b'png')\n"
    )
    out = make_figures(study_dir, study_dir / "figures", notebook=str(nb), log_mlflow=False)
    assert [p.name for p in out.iterdir()] == ["custom.png"]
