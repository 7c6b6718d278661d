"""Per-step diagnostics: rollout and update metrics (metrics.py), per-group statistics and the gradient share
of extreme groups (group_stats.py). The rollout/train mismatch and MoE routing are measured by the forwards
themselves (harness/train/core/mismatch.py, routing.py)."""
