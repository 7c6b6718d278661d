"""Run-directory bookkeeping: flushes are idempotent, truncation drops un-checkpointed steps."""

from harness.jsonl import read_jsonl
from harness.train.core.rundir import RunDir


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


def test_a_checkpoint_sweeps_the_partial_writes_of_a_killed_attempt(tmp_path):
    """A SIGKILL mid-write leaves atomic_folder's temp folders behind (no `finally` runs); the next
    checkpoint removes them and keeps the finished ones."""
    from harness.models import build_model

    model, tok = build_model("tiny-dense", seed=0)
    run = RunDir(tmp_path / "run")
    run.save_checkpoint(1, model, {"x": 1}, tok)
    stale = [".step_000002.tmp-abc", ".step_000001.old-def", ".tmp_step_000002"]
    for name in stale:
        (run.ckpt_root / name).mkdir()
        (run.ckpt_root / name / "part.bin").write_bytes(b"partial")
    run.save_checkpoint(2, model, {"x": 2}, tok)
    assert sorted(p.name for p in run.ckpt_root.iterdir()) == ["latest", "step_000001", "step_000002"]
