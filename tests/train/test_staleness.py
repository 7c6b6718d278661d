"""rollout.staleness: k -- the batch of step t is sampled with the weights of step t - k (harness/train/rl/staleness.py).

k > 0: the tokens and log-probs sampled at step t are those the weights saved after step t - k - 1 (theta_{t-k})
sample, and not those of theta_t; pi_old is the sampler's. k = 0 is the run without the key. A run killed and
resumed with k > 0 samples with the same stale weights as an uninterrupted one. Bad values are refused in one line.
"""

import copy
import json

import pytest
import torch
from safetensors.torch import load_file

import harness.train.rl.step as rl_step
from harness.config import ConfigError, load_config
from harness.rollout.hf import HFBackend
from harness.train import train
from harness.train.rl.staleness import StaleWeights, source_step

STEPS = ["train.steps=3", "train.checkpoint_every=3"]


def _records(run):
    drop = ("perf/", "threads/")
    return [
        {k: v for k, v in json.loads(line).items() if not k.startswith(drop)}
        for line in (run / "metrics.jsonl").read_text().splitlines()
    ]


def _weights(run, step):
    return load_file(str(run / "checkpoints" / f"step_{step:06d}" / "model.safetensors"))


def test_source_step_and_queue_hold_k_snapshots():
    assert [source_step(t, 2) for t in range(5)] == [0, 0, 0, 1, 2]
    model = torch.nn.Linear(2, 2)
    stale = StaleWeights(2)
    for t in range(5):
        stale.begin(model, t)
        with torch.no_grad():
            model.weight.add_(1.0)  # the update of step t
        stale.end(t)
        assert sorted(stale.snapshots) == [s for s in range(max(0, t - 1), t + 1)]  # the next 2 steps' sources


def test_queue_swaps_in_and_restores():
    model = torch.nn.Linear(2, 2)
    stale = StaleWeights(1)
    stale.begin(model, 0)
    first = model.weight.detach().clone()
    with torch.no_grad():
        model.weight.add_(1.0)
    stale.end(0)
    stale.begin(model, 1)
    now = model.weight.detach().clone()
    with stale.loaded(model, 1):
        assert torch.equal(model.weight, first)
    assert torch.equal(model.weight, now)


def test_stale_rollout_is_the_saved_weights_sample(fast_config, tmp_path, monkeypatch):
    """k = 1: step 2 samples what theta_1 (the weights saved after step 0's update) samples, token for token and
    log-prob for log-prob; theta_2, the policy at the time, samples otherwise."""
    k, t = 1, 2
    cfg = fast_config(*STEPS, f"rollout.staleness={k}")
    real, real_update, saved, seen = rl_step.collect, rl_step.policy_update, {}, {}

    def saving_update(sc, *args, **kwargs):  # theta_{s+1}, saved after the update of step s
        out = real_update(sc, *args, **kwargs)
        saved[len(saved) + 1] = {n: v.detach().clone() for n, v in sc.model.state_dict().items()}
        return out

    def watching(task, backend, render, cfg_, step, **kw):
        ep, coll = real(task, backend, render, cfg_, step, **kw)
        if step == t:  # regenerate with a copy holding the saved theta_{t-k}, and with the current theta_t
            for name, weights in (("saved", saved[t - k]), ("current", saved[t])):
                model = copy.deepcopy(backend.model)
                model.load_state_dict(weights)
                seen[name] = real(task, HFBackend(model, backend.tokenizer), render, cfg_, step)[0].rollout
            seen["sampled"] = ep.rollout
        return ep, coll

    monkeypatch.setattr(rl_step, "policy_update", saving_update)
    monkeypatch.setattr(rl_step, "collect", watching)
    train(cfg, tmp_path / "stale")
    sampled, saved, current = seen["sampled"], seen["saved"], seen["current"]
    assert torch.equal(sampled.response_ids, saved.response_ids)
    assert torch.equal(sampled.sampler_logp, saved.sampler_logp)
    assert not torch.equal(sampled.sampler_logp, current.sampler_logp)  # the current weights sample otherwise
    recs = _records(tmp_path / "stale")
    assert [r["staleness/steps"] for r in recs[:3]] == [0.0, 1.0, 1.0]
    assert recs[0]["mismatch/k3_kl"] < 1e-9 < 1e-4 < recs[2]["mismatch/k3_kl"]  # sampler vs theta_t: the staleness


def test_k0_is_the_run_without_the_key(fast_config, tmp_path):
    train(fast_config("train.steps=2", "train.checkpoint_every=1"), tmp_path / "plain")
    train(fast_config("train.steps=2", "train.checkpoint_every=1", "rollout.staleness=0"), tmp_path / "k0")
    assert _records(tmp_path / "plain") == _records(tmp_path / "k0")
    a, b = _weights(tmp_path / "plain", 2), _weights(tmp_path / "k0", 2)
    assert all(torch.equal(a[n], b[n]) for n in a)


@pytest.mark.slow  # three runs of 4 steps: ~15 s on 2 loaded cores
def test_resume_samples_with_the_same_stale_weights(fast_config, tmp_path, train_killed_at_update):
    """Killed inside step 3's update (checkpoint of step 1 on disk), resumed: the same records and weights as the
    uninterrupted run (steps 2 and 3 sample with theta_0 and theta_1, from the checkpointed queue)."""
    over = ["train.steps=4", "train.checkpoint_every=2", "train.checkpoint_background=false", "rollout.staleness=2"]
    train_killed_at_update(fast_config(*over), tmp_path / "killed")
    train(fast_config(*over), tmp_path / "killed")
    train(fast_config(*over), tmp_path / "clean")
    assert _records(tmp_path / "killed") == _records(tmp_path / "clean")
    a, b = _weights(tmp_path / "killed", 4), _weights(tmp_path / "clean", 4)
    assert all(torch.equal(a[n], b[n]) for n in a)


@pytest.mark.parametrize(
    "overrides,named",
    [
        (["rollout.staleness=-1"], "rollout.staleness"),
        (["rollout.staleness=1.5"], "rollout.staleness"),
        (["rollout.staleness=2", "objective.preset=dpo"], "rollout.staleness=2"),
        # else every batch sampled by theta_0, with one copy of the weights kept per step
        (["rollout.staleness=100000"], "rollout.staleness=100000 with train.steps="),
        (["rollout.staleness=3", "train.steps=3"], r"allowed: 0 <= rollout.staleness < train.steps"),
    ],
)
def test_bad_staleness_refused(overrides, named):
    with pytest.raises(ConfigError, match=named) as err:
        load_config("experiments/runs/smoke.yaml", overrides)
    assert "\n" not in str(err.value).strip()


def test_staleness_without_a_ratio_warns():
    with pytest.warns(Warning, match="rollout.staleness=2"):
        load_config("experiments/runs/smoke.yaml", ["rollout.staleness=2", "objective.preset=gpg"])


def test_staleness_is_a_grid_axis():
    """A study grid over rollout.staleness and the presets: one cell each, the knob in its config and its id."""
    from harness.experiment import parse_study
    from harness.experiment.expand import expand

    base = {"task": {"name": "arithmetic"}, "train": {"steps": 3}, "objective": {"preset": "cispo"}}
    grid = {"rollout.staleness": [0, 2], "objective.preset": ["cispo", "scalerl"]}
    cells = expand(parse_study({"base": base, "grid": grid}, name="t"))
    got = {(c.config.rollout.staleness, c.config.objective.algorithm) for c in cells}
    assert got == {(0, "cispo"), (0, "scalerl"), (2, "cispo"), (2, "scalerl")}
    assert any("staleness=2" in c.id for c in cells)


@pytest.mark.slow  # a vLLM engine on the CPU: ~20 s
def test_vllm_samples_with_the_stale_weights(fast_config, tmp_path, monkeypatch):
    """k = 1 on vLLM (its weight sync delayed): at step 2 the engine's log-probs are those of theta_1, the trainer's
    recompute of pi_old (to kernel rounding), and not those of theta_2 (the mismatch metric, ~1e-3)."""
    pytest.importorskip("vllm")
    real, seen = rl_step.score_episode, {}

    def watching(sc, ep, *args, **kw):
        out = real(sc, ep, *args, **kw)
        seen[len(seen)] = out[0]
        return out

    monkeypatch.setattr(rl_step, "score_episode", watching)
    train(fast_config("rollout.backend=vllm", "rollout.staleness=1", "train.steps=3"), tmp_path)
    batch = seen[2]
    on = batch.mask > 0
    assert float((batch.old_logp - batch.rollout_logp)[on].abs().max()) < 1e-3
    assert _records(tmp_path)[2]["mismatch/k3_kl"] > 1e-4
