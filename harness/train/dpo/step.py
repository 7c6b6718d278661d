"""DPO, offline or iterative: the step of `harness train CONFIG --out DIR` when `trainer: dpo`
(set by objective.preset=dpo).

    for round r in 0..dpo.rounds-1 (one round = offline DPO; more = iterative RPO, 2404.19733):
      pairs:      sample the policy at the start of round r on fresh train prompts, correct =
                  chosen, wrong = rejected, up to dpo.pairs_per_prompt per prompt (pairs.py);
                  or (one round only) read dpo.pairs (JSONL) -> DIR/pairs[.round{r}].jsonl
      reference:  the policy at the start of round r, frozen; its sequence log-probs of every
                  pair are computed once and saved (DIR/pairs_ref[.round{r}].pt), so no second
                  model is held and a resumed run uses exactly the same reference
      for step:   dpo.epochs passes over the round's pairs in batches of dpo.batch_size
                  (reshuffled each epoch) -> sequence log-prob sums of chosen and rejected
                  and their token counts -> dpo_loss (docs/objective.md, "DPO"; DPO 2305.18290, IPO 2310.12036,
                  TRL 1.16's other loss types, RPO's NLL term with objective.dpo_sft_coef) -> AdamW step
                  (one optimizer across rounds)
                  -> metrics; periodic eval (pass@k, the RL runs' eval_at()); checkpoint + flush

Log-probs are taken at temperature 1 (the model's own distribution), not the rollout
temperature: DPO's implicit reward is beta * log pi/pi_ref of the model itself.
Besides the per-batch metrics of docs/objective.md, "DPO", every eval also scores ALL pairs under the current
policy (eval/pairs/logps_chosen, eval/pairs/logps_rejected, eval/pairs/margin): one
fixed set per round, so likelihood displacement (chosen AND rejected log-probs fall
while the margin grows) is read off a curve that batch sampling does not make noisy.

Run directory, checkpoint/resume and MLflow are the run shell's (harness/train/run/shell.py),
as for the RL trainer (a resumed run restarts at checkpoint step + 1 with the same batches,
since batch order is a function of seed + round + step). Every round ends with a checkpoint, so the next round's pairs always come from a saved policy.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from harness.atomic import atomic_write, atomic_write_text
from harness.config import RunConfig
from harness.models.logprobs import response_logprobs
from harness.objective import dpo_loss
from harness.parallel import all_reduce_grads, full_params, gather_rows_keep_grad, is_sharded, shard
from harness.train.core.batch import micro_slices
from harness.train.core.collect import step_seed
from harness.train.core.components import check_finite, clip_and_step
from harness.train.core.nonfinite import NonFiniteUpdate
from harness.train.core.policy_module import compute_precision
from harness.train.core.rundir import RunDir
from harness.train.core.trainer import RunContext, Trainer
from harness.train.dpo.pairs import PAIRS_SALT, PreferencePair, build_pairs, file_report, read_pairs, write_pairs


@dataclass
class EncodedPairs:
    """Token ids of n pairs: rendered prompt, chosen + EOS, rejected + EOS."""

    prompts: list[list[int]]
    chosen: list[list[int]]
    rejected: list[list[int]]

    def __len__(self) -> int:
        return len(self.prompts)


def encode_pairs(pairs: list[PreferencePair], tok, render) -> EncodedPairs:
    """render: anything with a .prompt -> prompt ids, the policy's own (warmstart.make_render:
    template + model.prompt_suffix), so pairs are scored on the prompts the policy samples from."""

    def resp(text: str) -> list[int]:
        return tok.encode(text, add_special_tokens=False) + [tok.eos_token_id]

    return EncodedPairs([render(p) for p in pairs], [resp(p.chosen) for p in pairs], [resp(p.rejected) for p in pairs])


def sequence_logps(model, enc: EncodedPairs, idx: list[int], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequence log-prob sums (B,) of the chosen and of the rejected responses of pairs `idx`,
    in one forward over 2B rows (chosen rows first). Gradients flow unless under no_grad."""
    B = len(idx)
    responses = [enc.chosen[i] for i in idx] + [enc.rejected[i] for i in idx]
    T = max(len(r) for r in responses)
    ids = torch.full((2 * B, T), pad_id, dtype=torch.long)  # (2B, T)
    mask = torch.zeros((2 * B, T))
    for row, r in enumerate(responses):
        ids[row, : len(r)] = torch.tensor(r, dtype=torch.long)
        mask[row, : len(r)] = 1.0
    prompts = [enc.prompts[i] for i in idx] * 2
    logp, _, _ = response_logprobs(model, prompts, ids, mask, pad_id, temperature=1.0)  # (2B, T), 0 on padding
    seq = logp.sum(-1)  # (2B,)
    return seq[:B], seq[B:]


def sharded_sequence_logps(model, enc: EncodedPairs, idx: list[int], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """sequence_logps of pairs `idx`, each process computing its share of them (harness/parallel.py): the
    whole (B,) tensors on every process, with gradient through this process's pairs only (their gradients
    are summed over the processes after the backward)."""
    mine = [idx[i] for i in shard(len(idx))]
    if mine:
        chosen, rejected = sequence_logps(model, enc, mine, pad_id)
    elif is_sharded(model):  # FSDP: a forward in step with the others, of no weight (no rows, a graph to the model)
        c, r = sequence_logps(model, enc, idx[:1], pad_id)
        chosen, rejected = c[:0] + 0.0 * c.sum(), r[:0] + 0.0 * r.sum()
    else:
        chosen = rejected = torch.zeros(0, device=next(model.parameters()).device)
    return gather_rows_keep_grad(chosen, len(idx)), gather_rows_keep_grad(rejected, len(idx))


@torch.no_grad()
def all_logps(model, enc: EncodedPairs, pad_id: int, chunk: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(chosen (n,), rejected (n,)) sequence log-probs of every pair, in eval mode."""
    was_training = model.training
    model.eval()
    with full_params(model):  # FSDP: the whole weights for the block
        parts = [sequence_logps(model, enc, idx, pad_id) for idx in micro_slices(len(enc), chunk)]
    model.train(was_training)
    return torch.cat([c for c, _ in parts]).float(), torch.cat([r for _, r in parts]).float()


def batch_indices(seed: int, step: int, n: int, batch_size: int) -> list[int]:
    """Pairs of optimizer step `step`: epoch e = step // steps_per_epoch walks a permutation
    seeded by (seed, e), so a resumed run sees exactly the batches of an uninterrupted one."""
    per_epoch = math.ceil(n / batch_size)
    epoch, b = divmod(step, per_epoch)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(step_seed(seed, epoch, PAIRS_SALT + 2))).tolist()
    return perm[b * batch_size : (b + 1) * batch_size]


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
                raise RuntimeError(
                    f"no preference pairs in round {r}: {json.dumps(report)}; the policy solves every "
                    "prompt or none (raise dpo.num_prompts or dpo.samples_per_prompt, or change the task mix)"
                )
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
        with compute_precision(cfg, policy.device):  # train.autocast: as the policy's forwards
            ref_chosen, ref_rejected = all_logps(policy, enc, pad_id, cfg.dpo.batch_size)
    if not path.exists():
        atomic_write_text(report_path, json.dumps(report, indent=2, sort_keys=True))
        atomic_write(ref_path, lambda tmp: torch.save({"chosen": ref_chosen, "rejected": ref_rejected}, tmp))
        write_pairs(path, pairs)
    return Round(r, report, enc, ref_chosen, ref_rejected)


@dataclass(frozen=True)
class Position:
    """Where the DPO schedule stands: step `local` of round `rd`'s `n_steps`, its batches drawn with
    `seed`; the run's step is offset + local (offset: the steps of the rounds before)."""

    rd: Round
    offset: int
    local: int
    n_steps: int
    seed: int

    @property
    def step(self) -> int:
        return self.offset + self.local

    @property
    def round_ends(self) -> bool:
        return self.local == self.n_steps - 1


class DPOTrainer(Trainer):
    """DPO's step and its extras: rounds of pairs, pair metrics at every eval, a checkpoint at
    every round's end. The run shell (harness/train/run/shell.py) does the rest."""

    label = "dpo step"
    print_keys = (
        ("loss/policy", "loss"),
        ("rewards/margin", "margin"),
        ("rewards/accuracy", "acc"),
        ("logps/chosen", "logp_c"),
        ("logps/rejected", "logp_r"),
        ("eval/pass_at_1", "eval@1"),
        ("perf/step_seconds", "s"),
    )

    def preflight(self, run: RunDir) -> None:
        if self.cfg.dpo.pairs != "generate" and not (run.root / "pairs.jsonl").exists():
            read_pairs(self.cfg.dpo.pairs)  # a bad file fails here, before any model is loaded

    def prepare(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.rounds = [self._load_round(0)]  # from the initial policy, before any checkpoint is loaded
        self.offset = 0  # the steps of the rounds finished (final_step once the schedule is exhausted)
        self.at: Position | None = None  # where the schedule stands: what step and checkpoint_due read

    def _load_round(self, r: int) -> Round:
        c = self.ctx
        rd = _load_or_build_round(c.run, self.cfg, r, c.task, c.backend, c.model, c.tok, c.render, c.pad_id)
        info = {k: v for k, v in rd.report.items() if k != "pairs_by_difficulty"}
        print(f"[harness] dpo round {r}: {len(rd.enc)} pairs ({json.dumps(info)})", flush=True)
        return rd

    def positions(self) -> Iterator[Position]:
        """Round after round (round r > 0 built from the policy at its start: lazily, once the steps
        before it ran), dpo.epochs passes each: every step's Position; self.offset counts finished rounds' steps."""
        d = self.cfg.dpo
        for r in range(d.rounds):
            if r > 0:
                if d.max_steps and self.offset >= d.max_steps:
                    break
                self.rounds.append(self._load_round(r))  # built from the policy at the start of round r
            rd = self.rounds[r]
            n_steps = round_steps(self.cfg, len(rd.enc), self.offset)
            seed = self.cfg.seed if r == 0 else step_seed(self.cfg.seed, r, PAIRS_SALT + 3)
            for local in range(n_steps):
                yield Position(rd, self.offset, local, n_steps, seed)
            self.offset += n_steps

    def schedule(self, start: int):
        """The run's steps from `start`; self.at holds the position of the step yielded."""
        for pos in self.positions():
            self.at = pos
            if pos.step >= start:
                yield pos.step

    @property
    def final_step(self) -> int:
        return self.offset

    @property
    def total_steps(self) -> int | None:
        """One round: its steps (its pairs are built by prepare); more rounds: the cap dpo.max_steps, if any
        (a later round's pairs, hence its steps, are known only once the steps before it ran)."""
        if self.cfg.dpo.rounds == 1:
            return round_steps(self.cfg, len(self.rounds[0].enc), 0)
        return self.cfg.dpo.max_steps or None

    def checkpoint_due(self, step: int) -> bool:
        return self.at.round_ends  # every round's end: the next round's pairs come from a saved policy

    def eval_extras(self, ctx: RunContext, step: int) -> dict:
        rd = self.rounds[-1]  # the latest round's pairs
        return _pair_metrics(ctx.model, rd.enc, rd.ref_chosen, rd.ref_rejected, self.cfg, ctx.pad_id)

    def step(self, ctx: RunContext, step: int, rec: dict) -> list[dict]:
        rd, local, d, dev = self.at.rd, self.at.local, self.cfg.dpo, ctx.device
        if local == 0:
            rec.update(
                {
                    f"pairs/{'count' if k == 'pairs' else k}": float(v)
                    for k, v in rd.report.items()
                    if isinstance(v, (int, float)) and k not in ("seconds", "samples_per_prompt")
                }
            )
        t0 = time.perf_counter()
        idx = batch_indices(self.at.seed, local, len(rd.enc), d.batch_size)
        ctx.model.train()
        with compute_precision(self.cfg, dev):  # train.autocast (docs/scale.md)
            pol_chosen, pol_rejected = sharded_sequence_logps(ctx.model, rd.enc, idx, ctx.pad_id)  # (B,), (B,)
        chosen_len = torch.tensor([len(rd.enc.chosen[i]) for i in idx], dtype=torch.float32, device=dev)
        rejected_len = torch.tensor([len(rd.enc.rejected[i]) for i in idx], dtype=torch.float32, device=dev)
        loss, metrics = dpo_loss(
            self.cfg.objective,
            pol_chosen,
            pol_rejected,
            rd.ref_chosen[idx].to(dev),
            rd.ref_rejected[idx].to(dev),
            chosen_lengths=chosen_len,
            rejected_lengths=rejected_len,
        )
        grad_norm = float("nan")
        try:
            for t in ctx.trained:
                t.zero_grad()
            check_finite(ctx.trained, "loss/policy", loss.detach())
            if loss.requires_grad:  # False only on a process that holds none of the batch's pairs
                loss.backward()
            all_reduce_grads([t.module for t in ctx.trained])  # the processes' pairs -> the whole batch's gradient
            grad_norm = clip_and_step(ctx.trained, self.cfg.train.grad_clip)
        except NonFiniteUpdate as err:  # train.nan_policy: stop raises; skip_step goes on without this update
            rec.update(ctx.nonfinite(step, str(err)))
        t_update = time.perf_counter() - t0
        n_tok = float(sum(len(rd.enc.chosen[i]) + len(rd.enc.rejected[i]) for i in idx))
        rec.update(metrics)
        rec.update(
            {
                "loss/policy": float(loss.detach()),
                "grad/norm": grad_norm,
                "epoch": float(local // math.ceil(len(rd.enc) / d.batch_size)),
                "dpo/round": float(rd.index),
                "perf/update_seconds": t_update,
                "perf/train_tokens_per_s": n_tok / max(t_update, 1e-9),
            }
        )
        return []

    def summary(self) -> dict:
        reports = [x.report for x in self.rounds]
        return {"steps": self.offset, "pairs": reports[0], "rounds": reports}

    def artifacts(self) -> list[str]:
        return [f.name for x in self.rounds for f in _round_files(self.ctx.run, x.index)[:2]]


def _pair_metrics(policy, enc: EncodedPairs, ref_chosen, ref_rejected, cfg: RunConfig, pad_id: int) -> dict[str, float]:
    """Mean log-probs of ALL chosen and rejected responses under the policy, and the mean DPO
    margin beta*[(pi_c - ref_c) - (pi_r - ref_r)] over all pairs (one fixed set)."""
    with compute_precision(cfg, policy.device):
        pc, pr = all_logps(policy, enc, pad_id, cfg.dpo.batch_size)
    margin = cfg.objective.dpo_beta * ((pc - ref_chosen) - (pr - ref_rejected))
    return {
        "eval/pairs/logps_chosen": float(pc.mean()),
        "eval/pairs/logps_rejected": float(pr.mean()),
        "eval/pairs/margin": float(margin.mean()),
    }
