"""The parts of the scalerl preset (ScaleRL, arXiv 2510.13786), each a knob of its own: prompt-level aggregation
(agg prompt_mean), zero-variance filtering and no-positive-resampling; and the preset's run key."""

import json
from types import SimpleNamespace

import pytest
import torch

from harness.config import ConfigError, load_config
from harness.objective import ObjectiveConfig, advantages, loss
from harness.objective.api import LossInputs
from harness.objective.prompt_mean import prompt_weights
from harness.tasks.base import Problem
from harness.train.core.collect import draw, final_groups
from harness.train.core.episode import Episode
from harness.train.core.prompt_pool import PromptPool


def _p(prompt: str) -> Problem:
    return Problem(uid=prompt, prompt=prompt, answer="1", difficulty="easy")


def test_prompt_weights_by_hand():
    # G = 2: group 0 has 3 + 1 tokens, group 1 has 2 + 2; f = G / L_g
    mask = torch.tensor([[1, 1, 1], [1, 0, 0], [1, 1, 0], [1, 1, 0]], dtype=torch.float32)
    assert torch.equal(prompt_weights(mask, 2), torch.tensor([0.5, 0.5, 0.5, 0.5]))
    mask = torch.tensor([[1, 1, 1], [1, 0, 0], [0, 0, 0], [0, 0, 0]], dtype=torch.float32)
    assert torch.equal(prompt_weights(mask, 2), torch.tensor([0.5, 0.5, 0.0, 0.0]))  # no token: weight 0


def test_prompt_mean_loss_is_the_mean_over_prompts_of_their_token_means():
    """CISPO on-policy (IS weight 1): token loss -A_i logp_it; prompt_mean: (1/N) sum_g (1/L_g) sum_{i in g, t} of it."""
    cfg = ObjectiveConfig.preset("scalerl", zero_variance_filter=False)
    rewards = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 1.0])  # G = 3, N = 2 prompts
    mask = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1], [1, 0, 0, 0]]).float()
    scored = advantages(cfg, rewards, mask, 3)
    logp = (-torch.rand(6, 4, generator=torch.Generator().manual_seed(0))).requires_grad_()
    value, _ = loss(cfg, LossInputs(logp, logp.detach(), scored.adv, mask, extras=scored.extras))
    tok = -scored.adv.unsqueeze(1) * logp.detach() * mask  # (B, T)
    want = sum(tok[g * 3 : g * 3 + 3].sum() / mask[g * 3 : g * 3 + 3].sum() for g in (0, 1)) / 2
    torch.testing.assert_close(value, want, rtol=0, atol=1e-6)
    value.backward()
    L = mask.view(2, 3, 4).sum((1, 2)).repeat_interleave(3).unsqueeze(1)  # each row's group token count
    torch.testing.assert_close(logp.grad, -scored.adv.unsqueeze(1) * mask / (2 * L), rtol=0, atol=1e-7)


def test_zero_variance_filter_drops_all_equal_groups():
    from harness.rollout.base import RolloutBatch

    G, rewards = 2, torch.tensor([1.0, 1.0, 0.0, 1.0, 0.0, 0.0])
    rollout = RolloutBatch(
        [[1]] * 6,
        torch.ones(6, 2).long(),
        torch.ones(6, 2),
        torch.zeros(6, 2),
        torch.zeros(6, dtype=torch.bool),
        [""] * 6,
    )
    problems = [_p(f"p{i}") for i in range(3)]
    verdicts = [SimpleNamespace(correct=bool(r)) for r in rewards.tolist()]
    ep = Episode(problems, rollout, verdicts, rewards, torch.zeros(6), G)
    obj = ObjectiveConfig.preset("scalerl")  # zero_variance_filter: true
    kept, metrics = final_groups(ep, obj, G)
    assert [p.prompt for p in kept.problems] == ["p1"]
    assert metrics == {"groups/zero_var_dropped": 2.0, "groups/kept": 1.0}
    same = Episode(problems[:1], rollout, verdicts[:2], torch.tensor([1.0, 1.0]), torch.zeros(2), G)
    assert final_groups(same, obj, G)[0].problems == problems[:1]  # all equal: the batch as it is
    assert final_groups(ep, ObjectiveConfig.preset("scalerl", zero_variance_filter=False), G) == (ep, {})


def test_pool_retires_a_prompt_at_the_threshold():
    pool, G = PromptPool(0.9), 10
    a, b = _p("a"), _p("b")
    correct = torch.tensor([True] * 9 + [False] + [True] * 8 + [False] * 2)  # a: 9/10 = 0.9, b: 0.8
    pool.record([a, b], correct, G)
    assert not pool.allowed(a) and pool.allowed(b) and pool.metrics() == {"pool/retired": 1.0}
    pool.record([b], torch.tensor([True] * 10), G)  # b: 18/20 = 0.9, running over both groups
    assert not pool.allowed(b)
    again = PromptPool(0.9)
    again.load_state_dict(pool.state_dict())
    assert again.retired == pool.retired and again.counts == pool.counts


class _Task:
    """Draws prompts p0..p9 by seed (as a task's problems(n, seed))."""

    def problems(self, n, seed, split="train"):
        g = torch.Generator().manual_seed(seed)
        return [_p(f"p{int(i)}") for i in torch.randint(0, 10, (n,), generator=g)]


def test_the_draw_skips_retired_prompts_and_tops_up(fast_config):
    cfg = fast_config()
    pool = PromptPool(0.9)
    pool.retired = {f"p{i}" for i in range(9)}  # only p9 is left
    plain = draw(_Task(), 4, cfg, 3, 0)
    assert plain == draw(_Task(), 4, cfg, 3, 0, None)  # no pool: the draw as before
    drawn = draw(_Task(), 4, cfg, 3, 0, pool)
    assert drawn and all(p.prompt == "p9" for p in drawn)
    pool.retired.add("p9")
    assert draw(_Task(), 4, cfg, 3, 0, pool) == plain  # every prompt retired: the draw as it was


def test_the_preset_sets_the_fp32_head_unless_named():
    assert load_config("experiments/runs/smoke.yaml", ["objective.preset=scalerl"]).model.lm_head_fp32
    off = load_config("experiments/runs/smoke.yaml", ["objective.preset=scalerl", "model.lm_head_fp32=false"])
    assert not off.model.lm_head_fp32
    assert not load_config("experiments/runs/smoke.yaml", ["objective.preset=cispo"]).model.lm_head_fp32


@pytest.mark.parametrize(
    "overrides,named",
    [
        (["objective.zero_variance_filter=true", "train.group_size=1"], "zero_variance_filter"),
        (["objective.no_positive_resampling=1.5"], "no_positive_resampling"),
        (["objective.no_positive_resampling=0"], "no_positive_resampling"),
    ],
)
def test_bad_values_refused(overrides, named):
    with pytest.raises(ConfigError, match=named):
        load_config("experiments/runs/smoke.yaml", overrides)


def test_a_run_keeps_its_pool_in_the_checkpoint(fast_config, tmp_path):
    """no_positive_resampling in a run: pool/retired logged every step, the counts in trainer_state.pt."""
    from harness.train import train

    train(fast_config("objective.no_positive_resampling=0.5", "train.steps=2", "train.checkpoint_every=1"), tmp_path)
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert all("pool/retired" in r for r in records[:2])
    state = torch.load(tmp_path / "checkpoints" / "step_000002" / "trainer_state.pt", weights_only=False)
    counts = state["prompt_pool"]["counts"]
    assert sum(n for _, n in counts.values()) >= 2 * 8 * 4  # every sampled row of both steps counted
    assert len(state["prompt_pool"]["retired"]) == records[1]["pool/retired"]
