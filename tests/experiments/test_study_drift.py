"""Drift of the studies (slow): each study's first smoke cell, rerun through its Snakefile, against the
numbers recorded in tests/experiments/drift_records/ (tests/experiments/study_drift.py).
On the recording machine's kernel path every number must come back equal; on another, the numbers
with intervals must come back inside them (the rest moves with the CPU's rounding)."""

import importlib.util
import json
from pathlib import Path

import pytest

from harness.experiment import reproduce as rp

_spec = importlib.util.spec_from_file_location("study_drift", Path(__file__).with_name("study_drift.py"))
drift = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(drift)


def test_every_study_has_a_drift_record():
    for study in drift.STUDIES:
        record = json.loads((drift.RECORDS / f"{study}.json").read_text())
        assert record["scale"] == "smoke" and record["machine"] and record["cells"], study


@pytest.mark.slow
@pytest.mark.parametrize("study", drift.STUDIES)
def test_smoke_cell_matches_its_record(study, tmp_path):
    record = json.loads((drift.RECORDS / f"{study}.json").read_text())
    ((cell, numbers),) = record["cells"].items()
    run = rp.rerun_cell(study, "smoke", cell, str(tmp_path), cores=2)
    same = rp.same_kernel_path(record["machine"], rp.run_machine(run))
    rows = rp.compare(numbers, rp.cell_numbers(run), same)
    assert not rp.failed(rows), f"{study} {cell} ({'same' if same else 'another'} kernel path):\n" + rp.format_rows(
        rows
    )
