"""The RL trainer: the step of `harness train CONFIG` when `trainer: rl`.

    step: N prompts -> G rollouts each -> rewards (verifier + overlong shaping)       core/collect.py
          -> [old / ref log-probs] -> advantages (the objective: group baselines,     core/scoring.py
             critic/GAE, KL in the reward)
          -> K epochs x mini-batches x micro-batches of the objective's loss          rl/update.py
             -> optimizer steps of the policy and its components -> metrics            rl/records.py

Every algorithm is the same code path: the objective config decides the rest. The run shell
(harness/train/run/shell.py) owns everything around the step (run directory, resume,
checkpoints, eval schedule, signals, summary).
"""

from __future__ import annotations

import time

import torch

from harness.config import ConfigError
from harness.models.logprobs import padded_widths
from harness.models.moe import is_moe
from harness.objective import explained_variance, inputs_needed
from harness.objective.entropy_control import adaptive_entropy
from harness.objective.kl_control import adaptive_kl, steer_kl
from harness.train.core.batch import Batch
from harness.train.core.collect import collect, step_seed
from harness.train.core.episode import Episode
from harness.train.core.mismatch import MismatchStats, router_old_new
from harness.train.core.nonfinite import NonFiniteUpdate, first_nonfinite
from harness.train.core.prompt_pool import PromptPool
from harness.train.core.scoring import frozen_reference, score_episode, single_pass
from harness.train.core.trainer import RunContext, Trainer
from harness.train.diagnostics.group_stats import extreme_grad_share, group_records
from harness.train.diagnostics.hacking import hacking_probe
from harness.train.diagnostics.metrics import eos_weight_shares
from harness.train.rl.records import logged_samples, perf_records, step_records
from harness.train.rl.staleness import StaleWeights, source_step
from harness.train.rl.update import policy_update

UPDATE_ORDER_SALT = 555  # step_seed salt of the update's row shuffle (mini-batch order)


def sync_times(backend) -> dict:
    """perf/sync_seconds (the weight push into the engine) and perf/verify_seconds (the probe check after it, on
    its schedule: syncs 1-3 and every 10th, 0 otherwise) of a backend that syncs (vLLM); {} for hf, which generates
    with the trained module itself. Both are inside perf/update_seconds; the bench takes the check out of the
    timed step (harness/bench/figures.py ours_steps)."""
    if not hasattr(backend, "last_verify_seconds"):
        return {}
    return {"perf/sync_seconds": backend.last_sync_seconds, "perf/verify_seconds": backend.last_verify_seconds}


def with_kl_coef(cfg, kl_ctl):
    """cfg with objective.kl_coef = the adaptive controller's beta for this step's scoring; cfg itself without one."""
    if kl_ctl is None:
        return cfg
    return cfg.model_copy(update={"objective": cfg.objective.model_copy(update={"kl_coef": kl_ctl.value})})


def controllers(trainer) -> dict:
    """The adaptive coefficients' states by checkpoint key, None where off: the entropy bonus's and PPO's beta."""
    return {"entropy_control": getattr(trainer, "entropy_ctl", None), "kl_control": getattr(trainer, "kl_ctl", None)}


def phase_clock(device: torch.device) -> float:
    """time.perf_counter() at a phase edge, after the device's queued work (torch.cuda.synchronize on CUDA;
    nothing on a CPU): a phase's perf/*_seconds is the work it launched, not the launches alone. Four a step."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def batch_explained_variance(batch: Batch) -> float:
    """1 - Var[R - V] / Var[R] over the whole step's response tokens, V the critic's predictions before the
    update (old_values; as CleanRL and Stable-Baselines log it): one number for the batch, whatever the
    micro-batches or the number of processes (value_loss's per-call metric is over its micro-batch only)."""
    return explained_variance(batch.extras["old_values"], batch.extras["returns"], batch.mask)


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
        self.moe = is_moe(ctx.model)
        if obj.routing_replay and not self.moe:
            raise ConfigError(
                f"objective.routing_replay=true needs an MoE model; model.name={cfg.model.name!r} has no routers"
            )
        self.single_pass = single_pass(cfg)  # the update's first forward is pi_old's (core/scoring.py)
        self.entropy_ctl = adaptive_entropy(obj)  # the adaptive entropy coefficient's state (checkpointed), or None
        self.kl_ctl = adaptive_kl(obj)  # objective.kl_target: PPO's adaptive beta (checkpointed), or None
        self.stale = StaleWeights(cfg.rollout.staleness)  # rollout.staleness: sample with theta_{t-k} (staleness.py)
        npr = obj.no_positive_resampling  # prompts solved at this running pass rate leave the pool (ScaleRL)
        self.pool = PromptPool(npr) if npr is not None else None
        self.task = ctx.task  # its running reward normalisers are part of the checkpoint
        self.hacking = hacking_probe(ctx.task, cfg.task.hacking_window)  # a reward model and a verifier: hacking/*

    def frozen_modules(self) -> list[torch.nn.Module]:
        """pi_ref when it is a copy of its own (with LoRA it is the policy with its adapters off)."""
        return [self.ref] if isinstance(self.ref, torch.nn.Module) else []

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
        ref = self.ref if self.ref is not None and self.cfg.objective.ref_update_every else None
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
        cfg, tr = self.cfg, self.cfg.train
        t0 = phase_clock(ctx.device)
        self.stale.begin(ctx.model, step)
        with self.stale.sampler(ctx.model, ctx.backend, step):  # rollout.staleness: theta_{t-k} samples
            ep, coll = collect(ctx.task, ctx.backend, ctx.render, cfg, step, pool=self.pool)
        t1 = phase_clock(ctx.device)  # one clock an edge: the end of a phase is the start of the next
        old = (lambda: self.stale.loaded(ctx.model, step)) if self.stale.k else None  # pi_old = the sampler
        batch, mismatch, scored_metrics = score_episode(
            with_kl_coef(cfg, self.kl_ctl), ep, ctx.model, self.ref, ctx.components, ctx.device, ctx.pad_id, old
        )
        rec.update(steer_kl(self.kl_ctl, cfg.objective, scored_metrics, len(batch)))  # objective.kl_target: beta
        t2 = phase_clock(ctx.device)
        rec.update(self._update(ctx, step, ep, batch, mismatch))
        self.stale.end(step)
        if self.stale.k:
            rec["staleness/steps"] = float(step - source_step(step, self.stale.k))
        if "returns" in batch.extras:  # a critic: how much of the returns' variance its predictions explain
            rec["value/explained_variance"] = batch_explained_variance(batch)
        t3 = phase_clock(ctx.device)
        rec.update(step_records(ep, batch, mismatch, coll, scored_metrics, self.hacking))  # records.py
        rec.update(perf_records(t1 - t0, t2 - t1, t3 - t2, ep, tr.inner_epochs, tr.pad_to_multiple_of))
        return logged_samples(ep, step, tr.group_size, tr.samples_to_log)

    def _update(self, ctx: RunContext, step: int, ep: Episode, batch: Batch, mismatch: MismatchStats) -> dict:
        """Group records, the policy update (train.nan_policy), router metrics, weight sync, ref update."""
        cfg, obj, tr = self.cfg, self.cfg.objective, self.cfg.train
        out = {}
        bad = first_nonfinite({"reward": ep.rewards, "advantage": batch.adv})  # train.nan_policy
        # per-group stats -> groups.jsonl (+ grad-norm share of extreme groups): harness/train/diagnostics/group_stats.py
        out.update(group_records(ep, batch.adv, batch.mask, step))
        out.update(eos_weight_shares(obj, batch.adv, batch.mask, ep.rollout.truncated, ep.correct))  # length bias
        if tr.grad_share_every and step % tr.grad_share_every == 0 and bad is None:
            out.update(extreme_grad_share(ctx.model, batch, ep, cfg, ctx.pad_id, ctx.components))
        gen = torch.Generator().manual_seed(step_seed(cfg.seed, step, UPDATE_ORDER_SALT))
        try:
            if bad is not None:
                raise NonFiniteUpdate(bad)
            warmup = step < tr.component_warmup_steps  # only the components learn (verl's critic_warmup)
            if tr.component_warmup_steps:
                out["train/policy_updated"] = float(not warmup)
            t_policy = time.perf_counter()
            out.update(
                policy_update(
                    ctx.policy,
                    ctx.components,
                    batch,
                    cfg,
                    ctx.pad_id,
                    gen,
                    self.single_pass,
                    mismatch,
                    update_policy=not warmup,
                    entropy_ctl=self.entropy_ctl,
                )
            )
            # host seconds (no device wait added): which part of perf/update_seconds a slow update spent where
            out["perf/policy_update_seconds"] = time.perf_counter() - t_policy
        except NonFiniteUpdate as err:  # stop: NonFiniteError; skip_step: the step without (the rest of) its update
            out.update(ctx.nonfinite(step, str(err)))
        if self.moe:  # router/disagree_old_new: the updated policy's routing on the same batch, packed as the rollout's
            with padded_widths(cfg.train.pad_to_multiple_of):
                router_old_new(ctx.model, batch, mismatch, ctx.pad_id, cfg.rollout.temperature, obj.routing_replay)
        if not self.stale.k:  # rollout.staleness: the next rollout syncs the engine with its stale weights
            t_sync = time.perf_counter()
            ctx.backend.sync_weights(ctx.model)
            out["perf/sync_seconds"] = time.perf_counter() - t_sync  # hf: the copy into its engine (0 if shared)
            out.update(sync_times(ctx.backend))  # vLLM: its own push time and the check's
        if self.ref is not None and obj.ref_update_every and (step + 1) % obj.ref_update_every == 0:
            self.ref.load_state_dict(ctx.model.state_dict())  # iterative GRPO: pi_ref <- pi_theta
        return out
