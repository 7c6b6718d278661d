"""RL post-training research harness: one composable objective, many presets."""

__version__ = "0.1.0"
