"""perf/gc_seconds and perf/gc_full (harness/train/run/gc_pauses.py): the clock counts what the collector does
while entered, `take()` hands it over once, and leaving the block unhooks it."""

import gc

from harness.train.run.gc_pauses import GcClock


def test_a_full_collection_is_counted_once_and_only_while_entered():
    with GcClock() as clock:
        clock.take()  # whatever automatic collections ran since entering
        gc.collect()  # a full (generation 2) collection
        got = clock.take()
        assert got["perf/gc_full"] >= 1.0 and got["perf/gc_seconds"] > 0.0
        gc.collect(0)  # a young-generation collection: timed, not full
        young = clock.take()
        assert young["perf/gc_full"] == 0.0 and young["perf/gc_seconds"] > 0.0
    assert clock._callback not in gc.callbacks
    gc.collect()
    assert clock.take() == {"perf/gc_seconds": 0.0, "perf/gc_full": 0.0}  # unhooked: nothing accrues
