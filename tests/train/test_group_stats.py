"""Per-group statistics (harness/train/diagnostics/group_stats.py): sum|A| per group against hand-computed
values and the closed forms of docs/studies.md (b), groups.jsonl through the run directory, and
the extreme-group gradient split g_E + g_R = the whole batch's gradient."""

import math
from types import SimpleNamespace

import pytest
import torch

from harness.jsonl import read_jsonl
from harness.models import build_model
from harness.models.logprobs import response_logprobs
from harness.objective import ObjectiveConfig, group_advantages, policy_loss
from harness.objective.aggregation import batch_denominators
from harness.rollout.base import RolloutBatch
from harness.tasks.base import Problem, RewardBreakdown
from harness.train.core.batch import Batch
from harness.train.core.components import Trained
from harness.train.core.episode import Episode
from harness.train.core.rundir import GROUP_RECORDS, RunDir
from harness.train.core.step_context import StepContext
from harness.train.diagnostics.group_stats import extreme_grad_share, extreme_rows, group_records


def _episode(
    correct_per_group: list[list[int]],
    T: int = 3,
    response_ids: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
    prompt_ids: list[list[int]] | None = None,
) -> Episode:
    """An Episode with binary rewards (1 = correct); groups of len(correct_per_group[0])."""
    G = len(correct_per_group[0])
    flat = [c for g in correct_per_group for c in g]
    B = len(flat)
    problems = [
        Problem(uid=f"p{i}", prompt="q", answer="a", difficulty=("easy", "hard")[i % 2])
        for i in range(len(correct_per_group))
    ]
    scores = [RewardBreakdown(total=float(c), correct=bool(c), format=1.0, parsed="a") for c in flat]
    rb = RolloutBatch(
        prompt_ids=prompt_ids or [[1, 2]] * B,
        response_ids=response_ids if response_ids is not None else torch.ones(B, T, dtype=torch.long),
        response_mask=mask if mask is not None else torch.ones(B, T),
        sampler_logp=torch.zeros(B, T),
        truncated=torch.zeros(B, dtype=torch.bool),
        texts=[""] * B,
    )
    rewards = torch.tensor([float(c) for c in flat])
    return Episode(problems, rb, scores, rewards, torch.zeros(B), G)


def _adv(ep: Episode, scale: str) -> torch.Tensor:
    obj = ObjectiveConfig.preset("grpo", scale=scale, std="population", kl_coef=0.0)
    return group_advantages(obj, ep.rewards, ep.group_size)


def test_abs_adv_sum_hand_computed_one_of_four():
    # [1, 0, 0, 0]: p = 1/4, mean 0.25, population std sqrt(0.25 * 0.75) = 0.4330
    #   none:      |0.75| + 3 * |-0.25| = 1.5                   = 2G p(1-p) = 8 * 3/16
    #   group_std: 0.75/0.4330 + 3 * 0.25/0.4330 = 3.4641 (2*sqrt(3)) = 2G sqrt(p(1-p))
    ep = _episode([[1, 0, 0, 0], [1, 1, 1, 1]])
    none = group_records(ep, _adv(ep, "none"), None, step=7)
    std = group_records(ep, _adv(ep, "group_std"), None, step=7)
    g_none, g_std = none[GROUP_RECORDS], std[GROUP_RECORDS]
    assert g_none[0]["abs_adv_sum"] == pytest.approx(1.5)
    assert g_std[0]["abs_adv_sum"] == pytest.approx(2 * math.sqrt(3), rel=1e-5)  # adv_eps 1e-6 in the denominator
    assert g_std[0] | {"abs_adv_sum": 0} == {
        "step": 7,
        "group": 0,
        "difficulty": "easy",
        "G": 4,
        "k": 1,
        "p": 0.25,
        "reward_mean": 0.25,
        "reward_std": pytest.approx(math.sqrt(3) / 4),
        "abs_adv_sum": 0,
    }
    # the all-correct group carries no advantage, and is the zero-variance half of the batch
    assert g_std[1]["abs_adv_sum"] == 0.0 and g_std[1]["reward_std"] == 0.0 and g_std[1]["p"] == 1.0
    assert std["groups/zero_var_frac"] == 0.5
    # extreme = p < 0.2 or p > 0.8: only the all-correct group, whose advantages are 0, so the share is 0
    assert std["adv/share_extreme"] == 0.0


@pytest.mark.parametrize("k", range(1, 16))
def test_abs_adv_sum_matches_closed_forms_g16(k):
    G = 16
    ep = _episode([[1] * k + [0] * (G - k)])
    p = k / G
    got_none = group_records(ep, _adv(ep, "none"), None, 0)[GROUP_RECORDS][0]["abs_adv_sum"]
    got_std = group_records(ep, _adv(ep, "group_std"), None, 0)[GROUP_RECORDS][0]["abs_adv_sum"]
    assert got_none == pytest.approx(2 * G * p * (1 - p), rel=1e-6)
    assert got_std == pytest.approx(2 * G * math.sqrt(p * (1 - p)), rel=1e-5)


def test_sample_std_does_not_match_the_population_closed_form():
    # docs/studies.md (b): [1,1,1,0] gives +0.5/-1.5 with the sample std (sum 3.0), not 2G sqrt(p(1-p)) = 3.46
    ep = _episode([[1, 1, 1, 0]])
    obj = ObjectiveConfig.preset("grpo", scale="group_std", std="sample", kl_coef=0.0)
    got = group_records(ep, group_advantages(obj, ep.rewards, 4), None, 0)[GROUP_RECORDS][0]["abs_adv_sum"]
    assert got == pytest.approx(3.0, rel=1e-5)


def test_extreme_share_of_advantage_mass():
    # G = 8: p = 1/8 (extreme: sum|A| = 2*8*sqrt(7/64) = 5.29) and p = 4/8 (rest: 2*8*0.5 = 8), scale group_std
    ep = _episode([[1] + [0] * 7, [1] * 4 + [0] * 4])
    out = group_records(ep, _adv(ep, "group_std"), None, 0)
    e, r = 16 * math.sqrt(7 / 64), 8.0
    assert out["adv/share_extreme"] == pytest.approx(e / (e + r), rel=1e-5)
    assert extreme_rows(ep).tolist() == [True] * 8 + [False] * 8


def test_group_records_go_to_groups_jsonl_with_crash_safe_flush(tmp_path):
    run = RunDir(tmp_path)
    recs = [{"step": s, "x": 1.0, GROUP_RECORDS: [{"step": s, "group": i} for i in range(3)]} for s in range(3)]
    run.flush(recs[:2], [])
    assert [r["step"] for r in read_jsonl(run.metrics_path)] == [0, 1]
    assert all(GROUP_RECORDS not in r for r in read_jsonl(run.metrics_path))
    assert [(g["step"], g["group"]) for g in read_jsonl(run.groups_path)] == [(s, i) for s in (0, 1) for i in range(3)]
    # a crash cut step 1 short in groups.jsonl: the next flush of the same records rewrites step 1 whole
    lines = run.groups_path.read_text().splitlines()
    run.groups_path.write_text("\n".join(lines[:4]) + "\n")
    run.flush(recs, [])
    assert [(g["step"], g["group"]) for g in read_jsonl(run.groups_path)] == [
        (s, i) for s in range(3) for i in range(3)
    ]
    run.flush(recs, [])  # idempotent
    assert len(read_jsonl(run.groups_path)) == 9
    run.truncate_after(0)
    assert {g["step"] for g in read_jsonl(run.groups_path)} == {0}


def test_extreme_grad_share_splits_the_whole_batch_gradient():
    """g_E (rows of the p = 1/8 group) + g_R = the gradient of the loss on all rows with the
    batch's denominators; the share is ||g_E|| / (||g_E|| + ||g_R||)."""
    torch.manual_seed(0)
    model, tok = build_model("tiny-dense", seed=0)
    G, T = 8, 5
    correct = [[1] + [0] * 7, [1] * 4 + [0] * 4, [1] * 8]  # extreme, rest, zero-variance (skipped: A = 0)
    B = G * len(correct)
    resp = torch.randint(4, 30, (B, T))
    mask = torch.ones(B, T)
    mask[::3, 3:] = 0  # uneven lengths: seq_mean_token_mean's per-row 1/|o_i| matters
    prompts = [[tok.bos_token_id or 1, 5 + i % 7, 9] for i in range(B)]
    ep = _episode(correct, response_ids=resp, mask=mask, prompt_ids=prompts)
    obj = ObjectiveConfig.preset("grpo", std="population", kl_coef=0.0)
    adv = group_advantages(obj, ep.rewards, G)
    cfg = SimpleNamespace(
        objective=obj,
        train=SimpleNamespace(
            micro_batch_size=5, autocast=None, share_prefix=False, pad_to_multiple_of=1, chunked_head=False
        ),
        rollout=SimpleNamespace(temperature=1.0),
    )
    batch = Batch(prompts, resp, mask, mask, torch.zeros(B, T), adv=adv)
    pad = tok.pad_token_id
    sc = StepContext(cfg, Trained("policy", model, None), (), None, torch.device("cpu"), pad, True)
    out = extreme_grad_share(sc, batch, ep)
    assert all(p.grad is None for p in model.parameters())

    # reference: one backward over the whole batch
    num_seqs, num_tokens = batch_denominators(mask)
    logp, _, _ = response_logprobs(model, prompts, resp, mask, pad, 1.0)
    loss, _ = policy_loss(obj, logp, logp.detach(), adv, mask, num_seqs=num_seqs, num_tokens=num_tokens)
    loss.backward()
    full = math.sqrt(sum(float((p.grad**2).sum()) for p in model.parameters() if p.grad is not None))
    assert full > 0
    assert out["grad/norm_total"] == pytest.approx(full, rel=1e-4)
    ne, nr = out["grad/norm_extreme"], out["grad/norm_rest"]
    assert ne > 0 and nr > 0
    assert out["grad/share_extreme"] == pytest.approx(ne / (ne + nr))


@pytest.mark.parametrize("preset", ["simko", "lambda_grpo", "ppo"])
def test_grad_share_runs_on_the_updates_own_loss(preset, fast_config, tmp_path):
    """The diagnostic takes the update's loss, so presets with extra inputs (SimKO's top-K, λ-GRPO's λ,
    PPO's critic) are measured too, and it leaves no gradient on the components (the first update's
    grad/norm equals the run's without the diagnostic)."""
    import json

    from harness.train import train

    norms = {}
    for every in (0, 1):
        out = tmp_path / f"every{every}"
        train(fast_config(f"objective.preset={preset}", "train.steps=1", f"train.grad_share_every={every}"), out)
        rec = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
        norms[every] = rec["grad/norm"]
        if every:
            assert 0 <= rec["grad/share_extreme"] <= 1, rec["grad/share_extreme"]
            assert math.isfinite(rec["grad/norm_total"]) and rec["grad/norm_total"] > 0
    assert norms[1] == pytest.approx(norms[0], rel=1e-5)
