"""SimKO through the RL trainer (docs/objective.md, "Token statistics"): the top-K log-probs are read from the forwards
(the extras slot's heads) only when SimKO is on -- pi_old's top-K by pi_old's forward when the update
has several passes, by the update's first forward when it is a single pass -- and the `simko` preset
trains on both paths."""

from __future__ import annotations

import json
import math

import pytest

import harness.train.core.forward as core_forward
import harness.train.core.scoring as core_scoring
from harness.train import train


def _count(monkeypatch):
    """Calls of the heads that read the extensions' tensors from a forward: the scoring's (pi_old's
    forward, core/scoring.py) and the update's (core/forward.py)."""
    calls = {"step": 0, "update": 0}
    for mod, key, name in ((core_scoring, "step", "old_forward_extras"), (core_forward, "update", "forward_extras")):
        real = getattr(mod, name)

        def counted(*a, _real=real, _key=key, **kw):
            calls[_key] += 1
            return _real(*a, **kw)

        monkeypatch.setattr(mod, name, counted)
    return calls


@pytest.mark.parametrize(
    "preset, passes, want",
    [
        ("simko", (), lambda c: c["step"] > 0 and c["update"] > 0),  # pi_old's top-K from the old forward
        ("simko", ("train.mini_batches=1", "train.inner_epochs=1"), lambda c: c["step"] == 0 and c["update"] > 0),
        ("grpo", (), lambda c: c == {"step": 0, "update": 0}),  # off: no top-K anywhere
    ],
)
def test_top_k_only_when_simko_is_on(preset, passes, want, fast_config, tmp_path, monkeypatch):
    calls = _count(monkeypatch)
    train(fast_config(f"objective.preset={preset}", "train.steps=1", *passes), tmp_path / "run")
    assert want(calls), calls
    rec = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0])
    assert math.isfinite(rec["loss/policy"]) and math.isfinite(rec["grad/norm"])
