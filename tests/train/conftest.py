"""Small, fast run configs for the engine tests."""

import pytest

from harness.config import load_config

# The warm start is the demo's (300 SFT steps, cached under results/warmstart and shared with
# `make demo`), sampled at T=1; easy problems only, so that 8 prompts x 4 samples carry signal.
FAST = [
    "warm_start.steps=300",
    "rollout.temperature=1.0",
    "eval.temperature=1.0",
    "train.prompts_per_step=8",
    "train.group_size=4",
    "rollout.max_new_tokens=40",
    "task.difficulty_mix={easy: 1}",
    "eval.every=0",
    "eval.num_prompts=8",
    "eval.n_samples=4",
    "eval.ks=[1,4]",
    "tracking.mlflow=false",
    "train.samples_to_log=2",
]


@pytest.fixture
def fast_overrides():
    return list(FAST)


@pytest.fixture
def fast_config(fast_overrides):
    def make(*overrides: str):
        return load_config("experiments/runs/smoke.yaml", [*fast_overrides, *overrides])

    return make


class Killed(BaseException):
    """Stands for SIGKILL at the line that raises it."""


@pytest.fixture
def train_killed_at_update(monkeypatch):
    """train(cfg, run) killed inside its `call`-th policy update (call 4: step 3's, with train.steps=4 and
    checkpoint_every=2 step_000001 is on disk and step 2 only in memory)."""
    import harness.train.rl.step as rl_step
    from harness.train import train

    def run_killed(cfg, run, call: int = 4) -> None:
        real, calls = rl_step.policy_update, {"n": 0}

        def dying_update(*args, **kwargs):
            calls["n"] += 1
            if calls["n"] == call:
                raise Killed(f"policy update {call}")
            return real(*args, **kwargs)

        with monkeypatch.context() as m:
            m.setattr(rl_step, "policy_update", dying_update)
            with pytest.raises(Killed):
                train(cfg, run)

    return run_killed
