"""The reference loop (harness/objective/reference_loop.py: one GRPO step in plain torch + transformers)
and the trainer's step (RLTrainer.step with the grpo preset) give the same weights after one step, from
the same weights, prompts and seeds, on the tiny model.

The config: the engine tests' fast one (8 prompts x 4 samples, 40 new tokens) on the tiny model's own
initial weights (no warm start: nothing to build or cache, a few seconds), with two mini-batches (the second
is off-policy: at lr 1e-3 the clip binds on about a tenth of its tokens) and pi_old recomputed (train.old_logp=recompute, the
default), sampled at T = 1.2 with top_p 0.9. A random model rarely answers right, so the task's verdict is
replaced, for both sides alike, by a reward that varies within a group (the digits of a response, mod 3).
Every default of the tiny config matches the loop's: one process, rollout.seeding=batch (one seed for the
generate call: generate's own multinomial draw on the global generator), fp32, no micro-batches on a CPU."""

import copy

import pytest
import torch

from harness.objective.reference_loop import Settings, grpo_train_step
from harness.rollout import make_backend
from harness.tasks.base import RewardBreakdown
from harness.train.core.collect import SAMPLING_SALT, step_seed
from harness.train.core.components import Trained, adamw
from harness.train.core.rundir import RunDir
from harness.train.core.trainer import RunContext
from harness.train.rl.step import UPDATE_ORDER_SALT, RLTrainer
from harness.train.run.task_setup import build_task
from harness.train.run.warmstart import initial_policy

OVERRIDES = [
    "warm_start.enabled=false",
    "train.lr=1e-3",
    "train.mini_batches=2",
    "train.old_logp=recompute",
    "rollout.temperature=1.2",
    "rollout.top_p=0.9",
]


def _trainer_step(cfg, tmp_path):
    """(initial policy, tokenizer, task, render, the policy after RLTrainer's step 0, the step's record)."""
    torch.manual_seed(cfg.seed)
    task = build_task(cfg)
    task.score = _digit_reward  # score_batch calls it: the trainer's and the loop's rewards alike
    policy, tok, render = initial_policy(cfg, torch.device("cpu"))
    initial = copy.deepcopy(policy)
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    tr = cfg.train
    optimizer = adamw(policy, tr.lr, tr.betas, tr.weight_decay)
    backend = make_backend(cfg.rollout, policy, tok)
    ctx = RunContext(cfg, RunDir(tmp_path), torch.device("cpu"), task, tok, render, pad_id, backend,
                     Trained("policy", policy, optimizer))  # fmt: skip
    trainer = RLTrainer(cfg)
    trainer.prepare(ctx)
    rec: dict = {"step": 0}
    trainer.step(ctx, 0, rec)
    return initial, tok, task, render, policy, rec


def _digit_reward(problem, completion: str, truncated: bool) -> RewardBreakdown:
    total = float(sum(c.isdigit() for c in completion) % 3)
    return RewardBreakdown(total=total, correct=total > 1, format=1.0, parsed=None)


def _sampling_seed(cfg) -> int:
    """The seed harness/rollout/hf.py gives torch.manual_seed for a step's one generate call (B <= 256 rows)."""
    gen = torch.Generator().manual_seed(step_seed(cfg.seed, 0, SAMPLING_SALT))
    return int(torch.randint(0, 2**31 - 1, (1,), generator=gen))


def test_the_reference_loop_takes_the_trainers_step(fast_config, tmp_path):
    cfg = fast_config(*OVERRIDES)
    assert cfg.objective.algorithm == "grpo" and cfg.train.micro_batch_size is None
    initial, tok, task, render, trained, rec = _trainer_step(cfg, tmp_path)

    model, ref = copy.deepcopy(initial), copy.deepcopy(initial).requires_grad_(False)
    tr, obj = cfg.train, cfg.objective
    problems = task.problems(tr.prompts_per_step, seed=step_seed(cfg.seed, 0, 0), split="train")
    rows = [p for p in problems for _ in range(tr.group_size)]

    def reward_fn(texts, truncated):
        return [s.total for s in task.score_batch(rows, texts, truncated)]

    settings = Settings(
        G=tr.group_size, mini_batches=tr.mini_batches, max_new_tokens=cfg.rollout.max_new_tokens,
        temperature=cfg.rollout.temperature, top_p=cfg.rollout.top_p, eps_low=obj.eps_low, eps_high=obj.eps_high,
        beta=obj.kl_coef, adv_eps=obj.adv_eps, grad_clip=tr.grad_clip,
    )  # fmt: skip
    optimizer = adamw(model, tr.lr, tr.betas, tr.weight_decay)
    prompts = [render(p) for p in problems]
    seeds = dict(seed=_sampling_seed(cfg), shuffle_seed=step_seed(cfg.seed, 0, UPDATE_ORDER_SALT))
    out = grpo_train_step(model, ref, optimizer, tok, prompts, reward_fn, settings, **seeds)

    assert out["adv"].abs().sum() > 0, "no group with a signal: the step would not move the weights"
    assert rec["clip/frac"] > 0  # the second mini-batch is off-policy enough for the clip to bind
    assert out["rewards"].mean().item() == pytest.approx(rec["reward/mean"], abs=1e-6)
    assert out["loss"] == pytest.approx(rec["loss/policy"] + rec["loss/kl"], abs=1e-6)
    moved = 0.0
    for (name, a), b, c in zip(trained.named_parameters(), model.parameters(), initial.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-6, rtol=0), f"{name}: max |diff| {float((a - b).abs().max()):.2e}"
        moved = max(moved, float((a - c).detach().abs().max()))
    assert moved > 1e-5  # the step did move the weights
