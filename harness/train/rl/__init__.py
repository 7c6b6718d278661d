"""The RL trainer: its step in the reference loop's phases (step.py), the policy update (update.py), the step's
measurements (observers.py) and records (records.py), the stale sampler (staleness.py), on the train core
(harness/train/core/)."""
