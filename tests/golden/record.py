"""The golden record: the first steps of seeded smoke-scale runs, every logged metric except perf/*.

    python tests/golden/record.py [NAME ...]          # (re)write tests/golden/records/NAME.json
    python tests/golden/record.py --check [NAME ...]  # compare, print every differing key

A refactor that moves no number leaves these files unchanged; a fix that moves a number
rewrites the file of the run it moves, and its commit says which metrics moved and why.
Each run uses one torch thread, so the numbers do not depend on the machine's core count.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
RECORDS = HERE / "records"

# The engine tests' fast regime (tests/train/conftest.py) for 3 steps, an eval at steps 0, 2, 3.
_FAST = [
    "warm_start.steps=300", "rollout.temperature=1.0", "eval.temperature=1.0",
    "train.prompts_per_step=8", "train.group_size=4", "rollout.max_new_tokens=40",
    "task.difficulty_mix={easy: 1}", "eval.num_prompts=8", "eval.n_samples=4", "eval.ks=[1,4]",
    "tracking.mlflow=false", "train.samples_to_log=2", "train.threads=1",
]
_RL = [*_FAST, "train.steps=3", "eval.every=2", "train.mini_batches=2", "train.checkpoint_every=2"]

RUNS: dict[str, tuple[str, list[str]]] = {
    "grpo": ("experiments/runs/smoke.yaml", [*_RL, "objective.preset=grpo"]),
    # overlong shaping bites past 10 tokens (40 max, a 30-token buffer); dynamic sampling drops groups
    "dapo": ("experiments/runs/smoke.yaml", [*_RL, "objective.preset=dapo", "objective.overlong_buffer=30"]),
    "ppo": ("experiments/runs/smoke.yaml", [*_RL, "objective.preset=ppo"]),
    "dpo": ("experiments/runs/dpo.yaml", [
        *_FAST, "rollout.max_new_tokens=40", "dpo.rounds=2", "dpo.num_prompts=16", "dpo.samples_per_prompt=4",
        "dpo.batch_size=4", "dpo.max_steps=6", "eval.every=2", "train.checkpoint_every=2",
    ]),
}


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value


def record(name: str) -> list[dict]:
    """The metric records (one per logged step) of run `name`, perf/* removed."""
    from harness.config import load_config
    from harness.train import train

    path, overrides = RUNS[name]
    cfg = load_config(path, overrides)
    with tempfile.TemporaryDirectory() as tmp:
        train(cfg, Path(tmp) / name)  # the run shell: the preset's trainer (rl | dpo)
        lines = (Path(tmp) / name / "metrics.jsonl").read_text().splitlines()
    out = []
    for line in lines:
        rec = json.loads(line)
        out.append({k: _clean(v) for k, v in sorted(rec.items()) if not k.startswith("perf/")})
    return out


def diff(expected: list[dict], got: list[dict], rel: float = 1e-6, abs_: float = 1e-7) -> list[str]:
    """Every (step, key) whose value differs beyond the tolerance, or is present in only one."""
    out = []
    if len(expected) != len(got):
        out.append(f"{len(expected)} records expected, {len(got)} logged")
    for i, (e, g) in enumerate(zip(expected, got)):
        step = e.get("step", i)
        for key in sorted(set(e) | set(g)):
            if key not in g:
                out.append(f"step {step}: {key} missing (expected {e[key]!r})")
            elif key not in e:
                out.append(f"step {step}: {key} new ({g[key]!r})")
            elif not _close(e[key], g[key], rel, abs_):
                out.append(f"step {step}: {key} {e[key]!r} -> {g[key]!r}")
    return out


def _close(a, b, rel, abs_) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(a, b, rel_tol=rel, abs_tol=abs_)
    return a == b


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", default=list(RUNS))
    ap.add_argument("--check", action="store_true", help="compare with the stored records, write nothing")
    args = ap.parse_args(argv)
    RECORDS.mkdir(exist_ok=True)
    bad = 0
    for name in args.names:
        got = record(name)
        file = RECORDS / f"{name}.json"
        if args.check:
            d = diff(json.loads(file.read_text()), got)
            print(f"{name}: {'unchanged' if not d else f'{len(d)} differences'}")
            for line in d:
                print("   ", line)
            bad += bool(d)
        else:
            file.write_text(json.dumps(got, indent=1) + "\n")
            print(f"{name}: {len(got)} records -> {file}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
