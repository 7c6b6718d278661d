"""`harness train --nnodes N --nproc P`: N node launchers meet at torchrun's rendezvous (harness/train/run/nodes.py).

Two "nodes" on this machine (two launchers of 1 process each, at a loopback endpoint) log what one node of
2 processes logs (`--nproc 2`): the same global ranks, the same seeding. The options are checked before
the config loads, each bad one a line naming it (exit status 2); under srun they come from SLURM's
environment.
"""

from __future__ import annotations

import json
import math
import socket
import subprocess
import sys

import pytest

from harness.cli import main
from harness.config import ConfigError
from harness.train.run.nodes import first_host, per_node, resolve_nodes

SMOKE = "experiments/runs/smoke.yaml"
TINY = ["warm_start.enabled=false", "train.steps=2", "train.prompts_per_step=2", "train.group_size=2"]
TINY += ["rollout.max_new_tokens=4", "eval.num_prompts=2", "eval.n_samples=1", "eval.ks=[1]", "eval.every=0"]
TINY += ["tracking.mlflow=false", "rollout.seeding=prompt", "train.threads=1", "train.mini_batches=1"]
SKIP = ("perf/", "threads/")  # timings and the thread governor differ between any two runs


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _records(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def _train(*args: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "harness.cli", "train", SMOKE, *TINY, *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finish(proc: subprocess.Popen) -> str:
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out[-3000:]
    return out


@pytest.mark.slow  # 6 min on 2 busy cores (load 8-10): five interpreters import torch and transformers
def test_two_nodes_of_one_process_equal_one_node_of_two(tmp_path):
    endpoint = f"127.0.0.1:{_free_port()}"
    node = ["--nnodes", "2", "--nproc", "1", "--rdzv-endpoint", endpoint, "--out", str(tmp_path / "two")]
    nodes = [_train(*node, "--node-rank", str(r)) for r in (0, 1)]  # both see one --out, as on a shared disk
    logs = [_finish(p) for p in nodes]
    assert "--nnodes=2 --node-rank=0 --rdzv-backend=static" in logs[0]
    _finish(_train("--nproc", "2", "--out", str(tmp_path / "one")))
    a, b = _records(tmp_path / "one"), _records(tmp_path / "two")
    assert [r["step"] for r in a] == [r["step"] for r in b] == [0, 1, 2]
    for x, y in zip(a, b):
        keys = {k for k in x if not k.startswith(SKIP)}
        assert keys == {k for k in y if not k.startswith(SKIP)}
        assert {"loss/policy", "kl/ref", "reward/mean", "entropy"} <= keys or x["step"] == 2, sorted(keys)
        for k in keys:
            if isinstance(x[k], float) and math.isnan(x[k]):
                assert math.isnan(y[k]), k
            else:
                assert y[k] == pytest.approx(x[k], rel=1e-5, abs=1e-6), (x["step"], k, x[k], y[k])
    assert not list((tmp_path / "two").glob("harness-rank*")), "a rank of node 1 wrote into the run directory"


BAD = [
    (["--nnodes", "0"], "harness: --nnodes 0: the run's number of nodes must be >= 1"),
    (["--nnodes", "2"], "harness: --nnodes 2 needs --rdzv-endpoint HOST:PORT"),
    (["--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint", "node0"], "harness: --rdzv-endpoint 'node0' is not"),
    (["--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint", "h:70000"], "harness: --rdzv-endpoint 'h:70000' is not"),
    (["--nnodes", "2", "--node-rank", "2", "--rdzv-endpoint", "h:1"], "harness: --node-rank 2 is not a node of"),
    (["--nnodes", "2", "--node-rank", "-1", "--rdzv-endpoint", "h:1"], "harness: --node-rank -1 is not a node of"),
    (["--nnodes", "2", "--rdzv-endpoint", "h:1"], "harness: --nnodes 2 needs --node-rank R"),
    (["--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint", "h:1"], "harness: train.nproc=1 processes do not split"),
]


@pytest.mark.parametrize("extra, line", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_node_options_are_one_line(extra, line, capsys, monkeypatch, tmp_path):
    for k in ("SLURM_JOB_ID", "SLURM_NODEID", "SLURM_JOB_NODELIST", "SLURM_STEP_NODELIST", "SLURM_NODELIST"):
        monkeypatch.delenv(k, raising=False)
    assert main(["train", SMOKE, *TINY, *extra, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(line), err
    assert not (tmp_path / "run").exists()


SLURM = {"SLURM_JOB_ID": "4812345", "SLURM_NODEID": "1", "SLURM_STEP_NODELIST": "gpu[07-08]", "PATH": ""}


def test_under_srun_the_rendezvous_comes_from_slurm(monkeypatch):
    monkeypatch.setenv("PATH", "")  # no scontrol: the node list's own first name
    nodes = resolve_nodes(2, None, None, None, env=SLURM)
    assert (nodes.nnodes, nodes.node_rank, nodes.endpoint, nodes.rdzv_id) == (2, 1, "gpu07:17345", "4812345")
    assert nodes.torchrun_args() == [
        "--nnodes=2",
        "--node-rank=1",
        "--rdzv-backend=static",
        "--rdzv-endpoint=gpu07:17345",
        "--rdzv-id=4812345",
    ]
    given = resolve_nodes(2, 0, "10.0.0.1:29500", "x", backend="c10d", env=SLURM)  # the command line wins
    assert (given.node_rank, given.endpoint, given.rdzv_id) == (0, "10.0.0.1:29500", "x")
    assert given.torchrun_args()[-1] == "--rdzv-conf=is_host=true"
    assert resolve_nodes(None, None, None, None, env=SLURM) is None  # no --nnodes: one node, as before
    with pytest.raises(ConfigError, match="SLURM_NODEID 3 is not a node of --nnodes 2"):
        resolve_nodes(2, None, None, None, env={**SLURM, "SLURM_NODEID": "3"})


@pytest.mark.parametrize(
    "nodelist, host",
    [("gpu[03-05,09],cpu1", "gpu03"), ("n12", "n12"), ("a1,b2", "a1"), ("rack2-n[010-011]", "rack2-n010")],
)
def test_first_host_of_a_node_list(nodelist, host, monkeypatch):
    monkeypatch.setenv("PATH", "")
    assert first_host(nodelist) == host


def test_processes_per_node():
    two = resolve_nodes(2, 0, "h:1", None, env={})
    assert per_node(4, two) == 2 and per_node(3, None) == 3
    with pytest.raises(ConfigError, match="train.nproc=3 processes do not split evenly over --nnodes 2"):
        per_node(3, two)
