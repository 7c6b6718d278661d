"""A local `mlflow server` over the tracking store: the Snakefile starts one with
`--config mlflow_server=1` (many parallel local writers); benchmarks/mlflow_concurrency.py
measures the same server."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def start_mlflow_server(
    backend_uri: str, artifacts: str | os.PathLike, log: str | os.PathLike, workers: int = 1, timeout_s: float = 300
) -> tuple[subprocess.Popen, str]:
    """`mlflow server` on 127.0.0.1 (a free port) over `backend_uri`; returns (process, uri) once /health
    answers. The Snakefile starts it with `--config mlflow_server=1`; benchmarks/mlflow_concurrency.py
    measures the same server. Stop it with stop_mlflow_server."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    out = open(log, "w")
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("mlflow")),
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--backend-store-uri",
            backend_uri,
            "--artifacts-destination",
            str(Path(artifacts).resolve()),
            "--workers",
            str(workers),
        ],
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    uri = f"http://127.0.0.1:{port}"
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"mlflow server exited with {proc.returncode}; see {log}")
        try:
            with urllib.request.urlopen(uri + "/health", timeout=2) as r:
                if r.status == 200:
                    return proc, uri
        except OSError:
            time.sleep(0.5)
    stop_mlflow_server(proc)
    raise RuntimeError(f"mlflow server not healthy after {timeout_s} s; see {log}")


def stop_mlflow_server(proc: subprocess.Popen) -> None:
    """SIGTERM the server's process group; SIGKILL it if it lingers."""
    try:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait(timeout=20)
    except ProcessLookupError:
        pass
