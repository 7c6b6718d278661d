"""collect() (sampling, scoring, DAPO dynamic sampling and its refill), the Episode's
select_groups / concat, and the scoring of evals, on a scripted task and backend (no model).

Overlong shaping in these configs: max_new_tokens 40, buffer 30, so a response of L > 10
tokens gets -(L - 10) / 30 (docs/objective.md, "Batch-level knobs"); L = 20 gets -1/3."""

import pytest
import torch
from fake_rollout import ScriptedBackend, ScriptedTask, problem

from harness.config import load_config
from harness.rollout.base import SamplingParams
from harness.train.core.collect import collect, score
from harness.train.core.episode import Episode
from harness.train.eval.evaluate import evaluate
from harness.train.run import eval_cache

BASE = [
    "tracking.mlflow=false",
    "train.prompts_per_step=2",
    "train.group_size=2",
    "train.mini_batches=1",
    "rollout.max_new_tokens=40",
    "eval.n_samples=2",
    "eval.ks=[1,2]",
    "eval.num_prompts=2",
]
DAPO = [*BASE, "objective.preset=dapo", "objective.overlong_buffer=30", "train.max_refill_rounds=2"]
GRPO = [*BASE, "objective.preset=grpo"]


def _cfg(overrides):
    return load_config("experiments/runs/smoke.yaml", overrides)


def _uids(ep: Episode) -> list[str]:
    return [p.uid for p in ep.problems]


def test_dynamic_sampling_drops_an_all_wrong_group_whose_lengths_differ():
    """DAPO keeps a group iff 0 < #correct < G (2503.14476 Eq. 11): an all-wrong group is dropped
    even though its overlong shaping makes its rewards differ, and the batch is refilled."""
    wrong = problem("wrong", [(False, 5), (False, 20)])  # shaped rewards 0.1 and 0.1 - 1/3: not all equal
    mixed = problem("mixed", [(True, 5), (False, 5)])
    mixed2 = problem("mixed2", [(True, 8), (False, 20)])
    task, be = ScriptedTask([[wrong, mixed], [mixed2]]), ScriptedBackend()
    ep, coll = collect(task, be, be.render, _cfg(DAPO), step=0)
    assert _uids(ep) == ["mixed", "mixed2"]
    assert coll["groups/refill_rounds"] == 1.0 and coll["groups/kept"] == 2.0
    assert coll["groups/zero_std_frac"] == 0.0  # a metric of the rewards the objective sees (both groups spread)
    assert [n for n, _, _ in task.calls] == [2, 1]  # round 1 asks for the one missing group (>= N // 2)
    assert ep.correct.tolist() == [True, False, True, False]
    assert torch.allclose(ep.overlong, torch.tensor([0.0, 0.0, 0.0, -1 / 3]))
    assert torch.allclose(ep.rewards, torch.tensor([1.1, 0.1, 1.1, 0.1 - 1 / 3]))


def test_dynamic_sampling_drops_all_correct_groups_and_fills_up_to_n():
    right = problem("right", [(True, 3), (True, 4)])
    mixed = [problem(f"m{i}", [(True, 3), (False, 3)]) for i in range(3)]
    task, be = ScriptedTask([[right, mixed[0]], [mixed[1], mixed[2]]]), ScriptedBackend()
    ep, coll = collect(task, be, be.render, _cfg(DAPO), step=0)
    assert _uids(ep) == ["m0", "m1"]  # the refill round's surplus group is cut
    assert coll == {"groups/zero_std_frac": 0.5, "groups/refill_rounds": 1.0, "groups/kept": 2.0}


def test_every_round_uninformative_trains_on_the_last_round():
    rounds = [
        [problem(f"r{k}a", [(False, 3), (False, 3)]), problem(f"r{k}b", [(True, 3), (True, 3)])] for k in range(3)
    ]  # max_refill_rounds=2: 3 rounds, none informative
    task, be = ScriptedTask(rounds), ScriptedBackend()
    ep, coll = collect(task, be, be.render, _cfg(DAPO), step=0)
    assert _uids(ep) == ["r2a", "r2b"]
    assert coll == {"groups/zero_std_frac": 1.0, "groups/refill_rounds": 2.0, "groups/kept": 2.0}


def test_without_dynamic_sampling_one_round_keeps_every_group_unshaped():
    wrong = problem("wrong", [(False, 5), (False, 20)])
    right = problem("right", [(True, 3), (True, 3)])
    task, be = ScriptedTask([[wrong, right]]), ScriptedBackend()
    ep, coll = collect(task, be, be.render, _cfg(GRPO), step=3)
    assert _uids(ep) == ["wrong", "right"] and len(task.calls) == 1
    assert coll == {"groups/zero_std_frac": 1.0, "groups/refill_rounds": 0.0, "groups/kept": 2.0}
    assert torch.equal(ep.overlong, torch.zeros(4))
    assert torch.allclose(ep.rewards, torch.tensor([0.1, 0.1, 1.1, 1.1]))


def _episode(uids, plans) -> Episode:
    be = ScriptedBackend()
    probs = [problem(u, p) for u, p in zip(uids, plans)]
    rollout = be.generate([be.render(p) for p in probs], 2, SamplingParams(max_new_tokens=40))
    return score(ScriptedTask([]), probs, rollout, 2, _cfg(DAPO).objective, 40)


def test_select_groups_keeps_whole_groups_and_every_per_row_field():
    ep = _episode(["a", "b", "c"], [[(True, 2), (False, 3)], [(False, 12), (False, 4)], [(True, 5), (True, 1)]])
    sub = ep.select_groups(torch.tensor([False, True, True]))
    assert _uids(sub) == ["b", "c"] and sub.group_size == 2
    rows = [2, 3, 4, 5]
    r, s = ep.rollout, sub.rollout
    assert s.prompt_ids == [r.prompt_ids[i] for i in rows] and s.texts == [r.texts[i] for i in rows]
    for name in ("response_ids", "response_mask", "sampler_logp", "truncated"):
        assert torch.equal(getattr(s, name), getattr(r, name)[rows]), name
    assert torch.equal(s.extras["routing"], r.extras["routing"][rows])
    assert torch.equal(sub.rewards, ep.rewards[rows]) and torch.equal(sub.overlong, ep.overlong[rows])
    assert [x.correct for x in sub.scores] == [False, False, True, True]
    assert ep.select_groups(torch.zeros(3, dtype=torch.bool)).problems == []


def test_concat_pads_to_the_widest_part_and_skips_empty_parts():
    a = _episode(["a"], [[(True, 2), (False, 3)]])  # T = 3
    b = _episode(["b"], [[(False, 7), (True, 1)]])  # T = 7
    empty = a.select_groups(torch.tensor([False]))
    ep = Episode.concat([a, empty, b])
    assert _uids(ep) == ["a", "b"] and ep.group_size == 2
    r = ep.rollout
    assert r.response_ids.shape == (4, 7) and r.response_mask.shape == (4, 7)
    assert r.response_mask.sum(-1).tolist() == [2, 3, 7, 1]
    assert torch.equal(r.response_ids[:2, 3:], torch.zeros(2, 4, dtype=torch.long))  # padded with 0 (masked)
    assert torch.equal(r.response_ids[2:], b.rollout.response_ids)
    assert torch.equal(r.sampler_logp[:2, :3], a.rollout.sampler_logp)
    routing = r.extras["routing"]  # integer extras pad with -1 ("not routed")
    assert routing.shape == (4, 7, 1, 1) and bool((routing[:2, 3:] == -1).all())
    assert torch.equal(ep.rewards, torch.cat([a.rewards, b.rewards]))
    assert torch.equal(ep.overlong, torch.cat([a.overlong, b.overlong]))
    assert r.texts == a.rollout.texts + b.rollout.texts and r.prompt_ids == a.rollout.prompt_ids + b.rollout.prompt_ids


EVAL_PROBLEMS = [problem("e0", [(True, 5), (False, 20)]), problem("e1", [(False, 30), (True, 12)], "hard")]


def test_eval_reward_carries_no_overlong_shaping():
    """The same policy (the same samples) scores the same eval/reward/mean under every preset:
    the eval reports the task's reward, not the training objective's shaped one."""
    outs = {}
    for name, overrides in (("grpo", GRPO), ("dapo", DAPO)):
        be = ScriptedBackend()
        outs[name] = evaluate(ScriptedTask([]), be, be.render, EVAL_PROBLEMS, _cfg(overrides), step=0)
    assert outs["dapo"] == outs["grpo"]
    assert outs["grpo"]["eval/reward/mean"] == pytest.approx((1.1 + 0.1 + 0.1 + 1.1) / 4)
    assert outs["grpo"]["eval/pass_at_1"] == pytest.approx(0.5)


def test_cached_step0_eval_equals_a_fresh_one_under_another_preset(tmp_path, monkeypatch):
    """The step-0 eval cache is shared across presets (its key holds no objective knob), so what
    a dapo run caches must be what a grpo run computes fresh."""
    monkeypatch.setattr(eval_cache, "warm_start_folder", lambda cfg: tmp_path / "warm")
    dapo, grpo = _cfg(DAPO), _cfg(GRPO)
    assert eval_cache.eval_cache_path(dapo, tmp_path) == eval_cache.eval_cache_path(grpo, tmp_path)
    runs = {}
    for name, cfg in (("dapo", dapo), ("grpo", grpo)):
        be = ScriptedBackend()
        (tmp_path / name).mkdir()
        runs[name] = eval_cache.eval_at(ScriptedTask([]), be, be.render, EVAL_PROBLEMS, cfg, 0, tmp_path / name)
    assert eval_cache.load_eval(eval_cache.eval_cache_path(grpo, tmp_path / "warm")) is not None
    be = ScriptedBackend()
    fresh = evaluate(ScriptedTask([]), be, be.render, EVAL_PROBLEMS, grpo, step=0)
    assert runs["grpo"] == runs["dapo"] == fresh
