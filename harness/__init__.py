"""RL post-training research harness: one composable objective, many presets."""
from harness.threads import default_omp_wait_policy

default_omp_wait_policy()  # before torch loads: OpenMP threads must not spin on a shared core (harness/threads.py)

__version__ = "0.1.0"
