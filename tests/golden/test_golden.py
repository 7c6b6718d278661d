"""The golden record: seeded smoke-scale runs (grpo, dapo, ppo, dpo) log the numbers stored in
tests/golden/records/ for their first steps, every metric except perf/*. A change that moves a
number must rewrite the record (`python tests/golden/record.py NAME`) and say why."""
import importlib.util
import json
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("golden_record", Path(__file__).with_name("record.py"))
golden = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(golden)


@pytest.mark.parametrize("name", list(golden.RUNS))
def test_run_matches_golden_record(name):
    expected = json.loads((golden.RECORDS / f"{name}.json").read_text())
    differences = golden.diff(expected, golden.record(name))
    assert not differences, f"{name}: " + "\n".join(differences[:40])


def test_diff_reports_a_moved_value_a_missing_key_and_a_new_key():
    expected = [{"step": 0, "loss": 1.0, "gone": 2.0}]
    got = [{"step": 0, "loss": 1.001, "new": 3.0}]
    assert golden.diff(expected, got) == [
        "step 0: gone missing (expected 2.0)", "step 0: loss 1.0 -> 1.001", "step 0: new new (3.0)"]
    assert golden.diff(expected, [dict(expected[0])]) == []
