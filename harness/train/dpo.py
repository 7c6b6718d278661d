"""DPO, offline or iterative: `harness train CONFIG objective.preset=dpo --out DIR`.

    for round r in 0..dpo.rounds-1 (one round = offline DPO; more = iterative RPO, 2404.19733):
      pairs:      sample the policy at the start of round r on fresh train prompts, correct =
                  chosen, wrong = rejected, up to dpo.pairs_per_prompt per prompt (dpo_pairs.py);
                  or (one round only) read dpo.pairs (JSONL) -> DIR/pairs[.round{r}].jsonl
      reference:  the policy at the start of round r, frozen; its sequence log-probs of every
                  pair are computed once and saved (DIR/pairs_ref[.round{r}].pt), so no second
                  model is held and a resumed run uses exactly the same reference
      for step:   dpo.epochs passes over the round's pairs in batches of dpo.batch_size
                  (reshuffled each epoch) -> sequence log-prob sums of chosen and rejected
                  -> dpo_loss (docs/objective.md §8; DPO 2305.18290, IPO 2310.12036, RPO's NLL term
                  with objective.dpo_sft_coef) -> AdamW step (one optimizer across rounds)
                  -> metrics; periodic eval (pass@k, the RL runs' eval_at()); checkpoint + flush

Log-probs are taken at temperature 1 (the model's own distribution), not the rollout
temperature: DPO's implicit reward is beta * log pi/pi_ref of the model itself.
Besides the per-batch §8 metrics, every eval also scores ALL pairs under the current
policy (eval/pairs/logps_chosen, eval/pairs/logps_rejected, eval/pairs/margin): one
fixed set per round, so likelihood displacement (chosen AND rejected log-probs fall
while the margin grows) is read off a curve that batch sampling does not make noisy.

Run directory, checkpoint/resume and MLflow follow the RL loop exactly (rundir.py: metrics
since the last checkpoint are flushed only once it is on disk; a resumed run restarts at
checkpoint step + 1 with the same batches, since batch order is a function of seed + round +
step). Every round ends with a checkpoint, so the next round's pairs always come from a saved policy.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from harness.config import ConfigError, RunConfig
from harness.objective import dpo_loss
from harness.rollout import make_backend
from harness.tracking.pending import make_tracker, sync_pending
from harness.train.collect import step_seed
from harness.train.dpo_pairs import PAIRS_SALT, PreferencePair, build_pairs, file_report, read_pairs, write_pairs
from harness.train.eval_cache import eval_at
from harness.train.evaluate import is_eval_step
from harness.train.logprobs import response_logprobs
from harness.train.loop import EVAL_SEED_OFFSET, _peak_mem_mb, _summary, end_status
from harness.train.nonfinite import first_nonfinite, on_nonfinite
from harness.train.resume import resume_point
from harness.train.run_setup import open_run, start_run
from harness.train.stop import StopOnSignal
from harness.train.rundir import RunDir, atomic_write_text


@dataclass
class EncodedPairs:
    """Token ids of n pairs: rendered prompt, chosen + EOS, rejected + EOS."""

    prompts: list[list[int]]
    chosen: list[list[int]]
    rejected: list[list[int]]

    def __len__(self) -> int:
        return len(self.prompts)


def encode_pairs(pairs: list[PreferencePair], tok, render) -> EncodedPairs:
    """render: anything with a .prompt -> prompt ids, the policy's own (policy_init.make_render:
    template + model.prompt_suffix), so pairs are scored on the prompts the policy samples from."""
    def resp(text: str) -> list[int]:
        return tok.encode(text, add_special_tokens=False) + [tok.eos_token_id]

    return EncodedPairs([render(p) for p in pairs], [resp(p.chosen) for p in pairs],
                        [resp(p.rejected) for p in pairs])


def sequence_logps(model, enc: EncodedPairs, idx: list[int], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequence log-prob sums (B,) of the chosen and of the rejected responses of pairs `idx`,
    in one forward over 2B rows (chosen rows first). Gradients flow unless under no_grad."""
    B = len(idx)
    responses = [enc.chosen[i] for i in idx] + [enc.rejected[i] for i in idx]
    T = max(len(r) for r in responses)
    ids = torch.full((2 * B, T), pad_id, dtype=torch.long)  # (2B, T)
    mask = torch.zeros((2 * B, T))
    for row, r in enumerate(responses):
        ids[row, :len(r)] = torch.tensor(r, dtype=torch.long)
        mask[row, :len(r)] = 1.0
    prompts = [enc.prompts[i] for i in idx] * 2
    logp, _, _ = response_logprobs(model, prompts, ids, mask, pad_id, temperature=1.0)  # (2B, T), 0 on padding
    seq = logp.sum(-1)  # (2B,)
    return seq[:B], seq[B:]


@torch.no_grad()
def all_logps(model, enc: EncodedPairs, pad_id: int, chunk: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(chosen (n,), rejected (n,)) sequence log-probs of every pair, in eval mode."""
    was_training = model.training
    model.eval()
    parts = [sequence_logps(model, enc, list(range(s, min(s + chunk, len(enc)))), pad_id)
             for s in range(0, len(enc), chunk)]
    model.train(was_training)
    return torch.cat([c for c, _ in parts]).float(), torch.cat([r for _, r in parts]).float()


def batch_indices(seed: int, step: int, n: int, batch_size: int) -> list[int]:
    """Pairs of optimizer step `step`: epoch e = step // steps_per_epoch walks a permutation
    seeded by (seed, e), so a resumed run sees exactly the batches of an uninterrupted one."""
    per_epoch = math.ceil(n / batch_size)
    epoch, b = divmod(step, per_epoch)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(step_seed(seed, epoch, PAIRS_SALT + 2))).tolist()
    return perm[b * batch_size:(b + 1) * batch_size]


def round_steps(cfg: RunConfig, n_pairs: int, done: int) -> int:
    """Optimizer steps of a round of n_pairs pairs, `done` steps having run in earlier rounds
    (dpo.max_steps caps the total over all rounds)."""
    d = cfg.dpo
    steps = d.epochs * math.ceil(n_pairs / d.batch_size)
    return max(0, min(steps, d.max_steps - done)) if d.max_steps else steps


@dataclass
class Round:
    """The pairs of one round, encoded, with their frozen reference log-probs (n,) each."""

    index: int
    report: dict
    enc: EncodedPairs
    ref_chosen: torch.Tensor
    ref_rejected: torch.Tensor


def _round_files(run: RunDir, r: int) -> tuple[Path, Path, Path]:
    """(pairs, report, reference log-probs) of round r; round 0 keeps the one-round names."""
    tag = "" if r == 0 else f".round{r}"
    return (run.root / f"pairs{tag}.jsonl", run.root / f"pairs_report{tag}.json", run.root / f"pairs_ref{tag}.pt")


def _load_or_build_round(run: RunDir, cfg: RunConfig, r: int, task, backend, policy, tok, render, pad_id) -> Round:
    """Round r's pairs and reference log-probs from DIR if an earlier attempt wrote them, else
    built from `policy` (the policy at the start of round r) and written (report, then
    reference, then pairs.jsonl last: its presence means all three are complete)."""
    path, report_path, ref_path = _round_files(run, r)
    if path.exists():
        pairs = read_pairs(path)
        report = json.loads(report_path.read_text()) if report_path.exists() else file_report(path, pairs)
    else:
        t0 = time.perf_counter()
        if cfg.dpo.pairs == "generate":
            backend.sync_weights(policy)
            pairs, report = build_pairs(task, backend, render, cfg, r)
            if not pairs:
                raise RuntimeError(f"no preference pairs in round {r}: {json.dumps(report)}; the policy solves every "
                                   "prompt or none (raise dpo.num_prompts or dpo.samples_per_prompt, or change the task mix)")
        else:
            src = Path(cfg.dpo.pairs)
            pairs = read_pairs(src)
            report = file_report(src, pairs)
        report["seconds"] = time.perf_counter() - t0
    enc = encode_pairs(pairs, tok, render)
    if ref_path.exists():
        ref = torch.load(ref_path)
        ref_chosen, ref_rejected = ref["chosen"], ref["rejected"]
    else:  # pi_ref of round r = the policy at its start, frozen (computed once: no second model is held)
        ref_chosen, ref_rejected = all_logps(policy, enc, pad_id, cfg.dpo.batch_size)
    if not path.exists():
        atomic_write_text(report_path, json.dumps(report, indent=2, sort_keys=True))
        tmp = ref_path.with_name(f".{ref_path.name}.tmp")
        torch.save({"chosen": ref_chosen, "rejected": ref_rejected}, tmp)
        tmp.replace(ref_path)
        write_pairs(path, pairs)
    return Round(r, report, enc, ref_chosen, ref_rejected)


def train_dpo(cfg: RunConfig, out_dir: str | Path) -> dict:
    """Run (or resume) one DPO run; returns the summary written to DIR/summary.json.
    SIGTERM / SIGINT stop it at the end of a step, checkpointed (harness/train/stop.py)."""
    if cfg.objective.algorithm != "dpo":
        raise ConfigError(f"the DPO trainer needs objective.preset=dpo (got {cfg.objective.algorithm!r})")
    with StopOnSignal() as stop:
        return _train_dpo(cfg, out_dir, stop)


def _train_dpo(cfg: RunConfig, out_dir: str | Path, stop: StopOnSignal) -> dict:
    run, done = open_run(cfg, out_dir)
    if done is not None:
        sync_pending(cfg, run.root)
        return done
    if cfg.dpo.pairs != "generate" and not (run.root / "pairs.jsonl").exists():
        read_pairs(cfg.dpo.pairs)  # a bad file fails here, before any model is loaded
    tr, d = cfg.train, cfg.dpo
    su = start_run(run, cfg)
    device, task, policy, tok, render, pad_id = su.device, su.task, su.policy, su.tok, su.render, su.pad_id
    backend = make_backend(cfg.rollout, policy, tok)

    def load_round(r: int) -> Round:
        rd = _load_or_build_round(run, cfg, r, task, backend, policy, tok, render, pad_id)
        info = {k: v for k, v in rd.report.items() if k != "pairs_by_difficulty"}
        print(f"[harness] dpo round {r}: {len(rd.enc)} pairs ({json.dumps(info)})", flush=True)
        return rd

    rounds = [load_round(0)]  # from the initial policy, before any checkpoint is loaded

    ckpt, loaded = resume_point(run, lambda c: (type(policy).from_pretrained(c, dtype=policy.dtype), run.load_state(c)))
    if ckpt is not None:  # weights loaded in place: the backend keeps sampling from `policy`
        policy.load_state_dict(loaded[0].state_dict())
        backend.sync_weights(policy)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=tr.lr, betas=tr.betas, weight_decay=tr.weight_decay)
    start, elapsed0 = 0, 0.0
    if ckpt is not None:
        state = loaded[1]
        optimizer.load_state_dict(state["optimizer"])
        start, elapsed0 = state["step"] + 1, state["elapsed"]
        run.truncate_after(state["step"])
        print(f"[harness] resuming {run.root} at step {start} from {ckpt.name}")

    tracker = make_tracker(cfg, run.root)  # MLflow down: buffered on disk (harness/tracking/pending.py)
    if ckpt is not None:  # flush what the checkpoint holds (idempotent: both sinks skip known steps)
        run.flush(state["pending_metrics"], [])
        tracker.log_steps(state["pending_metrics"])

    eval_problems = task.problems(cfg.eval.num_prompts, seed=cfg.eval.seed + EVAL_SEED_OFFSET, split="eval")
    pending_metrics: list[dict] = []
    t_run = time.perf_counter()
    last_ckpt = ckpt.name if ckpt is not None else None

    def checkpoint(step: int) -> float:
        nonlocal pending_metrics, last_ckpt
        t0 = time.perf_counter()
        state = {"step": step, "optimizer": optimizer.state_dict(), "elapsed": elapsed0 + time.perf_counter() - t_run,
                 "pending_metrics": pending_metrics, "pending_samples": []}
        run.save_checkpoint(step, policy, state, tok)
        run.flush(pending_metrics, [])
        tracker.log_steps(pending_metrics)
        pending_metrics = []
        last_ckpt = f"step_{step:06d}"
        return time.perf_counter() - t0

    def eval_metrics(rd: Round, step: int) -> dict:
        t0 = time.perf_counter()
        backend.sync_weights(policy)
        out = eval_at(task, backend, render, eval_problems, cfg, step, run.root)  # step 0: the warm start's, cached
        out.update(_pair_metrics(policy, rd.enc, rd.ref_chosen, rd.ref_rejected, cfg, pad_id))
        out["perf/eval_seconds"] = time.perf_counter() - t0
        return out

    last_ckpt_seconds, offset, rd = 0.0, 0, rounds[0]
    try:
        for r in range(d.rounds):
            if r > 0:
                if d.max_steps and offset >= d.max_steps:
                    break
                rd = load_round(r)  # built from the policy at the start of round r (steps < offset done)
                rounds.append(rd)
            n_steps = round_steps(cfg, len(rd.enc), offset)
            seed = cfg.seed if r == 0 else step_seed(cfg.seed, r, PAIRS_SALT + 3)
            for local in range(n_steps):
                step = offset + local
                if step < start:
                    continue
                t_step = time.perf_counter()
                rec: dict = {"step": step}
                if local == 0:
                    rec.update({f"pairs/{'count' if k == 'pairs' else k}": float(v) for k, v in rd.report.items()
                                if isinstance(v, (int, float)) and k not in ("seconds", "samples_per_prompt")})
                if is_eval_step(cfg, step, False):
                    rec.update(eval_metrics(rd, step))
                t0 = time.perf_counter()
                idx = batch_indices(seed, local, len(rd.enc), d.batch_size)
                policy.train()
                pol_chosen, pol_rejected = sequence_logps(policy, rd.enc, idx, pad_id)  # (B,), (B,)
                chosen_len = torch.tensor([len(rd.enc.chosen[i]) for i in idx], dtype=torch.float32, device=device)
                loss, metrics = dpo_loss(cfg.objective, pol_chosen, pol_rejected, rd.ref_chosen[idx].to(device),
                                         rd.ref_rejected[idx].to(device), chosen_lengths=chosen_len)
                optimizer.zero_grad(set_to_none=True)
                bad = first_nonfinite({"loss/policy": loss.detach()})
                grad_norm = float("nan")
                if bad is None:
                    loss.backward()
                    if tr.grad_clip:
                        grad_norm = float(torch.nn.utils.clip_grad_norm_(policy.parameters(), tr.grad_clip))
                    else:
                        grad_norm = float(torch.sqrt(sum((p.grad.float() ** 2).sum() for p in policy.parameters()
                                                         if p.grad is not None)))
                    bad = first_nonfinite({"grad/norm": torch.tensor(grad_norm)})
                if bad is None:
                    optimizer.step()
                else:  # train.nan_policy: stop raises; skip_step goes on without this update
                    optimizer.zero_grad(set_to_none=True)
                    rec.update(on_nonfinite(tr.nan_policy, step, bad, last_ckpt))
                t_update = time.perf_counter() - t0

                n_tok = float(sum(len(rd.enc.chosen[i]) + len(rd.enc.rejected[i]) for i in idx))
                rec.update(metrics)
                rec.update({"loss/policy": float(loss.detach()), "grad/norm": grad_norm,
                            "epoch": float(local // math.ceil(len(rd.enc) / d.batch_size)), "dpo/round": float(r),
                            "perf/update_seconds": t_update, "perf/checkpoint_seconds": last_ckpt_seconds,
                            "perf/train_tokens_per_s": n_tok / max(t_update, 1e-9),
                            "perf/step_seconds": time.perf_counter() - t_step, "perf/peak_mem_mb": _peak_mem_mb(),
                            "perf/elapsed_seconds": elapsed0 + time.perf_counter() - t_run})
                pending_metrics.append(rec)
                _print_step(rec)
                round_end = local == n_steps - 1  # a checkpoint at every round's end: the next round's pairs
                last_ckpt_seconds = (checkpoint(step) if (step + 1) % tr.checkpoint_every == 0 or round_end
                                     or stop.requested else 0.0)  # are always built from a checkpointed policy
                if stop.requested:
                    raise stop.stop(step, last_ckpt)
            offset += n_steps
        if offset >= start:  # the final record holds the eval of the trained policy only
            rec = {"step": offset, **eval_metrics(rd, offset)}
            rec["perf/elapsed_seconds"] = elapsed0 + time.perf_counter() - t_run
            pending_metrics.append(rec)
            checkpoint(offset)
    except BaseException as err:
        tracker.finish(end_status(err))
        backend.close()
        raise
    backend.close()

    reports = [x.report for x in rounds]
    summary = {**_summary(run, cfg, elapsed0 + time.perf_counter() - t_run), "steps": offset, "pairs": reports[0],
               "rounds": reports}
    run.write_summary(summary)
    for name in ["config.yaml", "summary.json"] + [f.name for x in rounds for f in _round_files(run, x.index)[:2]]:
        if (run.root / name).exists():
            tracker.log_artifact(str(run.root / name))
    tracker.finish("FINISHED")
    return summary


def _pair_metrics(policy, enc: EncodedPairs, ref_chosen, ref_rejected, cfg: RunConfig, pad_id: int) -> dict[str, float]:
    """Mean log-probs of ALL chosen and rejected responses under the policy, and the mean DPO
    margin beta*[(pi_c - ref_c) - (pi_r - ref_r)] over all pairs (one fixed set)."""
    pc, pr = all_logps(policy, enc, pad_id, cfg.dpo.batch_size)
    margin = cfg.objective.dpo_beta * ((pc - ref_chosen) - (pr - ref_rejected))
    return {"eval/pairs/logps_chosen": float(pc.mean()), "eval/pairs/logps_rejected": float(pr.mean()),
            "eval/pairs/margin": float(margin.mean())}


def _print_step(rec: dict) -> None:
    keys = [("loss/policy", "loss"), ("rewards/margin", "margin"), ("rewards/accuracy", "acc"),
            ("logps/chosen", "logp_c"), ("logps/rejected", "logp_r"), ("eval/pass_at_1", "eval@1"),
            ("perf/step_seconds", "s")]
    parts = [f"{short}={rec[k]:.3f}" for k, short in keys if k in rec]
    print(f"[harness] dpo step {rec['step']:4d} " + " ".join(parts), flush=True)
