"""The RL trainer: its step (step.py) and the policy update (update.py), on the train core (harness/train/core/)."""
