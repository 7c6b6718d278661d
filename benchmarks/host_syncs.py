"""How often a GRPO step waits on the device, ours against TRL's: aten ops and host syncs of one step, counted.

    python benchmarks/host_syncs.py                        # tiny-dense, 8 prompts x 4 samples x 32 tokens
    python benchmarks/host_syncs.py --no-trl --micro 4     # ours alone, micro-batches of 4 rows

The same workload on both sides (harness/bench/workload.py's run config; TRL's GRPOTrainer set up as
benchmarks/trl_grpo.py sets it up: hf generate, the same prompts, rows, micro-batches and objective). Steps 0..2
run; step 1 is counted (step 0 holds lazy initialisation), from the step's start to the next one's (TRL: its
logging of the step included). Counted on the CPU, since the count does not depend on the device:

- ops: the aten operators the step dispatches (torch.profiler's events; `top` those called from outside another
  aten op, `all` with the ones they call);
- syncs: the places where the host reads a value the device computed, so that on a GPU it waits for every
  kernel queued before: the profiler's `aten::_local_scalar_dense` (`.item()`, `float(t)`, `int(t)`, `bool(t)`,
  `if t:`), `aten::nonzero` (boolean indexing, `nonzero`: the output's size), `aten::masked_select` and
  `aten::_unique2` (the same), plus calls of `Tensor.tolist`, `Tensor.numpy` and `Tensor.cpu` counted by a patch
  (on a CPU they dispatch nothing; on a GPU each copies the tensor to the host and waits). A `.cpu().tolist()`
  counts twice, and a host tensor's `.tolist()` (a CPU generator's permutation) counts though it waits on
  nothing on a GPU: the count is an upper bound, on both sides alike. Not counted as syncs: the `.item()`s inside
  `Optimizer.step` (AdamW reads each parameter's step counter, a host tensor unless capturable or fused: no wait on
  a GPU; the same optimizer on both sides), shown apart as optimizer_step_reads.

Per phase (rollout: generation; score: rewards, log-probs before the update, advantages; update: the loss's
forwards and backwards, the optimizer step, the metrics) and in all. Figures, never assertions (the bound that
is asserted: tests/train/test_host_syncs.py).
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from harness.bench.workload import bench_config

SYNC_OPS = ("aten::_local_scalar_dense", "aten::nonzero", "aten::masked_select", "aten::_unique2")
HOST_READS = ("tolist", "numpy", "cpu")
PHASES = ("rollout", "score", "update")


class StepCount:
    """Counts one window of a run: the profiler's aten events and the patched host reads, by phase."""

    def __init__(self, rest: str = "other"):
        self.rest = rest  # the phase of what runs outside every labelled one
        self.phase, self.active, self.prof = rest, False, None
        self.reads: Counter = Counter()

    @contextlib.contextmanager
    def patched(self):
        saved = {name: getattr(torch.Tensor, name) for name in HOST_READS}

        def counting(name, real):
            def method(t, *a, **k):
                if self.active:
                    self.reads[(self.phase, name)] += 1
                return real(t, *a, **k)

            return method

        for name, real in saved.items():
            setattr(torch.Tensor, name, counting(name, real))
        try:
            yield self
        finally:
            for name, real in saved.items():
                setattr(torch.Tensor, name, real)

    def start(self) -> None:
        self.prof = profile(activities=[ProfilerActivity.CPU])
        self.prof.__enter__()
        self.active = True

    def stop(self) -> None:
        if self.active:
            self.active = False
            self.prof.__exit__(None, None, None)

    @contextlib.contextmanager
    def in_phase(self, name: str):
        outer, self.phase = self.phase, name
        try:
            with record_function(f"phase::{name}"):
                yield
        finally:
            self.phase = outer

    def table(self) -> dict[str, dict[str, int]]:
        """phase -> {ops_top, ops_all, syncs, and each kind of sync}."""
        out = {p: Counter() for p in (*PHASES, "other")}
        for e in self.prof.events():
            if not e.name.startswith("aten::"):
                continue
            phase, parent, top, optim = self.rest, e.cpu_parent, True, False
            while parent is not None:
                if parent.name.startswith("aten::"):
                    top = False
                optim = optim or parent.name.startswith("Optimizer.step#")
                if parent.name.startswith("phase::"):
                    phase = parent.name[7:]
                    break
                parent = parent.cpu_parent
            out[phase]["ops_all"] += 1
            out[phase]["ops_top"] += top
            if e.name in SYNC_OPS:
                out[phase]["optimizer_step_reads" if optim else e.name.removeprefix("aten::")] += 1
        for (phase, name), n in self.reads.items():
            out[phase][name] += n
        for c in out.values():
            c["syncs"] = sum(c[k.removeprefix("aten::")] for k in SYNC_OPS) + sum(c[k] for k in HOST_READS)
        out["step"] = sum(out.values(), Counter())
        return {p: dict(c) for p, c in out.items() if c["ops_all"] or c["syncs"]}


def count_ours(cfg, which: int = 1) -> dict:
    """Our trainer's step `which` (RLTrainer.step), its phases labelled."""
    import harness.train.rl.step as step_mod
    from harness.train import train

    sc = StepCount()
    real = {k: getattr(step_mod, k) for k in ("collect", "score_episode", "policy_update")}
    real_step = step_mod.RLTrainer.step

    def labelled(fn, phase):
        def wrapper(*a, **k):
            with sc.in_phase(phase):
                return fn(*a, **k)

        return wrapper

    def step(trainer, ctx, n, rec):
        if n != which:
            return real_step(trainer, ctx, n, rec)
        sc.start()
        try:
            return real_step(trainer, ctx, n, rec)
        finally:
            sc.stop()

    for (name, fn), phase in zip(real.items(), PHASES):
        setattr(step_mod, name, labelled(fn, phase))
    step_mod.RLTrainer.step = step
    try:
        with sc.patched(), tempfile.TemporaryDirectory() as tmp:
            train(cfg, Path(tmp) / "run")
    finally:
        for name, fn in real.items():
            setattr(step_mod, name, fn)
        step_mod.RLTrainer.step = real_step
    return sc.table()


def count_trl(cfg, which: int = 1) -> dict:
    """TRL's GRPOTrainer on the same workload (benchmarks/trl_grpo.py's arguments), its step `which` counted from
    its start to the next step's (its logging included)."""
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from trl_grpo import trl_args

    from harness.models import save_model
    from harness.models.registry import problem_messages
    from harness.train.core.collect import step_seed
    from harness.train.run.task_setup import build_task
    from harness.train.run.warmstart import initial_policy

    tr, T = cfg.train, cfg.rollout.max_new_tokens
    task = build_task(cfg)
    problems = [
        p
        for step in range(tr.steps)
        for p in task.problems(tr.prompts_per_step, seed=step_seed(cfg.seed, step, 0), split="train")
    ]
    by_uid = {p.uid: p for p in problems}
    data = Dataset.from_list([{"prompt": problem_messages(p, cfg.model.prompt_suffix), "uid": p.uid} for p in problems])
    sc = StepCount(rest="update")  # TRL's step: the update and its logging, around the labelled generation

    def reward(prompts, completions, completion_ids, uid, **_):
        texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
        return [
            task.score(by_uid[u], text, len(ids) >= T and ids[-1] != tok.eos_token_id).total
            for text, ids, u in zip(texts, completion_ids, uid, strict=True)
        ]

    class Labelled(GRPOTrainer):
        def _generate(self, prompts):
            with sc.in_phase("rollout"):
                return super()._generate(prompts)

        def _generate_and_score_completions(self, inputs):
            with sc.in_phase("score"):
                return super()._generate_and_score_completions(inputs)

    class Window(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            sc.stop()
            if state.global_step == which:
                sc.start()

        def on_train_end(self, args, state, control, **kw):
            sc.stop()

    work = tempfile.mkdtemp(prefix="host-syncs-trl-")
    try:
        model, tok, _ = initial_policy(cfg, torch.device("cpu"))
        folder = str(save_model(model, tok, Path(work) / "policy"))
        del model
        tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        trainer = Labelled(
            model=folder,
            reward_funcs=reward,
            args=GRPOConfig(**trl_args(cfg, work, use_cpu=True)),
            train_dataset=data,
            processing_class=tok,
            callbacks=[Window()],
        )
        with sc.patched():
            trainer.train()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return sc.table()


def markdown(rows: dict[str, dict]) -> str:
    cols = ("ops_top", "ops_all", "syncs", "_local_scalar_dense", "nonzero", "tolist", "cpu", "numpy")
    cols = (*cols, "optimizer_step_reads")
    lines = ["| trainer | phase | " + " | ".join(cols) + " |", "|---|---|" + "---:|" * len(cols)]
    for who, table in rows.items():
        for phase in (*PHASES, "other", "step"):
            if phase in table:
                c = table[phase]
                lines.append(f"| {who} | {phase} | " + " | ".join(str(c.get(k, 0)) for k in cols) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny-dense")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--micro", type=int, default=8, help="train.micro_batch_size (rows per forward/backward)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-trl", action="store_true")
    ap.add_argument("--set", action="extend", nargs="*", default=[], help="extra config overrides for both sides")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = bench_config(
        args.model,
        "hf",
        steps=3,
        threads=args.threads,
        prompts=args.prompts,
        group_size=args.group,
        max_new_tokens=args.tokens,
        checkpoint_every=100,  # no checkpoint inside the counted step (TRL saves none)
        extra=[f"train.micro_batch_size={args.micro}", *args.set],
    )
    rows = {"ours": count_ours(cfg)}
    if not args.no_trl:
        rows["TRL " + __import__("trl").__version__] = count_trl(cfg)
    print(
        f"{args.model}, {args.prompts} prompts x {args.group} samples x {args.tokens} tokens, micro-batch {args.micro}"
    )
    print(markdown(rows))


if __name__ == "__main__":
    main()
