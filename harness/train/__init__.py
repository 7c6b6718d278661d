"""Training, by layer (bottom first; tests/test_import_layers.py holds the order):

    core/         what every trainer shares: the trainer contract (trainer.py), collecting and scoring a
                  step's rollouts (collect.py, scoring.py), the batch and its forwards (batch.py, forward.py),
                  the trained components and their optimizers (components.py), the non-finite policy
                  (nonfinite.py), the policy a run trains (policy_module.py), one step's context (step_context.py),
                  the run directory (rundir.py),
                  the rollout/train mismatch and MoE routing (mismatch.py, routing.py), FSDP (sharding.py)
    rl/           the RL trainer's step in the reference loop's phases, the policy update, its observers
    dpo/          the DPO trainer's step: rounds of preference pairs
    eval/         held-out pass@k, paired comparisons, `harness compare`
    diagnostics/  per-step metrics: rollout and update metrics, per-group statistics
    run/          the run shell (shell.py) and what it owns: resume, checkpoints, signals, the initial
                  policy (warm start), the cached step-0 eval and `harness eval`, several processes

`from harness.train import train`: run (or resume) one run, `harness train CONFIG --out DIR`
(harness/train/run/shell.py; the config key `trainer:` picks the RL or the DPO step).
"""

from harness.train.run.shell import run as train

__all__ = ["train"]
