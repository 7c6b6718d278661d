"""The run shell and what it owns: run directory, checkpoints and resume, signals, faults, the non-finite policy, the initial policy (warm start), trained components."""
