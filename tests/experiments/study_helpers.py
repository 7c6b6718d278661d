"""Shared helpers for the experiment-layer tests (studies, Snakefile, tuning, summaries).

A module of its own, not conftest: several test folders have a conftest.py, so
`from conftest import ...` picks whichever was imported first."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PY = Path(sys.executable)
SNAKEMAKE = PY.with_name("snakemake")
SHIPPED_STUDIES = (
    "demo",
    "length_bias",
    "difficulty_bias",
    "moe_stability",
    "dpo_displacement",
    "clip_higher",
    "passk",
    "scaling",
)


def job_counts(output: str) -> dict[str, int]:
    """Parse Snakemake's 'Job stats' table (job  count) from a dry-run's output."""
    m = re.search(r"Job stats:\s*\n\s*job\s+count\s*\n[-\s]+\n(.*?)\n\s*total\s+(\d+)", output, re.S)
    assert m, f"no job table in snakemake output:\n{output[-3000:]}"
    counts = {}
    for line in m.group(1).splitlines():
        name, n = line.split()
        counts[name] = int(n)
    counts["total"] = int(m.group(2))
    return counts


def snakemake_cmd(workdir: Path, *args: str) -> list[str]:
    return [str(SNAKEMAKE), "-s", str(REPO / "Snakefile"), "-d", str(workdir), *args]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env["PATH"] = f"{PY.parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def run(cmd: list[str], cwd: Path, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env or clean_env(), capture_output=True, text=True, timeout=timeout)
