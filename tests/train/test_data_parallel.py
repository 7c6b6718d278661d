"""One run on 2 processes (`harness train --nproc 2`: torchrun, gloo) computes what it computes on 1, with
the models whole on every process (train.parallel=ddp) or sharded (train.parallel=fsdp, FSDP2).

The 1-process run and the 2-process runs use the same config (rollout.seeding=prompt: a prompt samples
the same whichever process draws it). After the run every parameter is equal to 1e-6 (but the few that
Adam moves off a rounding-level gradient: tests/train/same_weights.py) and every logged
metric (but timings) is equal to a float sum's rounding: 1e-6 absolute or 1e-5 relative. A
representative set of presets runs by default (a group baseline, dynamic sampling with overlong shaping
and token-mean aggregation, a critic, DPO's pairs); every preset in the slow suite.

The micro-batch is pinned to one process's share of a mini-batch (4 rows), so the two sides run forwards
of the same shapes and what is compared is what the processes change: the sums over them. Forwards of
other shapes round otherwise on some CPUs (AVX512: a 4-row and an 8-row matmul differ in the last bit),
and PPO's critic amplifies that: its head starts at zero and Adam's first steps move every weight by
about lr whatever the size of its gradient, so a gradient component at rounding level takes either sign
(measured on an AMD EPYC with AVX512: 1 process with micro-batches of 8 vs of 4 rows, critic weights
3e-3 apart after 2 steps). That is the micro-batch cut, not the process count: a 1-process and a
2-process run with the same cut are equal bit for bit there.
"""

import glob
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from safetensors.torch import load_file

from harness.config import load_config
from harness.objective.presets import BUILTIN_PRESETS
from harness.train import train
from tests.train.same_weights import assert_same_weights

SMOKE, DPO = "experiments/runs/smoke.yaml", "experiments/runs/dpo.yaml"
# one torch thread on both sides, as each rank has: a CPU matmul rounds differently on 2 threads than on 1
# (measured: PRIME's ratio/max 1e-5 apart at step 0 when the 1-process run took 2), which is not what is tested
RUN = ["train.steps=2", "train.checkpoint_every=1", "rollout.seeding=prompt", "train.threads=1"]
RUN += ["train.micro_batch_size=4"]  # one process's share of a mini-batch (32 rows / 4 mini-batches / 2): see above
MODES = ["ddp", "fsdp"]
DPO_FAST = ["rollout.max_new_tokens=40", "dpo.num_prompts=8", "dpo.samples_per_prompt=4", "dpo.batch_size=4"]
DPO_FAST += ["dpo.max_steps=2", "dpo.rounds=1", "eval.every=0", "eval.num_prompts=8", "eval.n_samples=4"]
DPO_FAST += [
    "eval.ks=[1,4]",
    "tracking.mlflow=false",
    "rollout.seeding=prompt",
    "train.checkpoint_every=1",
    "train.threads=1",
]
EXTRA = {"passk": ["objective.passk_k=2"]}
EXTRA["opd"] = ["model.teacher=tiny-dense"]  # on-policy distillation's teacher: the seeded fresh tiny model
DEFAULT = ["grpo", "dapo", "ppo"]
SKIP = ("perf/", "threads/")  # timings and the thread governor differ between any two runs


def _records(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def _last_weights(run):
    last = Path(sorted(glob.glob(str(run / "checkpoints" / "step_*")))[-1])
    return load_file(
        str(
            last
            / ("adapter_model.safetensors" if (last / "adapter_model.safetensors").exists() else "model.safetensors")
        )
    )


def _config(preset, fast_overrides):
    if preset == "dpo":
        return DPO, DPO_FAST
    return SMOKE, [*fast_overrides, f"objective.preset={preset}", *EXTRA.get(preset, []), *RUN]


def _assert_same_run(one, two, param_tol: float = 1e-6):
    """Every metric but timings equal (rel 1e-5, abs 1e-6) and the final weights within param_tol."""
    a, b = _records(one), _records(two)
    assert [r["step"] for r in a] == [r["step"] for r in b]
    for x, y in zip(a, b):
        keys = {k for k in x if not k.startswith(SKIP)}
        assert keys == {k for k in y if not k.startswith(SKIP)}, (x["step"], keys ^ set(y))
        for k in keys:
            if isinstance(x[k], float) and not (math.isnan(x[k]) and math.isnan(y[k])):
                assert y[k] == pytest.approx(x[k], rel=1e-5, abs=1e-6), (x["step"], k, x[k], y[k])
            elif not isinstance(x[k], float):
                assert x[k] == y[k], (x["step"], k)
    # Adam turns a last-bit difference of a rounding-level gradient into a fraction of lr on a few weights
    # (tests/train/same_weights.py): bounded by the run's largest lr (a critic's) and its optimizer steps
    train_cfg = yaml.safe_load((one / "config.yaml").read_text())["train"]
    lr = max(train_cfg["lr"], train_cfg.get("critic_lr") or 0.0)
    steps = len(a) * train_cfg["mini_batches"] * train_cfg["inner_epochs"]
    assert_same_weights(_last_weights(one), _last_weights(two), atol=param_tol, lr=lr, steps=steps)


def _two_process_run(config, overrides, out, parallel="ddp"):
    cmd = [sys.executable, "-m", "harness.cli", "train", config, *overrides, f"train.parallel={parallel}"]
    cmd += ["--out", str(out), "--nproc", "2"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def _check_preset(preset, fast_overrides, tmp_path):
    """The 1-process run, then a 2-process run of each layout (ddp, fsdp), each equal to it."""
    config, overrides = _config(preset, fast_overrides)
    train(load_config(config, overrides), tmp_path / "one")
    for mode in MODES:
        out = _two_process_run(config, overrides, tmp_path / mode, mode)
        assert "torch.distributed.run" in out and "--nproc_per_node=2" in out
        _assert_same_run(tmp_path / "one", tmp_path / mode)
        assert not list((tmp_path / mode).glob("harness-rank*")), "rank 1 wrote into the run directory"


@pytest.mark.parametrize("preset", DEFAULT)
def test_two_processes_equal_one(preset, fast_overrides, tmp_path):
    _check_preset(preset, fast_overrides, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("preset", [p for p in BUILTIN_PRESETS if p not in DEFAULT])
def test_two_processes_equal_one_every_preset(preset, fast_overrides, tmp_path):
    _check_preset(preset, fast_overrides, tmp_path)


def test_fsdp_pads_the_process_with_fewer_rows(fast_overrides, tmp_path):
    """Shards of unequal size (7 prompts x 4 samples in 4 mini-batches of 7 rows: 3 on rank 0, 4 on rank 1, one
    row a micro-batch): under FSDP rank 0 runs a pad of zero weight in step with rank 1's fourth micro-batch, and
    the run still equals the 1-process run."""
    config, overrides = _config("grpo", fast_overrides)
    overrides = [*overrides, "train.prompts_per_step=7", "train.micro_batch_size=1"]
    train(load_config(config, overrides), tmp_path / "one")
    _two_process_run(config, overrides, tmp_path / "fsdp", "fsdp")
    _assert_same_run(tmp_path / "one", tmp_path / "fsdp")


@pytest.mark.slow
@pytest.mark.parametrize(
    "knobs, param_tol",
    [
        (["rollout.backend=vllm"], 1e-6),  # a vLLM engine per process (TRL's colocate mode)
        (["model.lora={r: 8, alpha: 16}", "train.lr=1e-3"], 1e-5),  # adapters only, a 10x learning rate
        (["train.share_prefix=true"], 1e-5),  # a process's micro-batches run other prompt runs: rounding
        # step 1 sampled with theta_0 copied into the (sharded) policy, pi_old recomputed with it
        (["rollout.staleness=1", "train.old_logp=recompute"], 1e-6),
    ],
    ids=["vllm", "lora", "share_prefix", "staleness"],
)
def test_two_processes_equal_one_engines_and_adapters(knobs, param_tol, fast_overrides, tmp_path):
    config, overrides = _config("grpo", fast_overrides)
    overrides = [*overrides, *knobs]
    train(load_config(config, overrides), tmp_path / "one")
    ddp_only = any(k.startswith(("model.lora", "train.share_prefix")) for k in knobs)  # fsdp refuses them
    for mode in ["ddp"] if ddp_only else MODES:
        _two_process_run(config, overrides, tmp_path / mode, mode)
        _assert_same_run(tmp_path / "one", tmp_path / mode, param_tol)


def test_the_comparison_is_not_blind(fast_overrides, tmp_path):
    """Another seed on the 2-process side must fail the comparison (the check sees a changed run)."""
    config, overrides = _config("grpo", fast_overrides)
    train(load_config(config, overrides), tmp_path / "one")
    train(load_config(config, [*overrides, "seed=1"]), tmp_path / "other")
    with pytest.raises(AssertionError):
        _assert_same_run(tmp_path / "one", tmp_path / "other")


def _start_two_process_run(config, overrides, out, env=None):
    cmd = [sys.executable, "-m", "harness.cli", "train", config, *overrides, "--out", str(out), "--nproc", "2"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def _rank_pid(launcher: subprocess.Popen, rank: int, timeout: float = 120.0) -> int:
    """The pid of torchrun's worker with RANK=rank (a child of the launcher, which exec'd torchrun)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for child in Path("/proc").glob("[0-9]*"):
            try:
                stat = (child / "stat").read_text()
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                env = (child / "environ").read_bytes().split(b"\0")
            except (OSError, ValueError, IndexError):
                continue
            if ppid == launcher.pid and f"RANK={rank}".encode() in env:
                return int(child.name)
        time.sleep(0.2)
    raise AssertionError(f"no worker with RANK={rank} under pid {launcher.pid}")


def _read_until(proc: subprocess.Popen, needle: str, lines: list[str]) -> None:
    for line in proc.stdout:
        lines.append(line)
        if needle in line:
            return
    raise AssertionError(f"{needle!r} never printed:\n" + "".join(lines[-40:]))


def _signal_rank_1(config, overrides, run, after_step: int, sig: int) -> str:
    """Start a 2-process run, send `sig` to rank 1 once rank 0 printed step `after_step`; the run must fail.
    Returns everything it printed (both ranks and torchrun)."""
    lines: list[str] = []
    proc = _start_two_process_run(config, overrides, run)
    rank1 = _rank_pid(proc, 1)
    _read_until(proc, f"[harness] step {after_step:4d}", lines)
    os.kill(rank1, sig)
    lines += proc.stdout.readlines()
    assert proc.wait(timeout=300) != 0
    return "".join(lines)


@pytest.mark.parametrize("parallel, resume_nproc", [("ddp", 1), ("fsdp", 2)])
def test_sigterm_to_one_rank_stops_both_and_the_run_resumes(parallel, resume_nproc, fast_overrides, tmp_path):
    """SIGTERM to rank 1 alone: both ranks stop after the same step, rank 0 checkpoints it (under FSDP both
    gather the whole state for it); the rerun resumes there (ddp: on ONE process; fsdp: on 2, its optimizer
    state cut into shards again), and the whole run equals an uninterrupted 1-process run (no step lost or
    twice)."""
    config = SMOKE
    overrides = [*fast_overrides, "objective.preset=grpo", "train.steps=5", "train.checkpoint_every=10"]
    overrides += ["rollout.seeding=prompt", "train.threads=1", "train.micro_batch_size=4"]
    train(load_config(config, overrides), tmp_path / "one")
    run = tmp_path / "two"
    overrides.append(f"train.parallel={parallel}")
    text = _signal_rank_1(config, overrides, run, after_step=1, sig=signal.SIGTERM)
    stopped = re.findall(r"stopped by SIGTERM after step (\d+)", text)
    assert len(stopped) == 1, text[-3000:]  # the launcher's one line (each rank's end: harness/train/run/launch.py)
    at = int(stopped[0])
    assert (run / "checkpoints" / "latest").read_text() == f"step_{at:06d}"
    assert [r["step"] for r in _records(run)] == list(range(at + 1))
    assert at < 4, "the stop came too late to test a resume"
    if resume_nproc == 1:
        train(load_config(config, overrides), run)  # resumed on 1 process
    else:
        out = _two_process_run(config, overrides, run, parallel)
        assert f"resuming {run} at step {at + 1}" in out, out[-3000:]
    _assert_same_run(tmp_path / "one", run, param_tol=1e-5)  # 5 Adam steps: float sums' rounding adds up


@pytest.mark.slow
def test_a_rank_that_dies_takes_the_run_down_naming_it(fast_overrides, tmp_path):
    """SIGKILL to rank 1 (no handler runs): torchrun stops rank 0 and the launcher names the failed rank; no hang. The rerun
    resumes from the last checkpoint and completes."""
    overrides = [*fast_overrides, "objective.preset=grpo", "train.steps=6", "train.checkpoint_every=2"]
    overrides.append("rollout.seeding=prompt")
    run = tmp_path / "two"
    text = _signal_rank_1(SMOKE, overrides, run, after_step=2, sig=signal.SIGKILL)
    assert re.search(r"harness: rank 1 \(local_rank 1, pid \d+\) died: killed by SIGKILL", text), text[-3000:]
    assert (run / "checkpoints" / "latest").read_text() == "step_000001"
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "train", SMOKE, *overrides, "--out", str(run), "--nproc", "2"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert [r["step"] for r in _records(run)] == list(range(7))
