"""harness/malloc.py: glibc's allocator keeps freed memory for the next step. It must change no number: a
training run's metrics bit for bit with and without it (each in its own process: mallopt is process-wide)."""

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from harness import malloc

ROOT = Path(__file__).resolve().parents[1]
glibc = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")

RUN = [  # tiny-dense, batches whose activations are megabytes (above glibc's initial 128 KiB mmap threshold)
    "warm_start.enabled=false",
    "train.steps=2",
    "train.prompts_per_step=16",
    "train.group_size=4",
    "rollout.max_new_tokens=24",
    "eval.num_prompts=4",
    "eval.n_samples=2",
    "eval.ks=[1]",
    "eval.every=0",
    "train.checkpoint_every=1",
    "tracking.mlflow=false",
    "objective.entropy_coef=0.01",  # a fresh tiny model earns no reward: the entropy bonus moves its weights
    "train.lr=1e-3",
]


def _env(**env) -> dict:
    """This process's environment without any allocator setting of its own, plus `env`."""
    mine = ("HARNESS_MALLOC", *malloc.GLIBC_ENV)
    return {**{k: v for k, v in os.environ.items() if k not in mine}, **env}


def _python(code: str, **env) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(**env), capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@glibc
def test_tune_applies_once_and_respects_an_opt_out():
    code = "from harness import malloc; print(malloc.tune(), malloc.tune(), malloc.describe())"
    assert _python(code) == "True True glibc malloc tuned (harness/malloc.py)"
    assert _python(code, HARNESS_MALLOC="off") == "False False malloc defaults (HARNESS_MALLOC=off)"
    assert _python(code, MALLOC_TOP_PAD_="0") == "False False glibc malloc from MALLOC_TOP_PAD_=0"


def _metrics(run: Path, **env) -> list[dict]:
    cmd = [sys.executable, "-m", "harness.cli", "train", "experiments/runs/smoke.yaml", *RUN, "--out", str(run)]
    full = _env(OMP_NUM_THREADS="2", HARNESS_THREAD_GOVERNOR="off", **env)
    done = subprocess.run(cmd, cwd=ROOT, env=full, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    timed = ("perf/", "time", "seconds", "mem")
    return [{k: v for k, v in r.items() if not any(t in k for t in timed)} for r in rows]


@glibc
def test_a_run_computes_the_same_with_and_without(tmp_path):
    tuned, plain = _metrics(tmp_path / "tuned"), _metrics(tmp_path / "plain", HARNESS_MALLOC="off")
    assert len(tuned) == len(plain) == 3  # 2 steps and the final eval
    assert tuned[1]["entropy"] != tuned[0]["entropy"]  # the first update moved the weights
    assert json.dumps(tuned) == json.dumps(plain)  # every logged number, bit for bit (NaN included)
