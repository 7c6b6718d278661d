"""Training: the run shell (run/), the RL and DPO trainers' steps, eval and diagnostics.

`from harness.train import train`: run (or resume) one run, `harness train CONFIG --out DIR`
(harness/train/run/shell.py; the config key `trainer:` picks the RL or the DPO step).
"""


def __getattr__(name: str):
    if name == "train":  # imported lazily: `import harness.train.X` stays light
        from harness.train.run.shell import run

        return run
    raise AttributeError(f"module 'harness.train' has no attribute {name!r}")
