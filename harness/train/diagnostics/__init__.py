"""Per-step diagnostics: rollout and update metrics, per-group statistics, rollout/train mismatch, MoE routing."""
