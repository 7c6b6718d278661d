"""Kill/resume reliability benchmark (benchmarks/faults.py; docs/faults.md).

    python benchmarks/faults.py [--trials N] [--steps S] [--kills K] [--signal kill|term] [--seed X] [--set KEY=VALUE]

One uninterrupted reference run of a tiny config (real `harness train` subprocess, MLflow on a
sqlite store in a temp folder), then N trials: each starts the same command, kills it K times
at random moments (after a random printed step plus a random delay of up to 1.5 steps, so the
kill lands in a checkpoint write, a flush or the next step's rollout or update), reruns it until
it finishes, and counts in metrics.jsonl and in MLflow the steps lost and the steps duplicated.
Prints: kills survived, steps lost, steps duplicated, wall overhead of resume (the trial's
wall over the reference run's). It prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from harness.tracking.runs import metric_steps

REPO = Path(__file__).resolve().parents[2]
RUN = [
    "warm_start.enabled=false",
    "train.prompts_per_step=4",
    "train.group_size=2",
    "train.mini_batches=1",
    "rollout.max_new_tokens=8",
    "eval.num_prompts=2",
    "eval.n_samples=1",
    "eval.ks=[1]",
    "eval.every=0",
    "train.samples_to_log=1",
    "tracking.experiment=faults-bench",
]
STEP_LINE = re.compile(r"\[harness\] step\s+(\d+)")


def count_steps(logged: list[int], expected: int) -> dict:
    """Steps 0..expected: how many are missing (lost) and how many extra entries (duplicated)."""
    return {"lost": len(set(range(expected + 1)) - set(logged)), "duplicated": len(logged) - len(set(logged))}


def _attempt(
    cmd: list[str], env: dict, kill: tuple[int, float] | None, sig: int, rng: random.Random, steps: int
) -> dict:
    """One `harness train`; kill: (None) run to the end, else kill after a random printed step
    (>= the first one this attempt prints) plus `delay` seconds (kill[1] = the step's seconds)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    target, timer, at, tail = None, None, None, []
    for line in proc.stdout:
        tail = [*tail[-30:], line]
        m = STEP_LINE.match(line)
        if m and kill is not None and timer is None:
            step = int(m.group(1))
            if target is None:
                target = rng.randint(step, max(step, steps - 1))
            if step >= target:
                delay = rng.uniform(0, 1.5 * kill[1])
                at = (step, delay)
                timer = threading.Timer(delay, proc.send_signal, (sig,))
                timer.start()
    rc = proc.wait()
    if timer is not None:
        timer.cancel()
    return {"rc": rc, "wall_s": time.perf_counter() - t0, "killed_after": at, "tail": "".join(tail[-5:])}


def _mlflow_steps(uri: str, run: Path) -> list[int]:
    return metric_steps(run, "perf/elapsed_seconds", uri)


def _file_steps(run: Path) -> list[int]:
    path = run / "metrics.jsonl"
    return [json.loads(x)["step"] for x in path.read_text().splitlines()] if path.exists() else []


def run_trials(
    trials: int, steps: int, kills: int, sig: int, seed: int, work: Path, ckpt_every: int, overrides: tuple = ()
) -> dict:
    """`trials` runs of the tiny config (+ `overrides`, KEY=VALUE), each killed `kills` times at random moments
    and rerun until it finishes; a reference run without kills first."""
    uri = f"sqlite:///{work}/mlflow.db"
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "PYTHONUNBUFFERED": "1"}
    env.setdefault("OMP_NUM_THREADS", "1")

    def cmd(out: Path) -> list[str]:
        return [
            sys.executable,
            "-m",
            "harness.cli",
            "train",
            "experiments/runs/smoke.yaml",
            *RUN,
            f"train.steps={steps}",
            f"train.checkpoint_every={ckpt_every}",
            *overrides,
            "--out",
            str(out),
        ]

    rng = random.Random(seed)
    ref = _attempt(cmd(work / "reference"), env, None, sig, rng, steps)
    if ref["rc"] != 0:
        raise RuntimeError(f"the reference run failed (exit {ref['rc']}):\n{ref['tail']}")
    recs = [json.loads(x) for x in (work / "reference" / "metrics.jsonl").read_text().splitlines()]
    step_s = sum(r.get("perf/step_seconds", 0.0) for r in recs) / max(1, len(recs) - 1)
    rows = []
    for i in range(trials):
        run = work / f"trial_{i}"
        attempts = []
        while len(attempts) < kills + 20:  # kills, then reruns until it finishes
            a = _attempt(cmd(run), env, (0, step_s) if len(attempts) < kills else None, sig, rng, steps)
            attempts.append(a)
            if a["rc"] == 0 and (run / "summary.json").exists():
                break
        f, m = count_steps(_file_steps(run), steps), count_steps(_mlflow_steps(uri, run), steps)
        killed = [a for a in attempts if a["killed_after"] is not None and a["rc"] != 0]
        finished = attempts[-1]["rc"] == 0 and (run / "summary.json").exists()
        rows.append(
            {
                "trial": i,
                "kills": len(killed),
                "attempts": len(attempts),
                "killed_after": [a["killed_after"] for a in killed],
                "finished": finished,
                "lost_file": f["lost"],
                "dup_file": f["duplicated"],
                "lost_mlflow": m["lost"],
                "dup_mlflow": m["duplicated"],
                "wall_s": sum(a["wall_s"] for a in attempts),
                "overhead_s": sum(a["wall_s"] for a in attempts) - ref["wall_s"],
                "error": None if finished else attempts[-1]["tail"],
            }
        )
    return {"reference_wall_s": ref["wall_s"], "step_s": step_s, "rows": rows}


def render(res: dict, sig_name: str) -> str:
    rows = res["rows"]
    lines = [
        f"## harness fault benchmark: kill ({sig_name}) and resume",
        f"reference run (no kill): {res['reference_wall_s']:.1f} s wall, {res['step_s']:.2f} s a step",
        "",
        "| trial | kills | killed after (step, +s) | attempts | finished | lost file/mlflow | dup file/mlflow "
        "| wall s | overhead s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        at = ", ".join(f"{s} +{d:.2f}" for s, d in r["killed_after"]) or "-"
        lines.append(
            f"| {r['trial']} | {r['kills']} | {at} | {r['attempts']} | {'yes' if r['finished'] else 'NO'} "
            f"| {r['lost_file']}/{r['lost_mlflow']} | {r['dup_file']}/{r['dup_mlflow']} | {r['wall_s']:.1f} "
            f"| {r['overhead_s']:+.1f} |"
        )
    kills = sum(r["kills"] for r in rows)
    survived = sum(
        r["kills"]
        for r in rows
        if r["finished"] and not (r["lost_file"] or r["lost_mlflow"] or r["dup_file"] or r["dup_mlflow"])
    )
    over = [r["overhead_s"] for r in rows]
    lines += [
        "",
        f"kills survived: {survived}/{kills}",
        f"steps lost: {sum(r['lost_file'] for r in rows)} in metrics.jsonl, "
        f"{sum(r['lost_mlflow'] for r in rows)} in MLflow",
        f"steps duplicated: {sum(r['dup_file'] for r in rows)} in metrics.jsonl, "
        f"{sum(r['dup_mlflow'] for r in rows)} in MLflow",
        f"wall overhead of resume: mean {sum(over) / len(over):+.1f} s a trial "
        f"(min {min(over):+.1f}, max {max(over):+.1f}) over a {res['reference_wall_s']:.1f} s run",
    ]
    lines += [f"- trial {r['trial']} did not finish: {r['error']}" for r in rows if r["error"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="benchmarks/faults.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=10, help="kill/resume trials (default 10)")
    p.add_argument("--steps", type=int, default=8, help="train.steps of the tiny run (default 8)")
    p.add_argument("--checkpoint-every", type=int, default=2, help="train.checkpoint_every (default 2)")
    p.add_argument("--kills", type=int, default=1, help="kills per trial before it may finish (default 1)")
    p.add_argument("--signal", choices=["kill", "term"], default="kill", help="SIGKILL (default) or SIGTERM")
    p.add_argument("--seed", type=int, default=0, help="seed of the kill moments")
    p.add_argument("--work", default=None, help="keep the runs here (default: a temp folder, removed)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config override of every run, repeatable (e.g. train.checkpoint_background=true)",
    )
    args = p.parse_args(argv)
    for name in ("trials", "steps", "checkpoint_every", "kills"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    sig = signal.SIGKILL if args.signal == "kill" else signal.SIGTERM
    with tempfile.TemporaryDirectory(prefix="harness-faults-") as tmp:
        work = Path(args.work) if args.work else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        res = run_trials(
            args.trials, args.steps, args.kills, sig, args.seed, work, args.checkpoint_every, tuple(args.set)
        )
    print(render(res, signal.Signals(sig).name), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
