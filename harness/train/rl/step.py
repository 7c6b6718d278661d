"""The RL trainer's step, `harness train CONFIG` with `trainer: rl`, in the phases of the reference loop
(harness/objective/reference_loop.py) and numbered as it is; `RLTrainer.step` reads top to bottom:

    0. context     the step's policy, reference, components and forwards (core/step_context.py), under the
                   step's config (objective.kl_coef: the adaptive beta, when objective.kl_target is set)
    1. collect     N prompts x G samples                                          core/collect.py
    2. score       a reward per response (the task's verifier, overlong shaping; collect scores as it draws,
                   since dynamic sampling keeps or refills groups by their rewards)
    3-4. pi_old, pi_ref, advantage: the no-grad forwards, then the objective's advantages (group baselines,
                   a critic's GAE, a KL in the reward); the reference loop takes the advantage first, but a
                   KL in the reward and a critic read the log-probs                  core/scoring.py
    5. update      K epochs x mini-batches x micro-batches of the objective's loss, every trained module's
                   optimizer step                                                   rl/update.py
                   (on the rows an active mode draws from the scored batch: PF-PPO's resampling, update_rows)
    6. after-step  the engine's weights synced, pi_ref reset on the schedule a mode declares
                   (objective.ref_update_every), the stale sampler's snapshot

Measurement stands beside the math: the observers (rl/observers.py) are notified at the phase edges
and their records logged (rl/records.py); none of them changes the update. The run shell
(harness/train/run/shell.py) owns everything around the step (run directory, resume, checkpoints, eval
schedule, signals, summary).
"""

from __future__ import annotations

import torch

from harness.config import ConfigError
from harness.models.moe import is_moe
from harness.objective import inputs_needed
from harness.objective.batching import resampled_rows, resets_reference, retire_at
from harness.objective.entropy_control import adaptive_entropy
from harness.objective.kl_control import adaptive_kl, steer_kl
from harness.train.core.batch import Batch
from harness.train.core.collect import collect, step_seed
from harness.train.core.nonfinite import NonFiniteUpdate, first_nonfinite
from harness.train.core.prompt_pool import PromptPool
from harness.train.core.scoring import frozen_reference, frozen_teacher, score_episode
from harness.train.core.step_context import StepContext
from harness.train.core.trainer import RunContext, Trainer
from harness.train.diagnostics.hacking import hacking_probe
from harness.train.rl.observers import PhaseClock, StepObservers
from harness.train.rl.records import logged_samples, perf_records, step_records
from harness.train.rl.staleness import StaleWeights, source_step
from harness.train.rl.update import policy_update

UPDATE_ORDER_SALT = 555  # step_seed salt of the update's row shuffle (mini-batch order)
RESAMPLE_SALT = 556  # step_seed salt of a mode's resampling of the scored batch (PF-PPO)


def sync_times(backend) -> dict:
    """perf/sync_seconds (the weight push into the engine) and perf/verify_seconds (the probe check after it, on
    its schedule: syncs 1-3 and every 10th, 0 otherwise) of a backend that syncs (vLLM); {} for hf, which generates
    with the trained module itself. Both are inside perf/update_seconds; the bench takes the check out of the
    timed step (harness/bench/figures.py ours_steps)."""
    if not hasattr(backend, "last_verify_seconds"):
        return {}
    return {"perf/sync_seconds": backend.last_sync_seconds, "perf/verify_seconds": backend.last_verify_seconds}


def update_rows(cfg, step: int, batch: Batch, rewards: torch.Tensor) -> tuple[Batch, dict]:
    """The batch the update trains on: the scored batch, or the rows an active mode draws from it by the rewards
    (B,) (objective/batching.py `resampled_rows`: PF-PPO), with the share of distinct rows drawn. The draw's
    generator is seeded by the run's seed and the step: the same on every process and on a resumed run."""
    gen = torch.Generator().manual_seed(step_seed(cfg.seed, step, RESAMPLE_SALT))
    idx = resampled_rows(cfg.objective, rewards, gen)
    if idx is None:
        return batch, {}
    rows = idx.tolist()
    return batch.rows(rows), {"pf_ppo/distinct_frac": len(set(rows)) / max(len(rows), 1)}


def with_kl_coef(cfg, kl_ctl):
    """cfg with objective.kl_coef = the adaptive controller's beta for this step's scoring; cfg itself without one."""
    if kl_ctl is None:
        return cfg
    return cfg.model_copy(update={"objective": cfg.objective.model_copy(update={"kl_coef": kl_ctl.value})})


def controllers(trainer) -> dict:
    """The adaptive coefficients' states by checkpoint key, None where off: the entropy bonus's and PPO's beta."""
    return {"entropy_control": getattr(trainer, "entropy_ctl", None), "kl_control": getattr(trainer, "kl_ctl", None)}


class RLTrainer(Trainer):
    label = "step"
    print_keys = (
        ("reward/mean", "reward"),
        ("reward/accuracy", "acc"),
        ("length/mean", "len"),
        ("clip/frac", "clip"),
        ("entropy", "H"),
        ("eval/pass_at_1", "eval@1"),
        ("perf/step_seconds", "s"),
    )

    def prepare(self, ctx: RunContext) -> None:
        cfg, obj = self.cfg, self.cfg.objective
        self.ref = frozen_reference(cfg, ctx.model)  # pi_ref = pi_0, when the objective needs one
        self.ref_moved = False  # pi_ref has taken the policy's weights (objective.ref_update_every): checkpointed
        self.teacher = frozen_teacher(cfg, ctx.device)  # pi_T: model.teacher, when the objective distils
        self.moe = is_moe(ctx.model)
        if obj.routing_replay and not self.moe:
            raise ConfigError(
                f"objective.routing_replay=true needs an MoE model; model.name={cfg.model.name!r} has no routers"
            )
        self.entropy_ctl = adaptive_entropy(obj)  # the adaptive entropy coefficient's state (checkpointed), or None
        self.kl_ctl = adaptive_kl(obj)  # objective.kl_target: PPO's adaptive beta (checkpointed), or None
        self.stale = StaleWeights(cfg.rollout.staleness)  # rollout.staleness: sample with theta_{t-k} (staleness.py)
        at = retire_at(obj)  # objective.no_positive_resampling: solved prompts leave the pool (ScaleRL)
        self.pool = PromptPool(at) if at is not None else None
        self.task = ctx.task  # its running reward normalisers are part of the checkpoint
        self.hacking = hacking_probe(ctx.task, cfg.task.hacking_window)  # a reward model and a verifier: hacking/*
        self.observers = StepObservers(cfg, self.moe)  # train.observers: the step's measurements

    def frozen_modules(self) -> list[torch.nn.Module]:
        """pi_ref when it is a copy of its own (with LoRA it is the policy with its adapters off), and pi_T."""
        teacher = [self.teacher] if self.teacher is not None else []
        return ([self.ref] if isinstance(self.ref, torch.nn.Module) else []) + teacher

    def component_inputs(self) -> list[str]:
        """The inputs trained components give the objective (values: PPO's value model, ...)."""
        return list(inputs_needed(self.cfg.objective).components)

    def schedule(self, start: int):
        return iter(range(start, self.cfg.train.steps))

    @property
    def final_step(self) -> int:
        return self.cfg.train.steps

    @property
    def total_steps(self) -> int:
        return self.cfg.train.steps

    def state_dict(self) -> dict:
        ref = self.ref if self.ref_moved else None  # pi_ref is pi_0 (rebuilt on resume) until its first reset
        pool = {"prompt_pool": self.pool.state_dict()} if self.pool is not None else {}
        out = {
            "ref": ref.state_dict() if ref is not None else None,
            **{key: ctl.state_dict() for key, ctl in controllers(self).items() if ctl is not None},
            **self.stale.state_dict(),
            **pool,
        }
        rewards = self.task.reward_state() if hasattr(self.task, "reward_state") else {}
        if rewards:  # task.rewards[i].normalize=running: its statistics so far
            out["reward_norm"] = rewards
        if self.hacking is not None:
            out["hacking"] = self.hacking.state_dict()
        return out

    def load_state_dict(self, state: dict) -> None:
        if self.ref is not None and state.get("ref") is not None:
            self.ref.load_state_dict(state["ref"])
            self.ref_moved = True
        for key, ctl in controllers(self).items():  # resume is exact (TRL entropy_ctrl_state, verl's beta)
            if ctl is not None and state.get(key) is not None:
                ctl.load_state_dict(state[key])
        self.stale.load_state_dict(state)  # the snapshots the next k steps sample with
        if self.pool is not None and state.get("prompt_pool") is not None:
            self.pool.load_state_dict(state["prompt_pool"])
        if state.get("reward_norm"):
            self.task.load_reward_state(state["reward_norm"])
        if self.hacking is not None and state.get("hacking"):
            self.hacking.load_state_dict(state["hacking"])

    def step(self, ctx: RunContext, step: int, rec: dict) -> list[dict]:
        """One step, its phases in the reference loop's order; rec gets every phase's records."""
        cfg, tr = with_kl_coef(self.cfg, self.kl_ctl), self.cfg.train  # objective.kl_coef: the adaptive beta
        clock = PhaseClock(ctx.device)
        # 0. context: what the phases share (policy, pi_ref, components, forwards, the mismatch observer)
        mismatch = self.observers.mismatch()
        sc = StepContext.build(
            cfg, ctx.policy, ctx.components, self.ref, ctx.device, ctx.pad_id, mismatch, teacher=self.teacher
        )
        # 1-2. collect: G samples per prompt and their rewards (rollout.staleness k: theta_{t-k} samples)
        self.stale.begin(ctx.model, step)
        with self.stale.sampler(ctx.model, ctx.backend, step):
            ep, collected = collect(ctx.task, ctx.backend, ctx.render, self.cfg, step, pool=self.pool)
        t_rollout = clock.edge()
        # 3-4. pi_old, pi_ref, advantages (pi_old the stale sampler's under rollout.staleness)
        old = (lambda: self.stale.loaded(ctx.model, step)) if self.stale.k else None
        batch, scored = score_episode(sc, ep, old)
        rec.update(steer_kl(self.kl_ctl, cfg.objective, scored, len(batch)))  # objective.kl_target: next beta
        t_score = clock.edge()
        bad = first_nonfinite({"reward": ep.rewards, "advantage": batch.adv})  # train.nan_policy
        rec.update(self.observers.scored(sc, step, ep, batch, bad is None))
        trained_on, resampled = update_rows(self.cfg, step, batch, ep.rewards)  # a mode's resampling (PF-PPO)
        rec.update(resampled)
        rec.update(self.update(sc, ctx, step, trained_on, bad))  # 5. update
        rec.update(self.observers.updated(sc, batch))
        rec.update(self.after_step(ctx, step))  # 6. after-step: engine sync, pi_ref reset, staleness
        t_update = clock.edge()
        mismatch_records = self.observers.mismatch_records(sc)
        rec.update(step_records(ep, batch, collected, scored, self.hacking, mismatch_records))  # records.py
        rec.update(perf_records(t_rollout, t_score, t_update, ep, tr.inner_epochs, tr.pad_to_multiple_of))
        return logged_samples(ep, step, tr.group_size, tr.samples_to_log)

    def update(self, sc: StepContext, ctx: RunContext, step: int, batch: Batch, bad: str | None) -> dict:
        """5. The policy update, mini-batches in a seeded shuffle; bad: what is not finite in the rewards or the
        advantages (train.nan_policy: stop, or skip the step's update)."""
        tr, out = self.cfg.train, {}
        gen = torch.Generator().manual_seed(step_seed(self.cfg.seed, step, UPDATE_ORDER_SALT))
        warmup = step < tr.component_warmup_steps  # only the components learn (verl's critic_warmup)
        if tr.component_warmup_steps:
            out["train/policy_updated"] = float(not warmup)
        try:
            if bad is not None:
                raise NonFiniteUpdate(bad)
            with PhaseClock.host("perf/policy_update_seconds", out):
                out.update(policy_update(sc, batch, gen, update_policy=not warmup, entropy_ctl=self.entropy_ctl))
        except NonFiniteUpdate as err:  # stop: NonFiniteError; skip_step: the step without (the rest of) its update
            out.update(ctx.nonfinite(step, str(err)))
        return out

    def after_step(self, ctx: RunContext, step: int) -> dict:
        """6. The engine takes the updated weights (under rollout.staleness the next rollout syncs its stale
        ones); pi_ref <- pi_theta when a mode's schedule says so (objective.ref_update_every: iterative GRPO)."""
        out = {}
        if not self.stale.k:
            with PhaseClock.host("perf/sync_seconds", out):  # hf: the copy into its engine (0 if shared)
                ctx.backend.sync_weights(ctx.model)
            out.update(sync_times(ctx.backend))  # vLLM: its own push time and the check's
        if self.ref is not None and resets_reference(self.cfg.objective, step):
            self.ref.load_state_dict(ctx.model.state_dict())
            self.ref_moved = True
        self.stale.end(step)
        if self.stale.k:
            out["staleness/steps"] = float(step - source_step(step, self.stale.k))
        return out
