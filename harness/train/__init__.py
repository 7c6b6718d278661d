"""Training, by layer:

    run/          the run shell (shell.py) and what it owns: run directory, checkpoints and resume,
                  signals, faults, the non-finite policy, the initial policy, trained components
    rl/           the RL trainer's step: rollouts and scoring, the policy update
    dpo/          the DPO trainer's step: rounds of preference pairs
    eval/         held-out pass@k, the cached step-0 eval, `harness eval`, paired comparisons
    diagnostics/  per-step metrics: groups, rollout/train mismatch, MoE routing
    batch.py      the typed batch and the one micro-batch iterator

`from harness.train import train`: run (or resume) one run, `harness train CONFIG --out DIR`
(harness/train/run/shell.py; the config key `trainer:` picks the RL or the DPO step).
"""

from harness.train.run.shell import run as train

__all__ = ["train"]
