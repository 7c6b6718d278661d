"""The run shell and what it owns: resume and checkpoints (on the run directory of harness/train/core/rundir.py),
signals, faults, the initial policy (warm start), the cached step-0 eval and `harness eval`, several processes."""
