"""The DPO schedule yields its state: every step's Position (round, offset, step in the round,
the round's batch seed), which `step` and `checkpoint_due` read; no loop variable is an attribute."""

import torch

from harness.config import load_config
from harness.train.core.collect import step_seed
from harness.train.dpo.pairs import PAIRS_SALT
from harness.train.dpo.step import DPOTrainer, Round


def _trainer(monkeypatch, n_pairs: list[int], *overrides: str) -> DPOTrainer:
    cfg = load_config("experiments/runs/dpo.yaml", ["dpo.batch_size=4", "dpo.epochs=1", *overrides])
    t = DPOTrainer(cfg)
    built = []

    def load_round(r: int) -> Round:
        built.append(r)
        z = torch.zeros(n_pairs[r])
        return Round(r, {}, [None] * n_pairs[r], z, z)

    monkeypatch.setattr(t, "_load_round", load_round)
    t.rounds, t.offset, t.at, t.built = [load_round(0)], 0, None, built
    return t


def test_positions_walk_the_rounds(monkeypatch):
    t = _trainer(monkeypatch, [8, 12], "dpo.rounds=2")
    got = [(p.rd.index, p.offset, p.local, p.n_steps, p.step, p.round_ends, p.seed) for p in t.positions()]
    seed1 = step_seed(t.cfg.seed, 1, PAIRS_SALT + 3)
    assert got == [
        (0, 0, 0, 2, 0, False, t.cfg.seed),
        (0, 0, 1, 2, 1, True, t.cfg.seed),
        (1, 2, 0, 3, 2, False, seed1),
        (1, 2, 1, 3, 3, False, seed1),
        (1, 2, 2, 3, 4, True, seed1),
    ]
    assert t.final_step == 5 and t.built == [0, 1]


def test_the_schedule_builds_a_round_only_once_the_steps_before_it_ran(monkeypatch):
    t = _trainer(monkeypatch, [8, 12], "dpo.rounds=2")
    steps = t.schedule(0)
    assert next(steps) == 0 and t.at.step == 0 and not t.checkpoint_due(0)
    assert next(steps) == 1 and t.checkpoint_due(1) and t.built == [0]  # round 1 not built before step 1 ran
    assert next(steps) == 2 and t.built == [0, 1] and t.at.rd is t.rounds[1]


def test_a_resumed_schedule_and_max_steps(monkeypatch):
    t = _trainer(monkeypatch, [8, 12, 4], "dpo.rounds=3", "dpo.max_steps=4")
    assert list(t.schedule(3)) == [3]  # round 1 is cut at 4 steps in all; round 2 never starts
    assert t.at.round_ends and t.final_step == 4 and t.built == [0, 1]
