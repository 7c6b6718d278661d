"""`harness train --nnodes N`: where the launchers of one run on N machines meet (torchrun's rendezvous).

    nodes = resolve_nodes(2, node_rank=None, endpoint="10.0.0.1:29500", rdzv_id=None, backend="static", env={})
    nodes.torchrun_args()   # ['--nnodes=2', '--node-rank=0', '--rdzv-backend=static', '--rdzv-endpoint=...', ...]

One launcher runs on each node (`harness train ... --nnodes N --node-rank R`, or one task per node under
`srun`); each starts its node's P processes with torchrun's launcher (harness/train/run/launch.py), and the
N launchers meet at the rendezvous endpoint HOST:PORT. With the `static` backend (the default) node R's
processes are the global ranks R*P .. R*P + P - 1, the ones torchrun gives node R of a `--nproc_per_node P`
launch, so rank 0 (the one that writes the run directory) is local rank 0 of node 0, and the endpoint is
node 0's address (its launcher hosts the store). With `c10d` any node may host the endpoint, and torchrun
orders the nodes itself (by host name, then launcher pid): `--node-rank` then only names the node that hosts
the store.

Under SLURM (`srun`, one task per node) what is not on the command line is read from SLURM's environment:
the node rank from SLURM_NODEID, the endpoint's host from the first host of the step's node list
(`scontrol show hostnames`, else the list's own first name), its port from the job id (15000 + its last
four digits: two jobs sharing a node do not meet at one port), the rendezvous id from SLURM_JOB_ID.
Every value is checked here, before a config or a model loads: a bad one is a ConfigError naming the option.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from harness.config import ConfigError

BACKENDS = ("static", "c10d")
HOST_PORT = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(?P<port>[0-9]+)$")
NODELISTS = ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")


@dataclass(frozen=True)
class Nodes:
    """The rendezvous of one run's N node launchers (N >= 1)."""

    nnodes: int
    node_rank: int
    endpoint: str  # HOST:PORT
    rdzv_id: str
    backend: str

    def torchrun_args(self) -> list[str]:
        """torchrun's options for this node's launcher (in place of `--standalone`)."""
        args = [f"--nnodes={self.nnodes}", f"--node-rank={self.node_rank}", f"--rdzv-backend={self.backend}"]
        args += [f"--rdzv-endpoint={self.endpoint}", f"--rdzv-id={self.rdzv_id}"]
        if self.backend == "c10d":  # node 0 hosts the store, whatever host names the endpoint
            args.append(f"--rdzv-conf=is_host={str(self.node_rank == 0).lower()}")
        return args


def check_endpoint(text: str, option: str = "--rdzv-endpoint") -> str:
    """HOST:PORT (a host name, an IPv4 address or a bracketed IPv6 one; a port 1..65535) -> the same text."""
    m = HOST_PORT.match(text.strip())
    if m is None or not 1 <= int(m["port"]) <= 65535:
        raise ConfigError(
            f"{option} {text!r} is not HOST:PORT (a host name or address of node 0 and a port 1-65535, "
            "e.g. 10.0.0.1:29500)"
        )
    return text.strip()


def first_host(nodelist: str) -> str:
    """The first host of a SLURM node list: 'gpu[03-05,09],cpu1' -> 'gpu03' (`scontrol show hostnames` when
    SLURM's tools are on the PATH, which knows every form of the list)."""
    if shutil.which("scontrol"):
        done = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.split():
            return done.stdout.split()[0]
    m = re.match(r"^([^,\[]+)(?:\[([^\]]+)\])?", nodelist.strip())
    if m is None:
        raise ConfigError(f"SLURM's node list {nodelist!r} names no host; pass --rdzv-endpoint HOST:PORT")
    first = (m[2] or "").split(",")[0].split("-")[0]
    return m[1] + first


def _slurm_endpoint(env: Mapping[str, str]) -> str | None:
    """HOST:PORT of node 0 from SLURM's environment (None outside SLURM)."""
    nodelist = next((env[k] for k in NODELISTS if env.get(k)), None)
    if nodelist is None or not env.get("SLURM_JOB_ID", "").isdigit():
        return None
    return f"{first_host(nodelist)}:{15000 + int(env['SLURM_JOB_ID'][-4:])}"


def _node_rank(node_rank: int | None, nnodes: int, env: Mapping[str, str]) -> int:
    """--node-rank, else SLURM_NODEID; in [0, nnodes)."""
    source = "--node-rank"
    if node_rank is None and env.get("SLURM_NODEID", "").lstrip("-").isdigit():
        node_rank, source = int(env["SLURM_NODEID"]), "SLURM_NODEID"
    if node_rank is None:
        raise ConfigError(
            f"--nnodes {nnodes} needs --node-rank R (0 <= R < {nnodes}: this node's place), or SLURM_NODEID (under srun)"
        )
    if not 0 <= node_rank < nnodes:
        raise ConfigError(f"{source} {node_rank} is not a node of --nnodes {nnodes} (allowed: 0 to {nnodes - 1})")
    return node_rank


def resolve_nodes(
    nnodes: int | None,
    node_rank: int | None,
    endpoint: str | None,
    rdzv_id: str | None,
    backend: str = "static",
    env: Mapping[str, str] | None = None,
) -> Nodes | None:
    """The rendezvous of this launcher (None: one node, torchrun --standalone). Options left out are
    read from SLURM's environment (env: os.environ); a value that is bad or missing is a ConfigError."""
    env = os.environ if env is None else env
    if nnodes is None and node_rank is None and endpoint is None and rdzv_id is None:
        return None
    nnodes = 1 if nnodes is None else nnodes
    if nnodes < 1:
        raise ConfigError(f"--nnodes {nnodes}: the run's number of nodes must be >= 1")
    if backend not in BACKENDS:
        raise ConfigError(f"--rdzv-backend {backend!r} is not one of {list(BACKENDS)}")
    endpoint = check_endpoint(endpoint) if endpoint is not None else _slurm_endpoint(env)
    if endpoint is None and nnodes > 1:
        raise ConfigError(
            f"--nnodes {nnodes} needs --rdzv-endpoint HOST:PORT (node 0's address, the same on every node), "
            "or SLURM's environment (run it under srun)"
        )
    rank = _node_rank(node_rank, nnodes, env) if nnodes > 1 else _node_rank(node_rank or 0, 1, {})
    if endpoint is None:  # one node with a --node-rank 0 or an id alone: torchrun --standalone
        return None
    return Nodes(nnodes, rank, endpoint, rdzv_id or env.get("SLURM_JOB_ID") or "harness", backend)


def per_node(nproc: int, nodes: Nodes | None) -> int:
    """Processes of each node: train.nproc (the run's, N * P after `--nproc P`) split evenly over the nodes."""
    if nodes is None:
        return nproc
    if nproc % nodes.nnodes:
        raise ConfigError(
            f"train.nproc={nproc} processes do not split evenly over --nnodes {nodes.nnodes}; pass --nproc P "
            "(processes per node) or a train.nproc that is a multiple of the nodes"
        )
    return nproc // nodes.nnodes
