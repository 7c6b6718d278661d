"""The reward-hacking probe (harness/train/diagnostics/hacking.py): it fires on a synthetic diverging pair
of series (the reward model's score up, the verified accuracy down) and not on a rising pair; its
correlation and gap trend by hand; its history survives a checkpoint."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from harness.train.diagnostics.hacking import HackingProbe, correlation, hacking_probe, slope, trend_t

B = 8


def step_of(proxy_mean: float, n_correct: int):
    """A step's (scores, correct): n_correct of B right; the proxy scores spread around proxy_mean."""
    correct = torch.arange(B) < n_correct
    offsets = torch.linspace(-0.5, 0.5, B)
    scores = [SimpleNamespace(parts={"rm": proxy_mean + float(o)}) for o in offsets]
    return scores, correct


def run(probe: HackingProbe, proxies: list[float], corrects: list[int]) -> list[dict]:
    return [probe.step(*step_of(p, c)) for p, c in zip(proxies, corrects)]


def test_the_probe_fires_once_on_a_diverging_pair(capsys):
    probe = HackingProbe("rm", window=5)
    recs = run(probe, [0.1 * t for t in range(10)], [7, 7, 6, 6, 5, 5, 4, 3, 3, 2])
    lines = [x for x in capsys.readouterr().out.splitlines() if "reward hacking" in x]
    assert len(lines) == 1 and "reward/rm" in lines[0] and "rose" in lines[0] and "fell" in lines[0]
    assert probe.warned
    assert all(r["hacking/gap_trend"] > 0 for r in recs[1:])
    assert recs[3]["hacking/proxy"] == pytest.approx(0.3) and recs[3]["hacking/verified"] == 6 / 8


def test_the_probe_does_not_fire_on_a_rising_pair(capsys):
    probe = HackingProbe("rm", window=5)
    recs = run(probe, [0.1 * t for t in range(10)], [1, 1, 2, 2, 3, 4, 4, 5, 6, 6])
    assert "reward hacking" not in capsys.readouterr().out and not probe.warned
    assert max(abs(r["hacking/gap_trend"]) for r in recs[4:]) < 0.2  # a full window: the z-scores move together


def feed(probe: HackingProbe, proxies: list[float], verified: list[float]) -> None:
    """Steps whose mean proxy and mean verified accuracy are the given ones (B = 256 completions)."""
    for p, v in zip(proxies, verified):
        n = round(v * 256)
        probe.step([SimpleNamespace(parts={"rm": p})] * 256, torch.arange(256) < n)


# the first 8 steps of two kl_leash runs (second design, seed 1): the verifier control, whose proxy only
# wanders (slopes +0.022 and -0.005 a step: the sign-only rule warned on all 12 control runs), and rm_kl0
VERIFIER = ([-2.688, -3.01, -2.901, -2.624, -2.64, -2.727, -2.411, -2.919], [86, 74, 78, 56, 58, 72.5, 73, 73])
HACKED = ([-2.688, -2.482, -1.499, -0.839, 0.353, 1.81, 2.521, 2.844], [86, 65, 52.5, 38, 22.5, 16.5, 7, 9])


def test_the_probe_warns_on_a_hacked_run_and_not_on_noise(capsys):
    for (proxies, right), warns in ((VERIFIER, False), (HACKED, True)):
        probe = HackingProbe("rm", window=8)
        feed(probe, proxies, [r / 256 for r in right])
        assert probe.warned is warns
    assert sum("reward hacking" in x for x in capsys.readouterr().out.splitlines()) == 1


def test_trend_t_by_hand():
    # ys = 0, 2, 1, 3: slope 0.8, residuals -0.3, 0.9, -0.9, 0.3 (SSR 1.8), Sxx 5: t = 0.8 / sqrt(1.8 / 2 / 5)
    assert trend_t([0.0, 2.0, 1.0, 3.0]) == pytest.approx(0.8 / math.sqrt(1.8 / 2 / 5))
    assert trend_t([1.0, 2.0, 3.0]) == math.inf and trend_t([3.0, 2.0, 1.0]) == -math.inf
    assert trend_t([1.0, 1.0, 1.0]) == 0.0 and trend_t([1.0, 5.0]) == 0.0


def test_the_probe_waits_for_a_full_window(capsys):
    probe = HackingProbe("rm", window=6)
    run(probe, [0.0, 1.0, 2.0, 3.0, 4.0], [8, 6, 4, 2, 0])  # diverging, but 5 steps of a 6-step window
    assert "reward hacking" not in capsys.readouterr().out


def test_correlation_and_slope_by_hand():
    right = torch.tensor([1.0, 0.0, 1.0, 0.0])
    assert correlation(2 * right + 1, right) == pytest.approx(1.0)
    assert correlation(-right, right) == pytest.approx(-1.0)
    assert math.isnan(correlation(torch.ones(4), right))
    assert slope([1.0, 3.0, 5.0]) == pytest.approx(2.0) and slope([4.0]) == 0.0
    scores, correct = step_of(0.0, 4)
    rec = HackingProbe("rm", 3).step(scores, correct)
    proxy = torch.tensor([s.parts["rm"] for s in scores])
    assert rec["hacking/corr"] == pytest.approx(float(torch.corrcoef(torch.stack([proxy, correct.float()]))[0, 1]))


def test_a_resumed_probe_warns_as_the_uninterrupted_one(capsys):
    proxies, corrects = [0.1 * t for t in range(8)], [7, 7, 6, 6, 5, 5, 4, 3]
    whole = run(HackingProbe("rm", 5), proxies, corrects)
    first = HackingProbe("rm", 5)
    part = run(first, proxies[:3], corrects[:3])
    second = HackingProbe("rm", 5)
    second.load_state_dict(first.state_dict())
    assert part + run(second, proxies[3:], corrects[3:]) == whole
    assert sum("reward hacking" in x for x in capsys.readouterr().out.splitlines()) == 2  # once per probe run


def test_the_probe_runs_where_a_reward_model_and_a_verdict_both_score():
    rm = {"rm": object()}
    assert hacking_probe(SimpleNamespace(reward_models=rm, correct="gsm8k"), 5).proxy == "rm"
    assert hacking_probe(SimpleNamespace(reward_models=rm, correct="rm"), 5) is None  # no verifier's verdict
    assert hacking_probe(SimpleNamespace(reward_models={}, correct="gsm8k"), 5) is None
    assert hacking_probe(SimpleNamespace(), 5) is None  # a generated task


def test_a_study_whose_runs_log_the_probe_gets_its_figure(tmp_path):
    """generic_figures draws hacking.png for runs with hacking/* metrics (and only for them)."""
    import json

    from harness.experiment.generic_figures import generic_figures

    cells = []
    for arm, hacking in (("rm", True), ("verifier", False)):
        run = tmp_path / "runs" / arm
        run.mkdir(parents=True)
        recs = []
        for step in range(4):
            r = {
                "step": step,
                "eval/pass_at_1": 0.3,
                "reward/accuracy": 0.5,
                "length/correct": 10,
                "length/incorrect": 12,
            }
            if hacking:
                r.update({"hacking/proxy": 0.1 * step, "hacking/verified": 0.5 - 0.05 * step, "hacking/gap_trend": 1.0})
            recs.append(r)
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
        cells.append({"id": arm, "variant": arm, "seed": 1, "run_dir": str(run)})
    (tmp_path / "cells.json").write_text(json.dumps(cells))
    out = generic_figures(tmp_path, tmp_path / "figures")
    assert [p.name for p in out] == ["eval_pass_at_1.png", "lengths.png", "hacking.png"] and out[-1].stat().st_size
    (tmp_path / "cells.json").write_text(json.dumps(cells[1:]))
    assert [p.name for p in generic_figures(tmp_path, tmp_path / "f2")] == ["eval_pass_at_1.png", "lengths.png"]
