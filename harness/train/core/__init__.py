"""The train core: what every trainer, eval, diagnostic and probe shares, in one place each.

trainer.py     what a trainer is to the run shell (Trainer) and what its step may use (RunContext)
step_context.py  what the functions of one RL step share (StepContext): policy, pi_ref, components, forwards
batch.py       the typed batch and the one micro-batch iterator
episode.py     the rollout/learner boundary: rewards and advantages in separate fields
collect.py     the per-step seeds, the prompt draws (training and held-out eval), sampling, the task's scores
policy_module.py  the policy module a run trains (LoRA adapters, activation checkpointing), its compute
               precision (train.autocast), its reference pi_ref, its checkpointed weights
components.py  the trained modules (the policy and its components), their optimizers and their guarded step
rundir.py      the run directory: config, metric files, checkpoints (with their manifests), summary
nonfinite.py   NaN / inf in a reward, a loss or a gradient (train.nan_policy)
scoring.py     an episode scored for the update: loss mask, pi_old / pi_ref log-probs, advantages, extras
forward.py     the forwards: a batch's no-grad log-probs under any policy, the loss of one micro-batch
mismatch.py    what the old policy's forward observes: rollout/train mismatch, MoE routing disagreement
routing.py     an MoE forward's expert choices, captured and compared as sets
"""
