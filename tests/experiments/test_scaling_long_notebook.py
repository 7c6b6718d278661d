"""analysis/scaling_long.py on a FABRICATED study folder (tests/experiments/fit_fixture.py: no training, made-up
per-prompt evals around known curves): it draws its two figures and its summary row per run holds the pass@1 at
steps 0 / 22 / 60 / 100, the 60 -> 100 rise (the study's pre-set test of a bend) and the fitter's rule."""

import json

import numpy as np
from fit_fixture import write_study
from study_helpers import REPO

from harness.experiment.render import make_figures

EVAL_STEPS = [0, 1, 2, 3, 5, 8, 13, 22, 36, 60, 100]


def _evals(run):
    return {
        r["step"]: r["eval/pass_at_1"] for r in map(json.loads, open(run / "metrics.jsonl")) if "eval/pass_at_1" in r
    }


def test_scaling_long_notebook_figures_and_the_bend_test(tmp_path, monkeypatch):
    d = tmp_path / "results" / "scaling_long" / "fixture"
    d.mkdir(parents=True)
    arms = {
        "grpo": {"r0": 0.16, "a": 0.26, "b": 1.5, "c_mid": 20_000.0},  # bends inside the 100 steps
        "cispo": "flat",  # no rise: the fitter's rule refuses it
    }
    write_study(d, arms, seeds=(0, 1), steps=100, eval_steps=EVAL_STEPS, noise=0.02)
    for run in (d / "runs").iterdir():  # the mechanism's keys on every training record
        recs = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        for r in recs:
            if "reward/mean" in r:
                r.update({"clip/frac": 0.003, "ratio/max": 3.0, "kl/old": 0.001})
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    monkeypatch.chdir(tmp_path)
    out = make_figures(d, d / "figures", notebook=str(REPO / "analysis" / "scaling_long.py"), log_mlflow=False)
    assert sorted(p.stem for p in out.glob("*.png")) == ["curves", "mechanism"]
    assert all(p.stat().st_size > 10_000 for p in out.glob("*.png"))
    rows = {
        tuple(c.strip() for c in line.strip("|").split("|")[:2]): [c.strip() for c in line.strip("|").split("|")]
        for line in (out / "summary.md").read_text().splitlines()
        if line.startswith("| grpo") or line.startswith("| cispo")
    }
    assert set(rows) == {("grpo", "0"), ("grpo", "1"), ("cispo", "0"), ("cispo", "1")}
    ev = _evals(d / "runs" / "arm=grpo__seed=1")
    grpo = rows[("grpo", "1")]
    assert grpo[2] == " / ".join(f"{ev[s]:.3f}" for s in (0, 22, 60, 100))
    assert grpo[4] == f"{ev[100] - ev[60]:+.3f}" and grpo[-1] == "fit"
    assert rows[("cispo", "0")][4] == "+0.000" and rows[("cispo", "0")][-1].startswith("flat")
    assert rows[("grpo", "0")][6] == "0.0030 / 3.0 / 0.0010"
    assert np.isclose(float(grpo[3]), ev[36] - ev[22], atol=5e-4)
