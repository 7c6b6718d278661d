"""Run-directory bookkeeping: flushes are idempotent, truncation drops un-checkpointed steps."""
from harness.jsonl import read_jsonl
from harness.train.run.rundir import RunDir


def test_flush_is_idempotent_and_truncate_drops_later_steps(tmp_path):
    run = RunDir(tmp_path)
    recs = [{"step": s, "x": float(s)} for s in range(4)]
    run.flush(recs[:2], [{"step": 0, "t": "a"}, {"step": 1, "t": "b"}])
    run.flush(recs[:3], [])  # steps 0,1 already there: only step 2 is appended
    assert run.logged_steps() == [0, 1, 2]
    run.truncate_after(1)
    assert run.logged_steps() == [0, 1]
    assert [r["step"] for r in read_jsonl(run.samples_path)] == [0, 1]


def test_torn_last_line_is_ignored(tmp_path):
    run = RunDir(tmp_path)
    run.flush([{"step": 0}], [])
    with open(run.metrics_path, "a") as f:
        f.write('{"step": 1, "x": ')  # killed mid-write
    assert run.logged_steps() == [0]
    run.truncate_after(5)
    assert run.logged_steps() == [0]
