"""The RL loop: `harness train CONFIG [key=value ...] --out DIR`.

    for step: N prompts -> G rollouts each -> rewards (verifier + overlong shaping)
              -> [old / ref log-probs] -> [KL in reward] -> advantages (objective §1)
              -> K epochs x mini-batches x micro-batches of policy_loss -> optimizer steps
              -> metrics; periodic eval (pass@k); checkpoint + flush every N steps

Every algorithm is the same code path: the objective config decides the rest.
See harness/train/rundir.py for the crash-safety contract (resume without lost or
duplicated steps).
"""
from __future__ import annotations

import copy
import resource
import time
from contextlib import nullcontext
from pathlib import Path

import torch

from harness.config import ConfigError, RunConfig
from harness.models.moe import routers
from harness.objective import group_advantages
from harness.objective.advantages import critic_advantages
from harness.objective.kl import kl_in_reward, token_rewards_with_kl
from harness.rollout import make_backend
from harness.tracking.pending import make_tracker, sync_pending
from harness.train.collect import collect, step_seed
from harness.train.critic import ValueModel
from harness.train.eval_cache import eval_at
from harness.train.evaluate import is_eval_step, paired_rise
from harness.train.faults import RunFault, StoppedBySignal
from harness.train.group_stats import extreme_grad_share, group_records
from harness.train.logprobs import response_logprobs
from harness.train.metrics import eos_weight_shares, rollout_metrics
from harness.train.mismatch import MismatchStats, router_old_new
from harness.train.nonfinite import NonFiniteUpdate, first_nonfinite, on_nonfinite
from harness.train.resume import resume_point
from harness.train.routing import capture_routing
from harness.train.rundir import RunDir, read_jsonl
from harness.train.run_setup import open_run, start_run
from harness.train.stop import StopOnSignal
from harness.train.update import policy_update

EVAL_SEED_OFFSET = 7_777


def _peak_mem_mb() -> float:
    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


@torch.no_grad()
def old_policy_logprobs(model, ep, pad_id, temperature, micro, routing=None, mismatch=None, loss_mask=None):
    """(B, T) log-probs of the episode's responses under `model`. routing: (B, S, L, k) rollout
    expert choices to replay (MoE), or None. mismatch: a MismatchStats fed with these log-probs
    (as the old policy's) against the sampler's on `loss_mask`, and with the routing used."""
    r = ep.rollout
    capture = mismatch is not None and bool(routers(model))
    outs = []
    for s in range(0, len(r.prompt_ids), micro):
        sl = slice(s, s + micro)
        with capture_routing(model) if capture else nullcontext() as calls:
            lp, _, _ = response_logprobs(model, r.prompt_ids[sl], r.response_ids[sl], r.response_mask[sl], pad_id,
                                         temperature, routing=routing[sl] if routing is not None else None)
        if mismatch is not None:
            mismatch.add_logprobs(lp, r.sampler_logp[sl].to(lp.device), loss_mask[sl])
            if capture:
                rr = r.extras.get("routing")
                mismatch.add_routing(list(range(s, s + lp.shape[0])), r.prompt_ids[sl], r.response_mask[sl], calls,
                                     rr[sl] if rr is not None else None)
        outs.append(lp)
    return torch.cat(outs)


def end_status(err: BaseException) -> str:
    """The MLflow status of a run that `err` ended: a fault's own, FAILED for an error, KILLED otherwise."""
    if isinstance(err, (RunFault, StoppedBySignal)):
        return err.mlflow_status
    return "FAILED" if isinstance(err, Exception) else "KILLED"


def train(cfg: RunConfig, out_dir: str | Path) -> dict:
    """Run (or resume) one training run; returns the summary written to DIR/summary.json.
    SIGTERM / SIGINT stop it at the end of a step, checkpointed (harness/train/stop.py)."""
    if cfg.objective.algorithm == "dpo":
        raise ConfigError("objective.preset=dpo is an offline preference loss: harness.train.dpo.train_dpo runs it")
    with StopOnSignal() as stop:
        return _train(cfg, out_dir, stop)


def _train(cfg: RunConfig, out_dir: str | Path, stop: StopOnSignal) -> dict:
    run, done = open_run(cfg, out_dir)
    if done is not None:
        sync_pending(cfg, run.root)  # what MLflow missed while it was down
        return done
    obj, tr = cfg.objective, cfg.train
    su = start_run(run, cfg)
    device, task, policy, tok, render, pad_id = su.device, su.task, su.policy, su.tok, su.render, su.pad_id
    ref = copy.deepcopy(policy).eval().requires_grad_(False) if obj.kl_coef > 0 else None  # pi_ref = initial policy
    ckpt, loaded = resume_point(run, lambda c: (type(policy).from_pretrained(c, dtype=policy.dtype), run.load_state(c)))
    if ckpt is not None:
        policy = loaded[0].to(device)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=tr.lr, betas=tr.betas, weight_decay=tr.weight_decay)
    critic = ValueModel(policy).to(device) if obj.baseline == "critic" else None  # PPO
    critic_opt = torch.optim.AdamW(critic.parameters(), lr=tr.critic_lr, betas=tr.betas) if critic is not None else None

    start, elapsed0 = 0, 0.0
    if ckpt is not None:
        state = loaded[1]
        optimizer.load_state_dict(state["optimizer"])
        if critic is not None:
            critic.load_state_dict(state["critic"])
            critic_opt.load_state_dict(state["critic_optimizer"])
        if ref is not None and state.get("ref") is not None:
            ref.load_state_dict(state["ref"])
        start, elapsed0 = state["step"] + 1, state["elapsed"]
        run.truncate_after(state["step"])
        print(f"[harness] resuming {run.root} at step {start} from {ckpt.name}")

    tracker = make_tracker(cfg, run.root)  # MLflow down: buffered on disk (harness/tracking/pending.py)
    if ckpt is not None:  # flush what the checkpoint holds (idempotent: both sinks skip known steps)
        run.flush(state["pending_metrics"], state["pending_samples"])
        tracker.log_steps(state["pending_metrics"])

    moe = bool(routers(policy))
    if obj.routing_replay and not moe:
        raise ConfigError(f"objective.routing_replay=true needs an MoE model; model.name={cfg.model.name!r} "
                          "has no routers")
    backend = make_backend(cfg.rollout, policy, tok)
    eval_problems = task.problems(cfg.eval.num_prompts, seed=cfg.eval.seed + EVAL_SEED_OFFSET, split="eval")
    single_pass = tr.inner_epochs == 1 and tr.mini_batches == 1 and not obj.tis_cap
    old_from_rollout = cfg.reuses_rollout_logp()  # train.old_logp: the hf sampler's log-probs are pi_old's
    pending_metrics, pending_samples = [], []
    t_run = time.perf_counter()
    last_ckpt = ckpt.name if ckpt is not None else None

    def checkpoint(step: int) -> float:
        nonlocal pending_metrics, pending_samples, last_ckpt
        t0 = time.perf_counter()
        state = {"step": step, "optimizer": optimizer.state_dict(),
                 "ref": ref.state_dict() if ref is not None and obj.ref_update_every else None,
                 "critic": critic.state_dict() if critic is not None else None,
                 "critic_optimizer": critic_opt.state_dict() if critic is not None else None,
                 "elapsed": elapsed0 + time.perf_counter() - t_run,
                 "pending_metrics": pending_metrics, "pending_samples": pending_samples}
        run.save_checkpoint(step, policy, state, tok)
        run.flush(pending_metrics, pending_samples)
        tracker.log_steps(pending_metrics)
        pending_metrics, pending_samples = [], []
        last_ckpt = f"step_{step:06d}"
        return time.perf_counter() - t0

    def end_step(step: int, rec: dict, samples: list[dict]) -> float:
        """Keep the step's records, print it, checkpoint when due or when a signal asked to stop
        (then stop); returns the checkpoint's seconds (0 without one)."""
        pending_metrics.append(rec)
        pending_samples.extend(samples)
        _print_step(rec)
        seconds = checkpoint(step) if (step + 1) % tr.checkpoint_every == 0 or stop.requested else 0.0
        if stop.requested:
            raise stop.stop(step, last_ckpt)
        return seconds

    last_ckpt_seconds = 0.0
    try:
        for step in range(start, tr.steps + 1):
            t_step = time.perf_counter()
            rec: dict = {"step": step}
            is_last = step == tr.steps
            if is_eval_step(cfg, step, is_last):
                t0 = time.perf_counter()
                rec.update(eval_at(task, backend, render, eval_problems, cfg, step, run.root))
                rec["perf/eval_seconds"] = time.perf_counter() - t0
            if is_last:  # the final record holds the eval of the trained policy only
                rec["perf/elapsed_seconds"] = elapsed0 + time.perf_counter() - t_run
                pending_metrics.append(rec)
                checkpoint(step)
                break

            t0 = time.perf_counter()
            ep, coll = collect(task, backend, render, cfg, step)
            t_rollout = time.perf_counter() - t0
            r = ep.rollout
            mask = r.response_mask.to(device)
            if obj.mask_truncated:
                mask = mask * (~r.truncated).float().unsqueeze(1).to(device)
            micro = tr.micro_batch_size or len(r.prompt_ids)

            t0 = time.perf_counter()
            # routing replay (R3): every forward of the policy uses the rollout's expert choices
            routing = r.extras.get("routing") if obj.routing_replay else None
            if obj.routing_replay and routing is None:
                raise ConfigError(f"objective.routing_replay=true: rollout.backend={cfg.rollout.backend!r} "
                                  "returned no routing to replay")
            mismatch = MismatchStats()  # fed by the old policy's first forward (here, or in the update)
            if single_pass:
                old_logp = None
            elif old_from_rollout:
                old_logp = r.sampler_logp.to(device)
            else:
                old_logp = old_policy_logprobs(policy, ep, pad_id, cfg.rollout.temperature, micro, routing, mismatch, mask)
            ref_logp = old_policy_logprobs(ref, ep, pad_id, cfg.rollout.temperature, micro) if ref is not None else None
            rewards = ep.rewards.to(device)
            kl_reward = obj.kl_placement == "reward" and ref_logp is not None
            cur = old_logp
            if cur is None and kl_reward:
                cur = old_policy_logprobs(policy, ep, pad_id, cfg.rollout.temperature, micro, routing)
            extra = {}
            if critic is not None:  # PPO: per-token rewards (KL inside), GAE on the critic's values
                with torch.no_grad():
                    old_values = torch.cat([critic(r.prompt_ids[s:s + micro], r.response_ids[s:s + micro], mask[s:s + micro], pad_id)
                                            for s in range(0, len(r.prompt_ids), micro)])
                tok_rewards = token_rewards_with_kl(obj, rewards, cur if cur is not None else r.sampler_logp.to(device),
                                                    ref_logp, mask)
                adv, returns = critic_advantages(obj, tok_rewards, old_values, mask)
                extra = {"old_values": old_values, "returns": returns}
            else:
                if kl_reward:
                    rewards = kl_in_reward(obj, rewards, cur, ref_logp, mask)
                adv = group_advantages(obj, rewards, tr.group_size)
            t_score = time.perf_counter() - t0
            bad = first_nonfinite({"reward": ep.rewards, "advantage": adv})  # train.nan_policy

            t0 = time.perf_counter()
            batch = {"prompt_ids": r.prompt_ids, "response_ids": r.response_ids.to(device), "mask": mask,
                     "adv": adv, "old_logp": old_logp, "ref_logp": ref_logp, "rollout_logp": r.sampler_logp.to(device),
                     "routing": r.extras.get("routing"), **extra}
            # per-group stats -> groups.jsonl (+ grad-norm share of extreme groups): harness/train/group_stats.py
            rec.update(group_records(ep, adv, mask, step))
            rec.update(eos_weight_shares(obj, adv, mask, r.truncated, ep.correct))  # agg/eos_share_*: length bias
            if tr.grad_share_every and step % tr.grad_share_every == 0 and bad is None:
                rec.update(extreme_grad_share(policy, batch, ep, cfg, pad_id))
            gen = torch.Generator().manual_seed(step_seed(cfg.seed, step, 555))
            try:
                if bad is not None:
                    raise NonFiniteUpdate(bad)
                upd = policy_update(policy, optimizer, batch, cfg, pad_id, gen, single_pass, critic, critic_opt, mismatch)
            except NonFiniteUpdate as err:  # stop: NonFiniteError; skip_step: the step without (the rest of) its update
                upd = on_nonfinite(tr.nan_policy, step, str(err), last_ckpt)
            if moe:  # router/disagree_old_new: the updated policy's routing on the same batch
                router_old_new(policy, batch, mismatch, pad_id, cfg.rollout.temperature, obj.routing_replay)
            backend.sync_weights(policy)
            if ref is not None and obj.ref_update_every and (step + 1) % obj.ref_update_every == 0:
                ref.load_state_dict(policy.state_dict())  # iterative GRPO: pi_ref <- pi_theta
            t_update = time.perf_counter() - t0

            n_tok = float(r.response_mask.sum())
            rec.update(rollout_metrics(ep))
            rec.update(coll)
            rec.update(upd)
            rec.update(mismatch.result())
            rec["adv/abs_mean"] = float((adv.abs() * mask).sum() / mask.sum()) if adv.dim() == 2 else float(adv.abs().mean())
            rec.update({"perf/rollout_seconds": t_rollout, "perf/score_seconds": t_score,
                        "perf/update_seconds": t_update, "perf/checkpoint_seconds": last_ckpt_seconds,
                        "perf/rollout_tokens_per_s": n_tok / max(t_rollout, 1e-9),
                        "perf/train_tokens_per_s": n_tok * tr.inner_epochs / max(t_update, 1e-9),
                        "perf/step_seconds": time.perf_counter() - t_step, "perf/peak_mem_mb": _peak_mem_mb(),
                        "perf/elapsed_seconds": elapsed0 + time.perf_counter() - t_run})
            samples = [{"step": step, "prompt": p.prompt, "difficulty": p.difficulty, "completion": r.texts[i * tr.group_size],
                        "reward": float(ep.rewards[i * tr.group_size]), "correct": bool(ep.scores[i * tr.group_size].correct)}
                       for i, p in enumerate(ep.problems[:tr.samples_to_log])]
            last_ckpt_seconds = end_step(step, rec, samples)
    except BaseException as err:
        tracker.finish(end_status(err))
        backend.close()
        raise
    backend.close()

    summary = _summary(run, cfg, elapsed0 + time.perf_counter() - t_run)
    run.write_summary(summary)
    for name in ("config.yaml", "summary.json", "samples.jsonl"):
        if (run.root / name).exists():
            tracker.log_artifact(str(run.root / name))
    tracker.finish("FINISHED")
    return summary


def _print_step(rec: dict) -> None:
    keys = [("reward/mean", "reward"), ("reward/accuracy", "acc"), ("length/mean", "len"), ("clip/frac", "clip"),
            ("entropy", "H"), ("eval/pass_at_1", "eval@1"), ("perf/step_seconds", "s")]
    parts = [f"{short}={rec[k]:.3f}" for k, short in keys if k in rec]
    print(f"[harness] step {rec['step']:4d} " + " ".join(parts), flush=True)


def _summary(run: RunDir, cfg: RunConfig, elapsed: float) -> dict:
    records = read_jsonl(run.metrics_path)
    evals = [r for r in records if "eval/pass_at_1" in r]
    first, last = (evals[0], evals[-1]) if evals else ({}, {})
    return {
        "algorithm": cfg.objective.algorithm,
        "steps": cfg.train.steps,
        "wall_seconds": elapsed,
        "initial_eval": {k: v for k, v in first.items() if k.startswith("eval/")},
        "final_eval": {k: v for k, v in last.items() if k.startswith("eval/")},
        "tags": cfg.tracking.tags,
        "mean_step_seconds": (sum(r.get("perf/step_seconds", 0.0) for r in records) / max(1, len(records) - 1)),
        "paired_rise": paired_rise(run.root),  # first -> last eval, bootstrap 95% interval over prompts
    }
