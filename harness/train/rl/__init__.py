"""The RL trainer: its step (step.py), rollouts and scoring (collect.py, episode.py), the policy update (update.py)."""
