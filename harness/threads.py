"""The OpenMP wait policy, set before torch loads (harness/__init__.py imports this first).

OpenMP threads spin while they wait for a sibling; when another process holds one of the
cores (a second job, the MLflow UI, a browser), the spinning thread burns the time slice the
descheduled sibling needs. Measured on 2 cores with one other busy process (issue 13):
2 torch threads 2.76 s/step with libgomp's default policy, 1.40 with OMP_WAIT_POLICY=PASSIVE,
1 thread 1.24. So harness processes default to PASSIVE, unless the user set OMP_WAIT_POLICY or
GOMP_SPINCOUNT (libgomp's own default spin is GOMP_SPINCOUNT=300000: `harness bench
--omp-wait-policy unset` runs its cases that way, to compare). docs/faults.md, "Threads".
"""
from __future__ import annotations

import os

DEFAULT_POLICY = "PASSIVE"


def default_omp_wait_policy(environ=os.environ) -> str | None:
    """Set OMP_WAIT_POLICY=PASSIVE unless the user chose a wait policy; returns the value set (or None)."""
    if "OMP_WAIT_POLICY" in environ or "GOMP_SPINCOUNT" in environ:
        return None
    environ["OMP_WAIT_POLICY"] = DEFAULT_POLICY
    return DEFAULT_POLICY
