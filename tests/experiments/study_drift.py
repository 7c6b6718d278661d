"""Smoke-scale drift records: one short cell per study, rerun against the numbers it gave when recorded.

    python tests/experiments/study_drift.py [STUDY ...]   # (re)record: run each study's first smoke cell

On the recording machine's kernel path (harness/machine.py) a rerun must give every number back
equal, so a change that moves any number of any study shows the day it is made; on another kernel
path only the numbers with intervals are judged (test_study_drift.py). A change that moves numbers
on purpose re-records the studies it moves, and its commit says why.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

RECORDS = Path(__file__).resolve().parent / "drift_records"
STUDIES = ("demo", "length_bias", "difficulty_bias", "moe_stability", "dpo_displacement", "clip_higher", "passk")


def first_cell(study: str) -> str:
    from harness.experiment import load_study

    return load_study(study, "smoke").cells[0].id


def record(study: str) -> Path:
    from harness.experiment import reproduce as rp

    with tempfile.TemporaryDirectory() as results:
        rp.rerun_cell(study, "smoke", first_cell(study), results, cores=2)
        return rp.write_record(study, "smoke", results, out=RECORDS / f"{study}.json")


if __name__ == "__main__":
    for name in sys.argv[1:] or STUDIES:
        print(f"{name}: {record(name)}")
