"""The DPO trainer: its step and rounds (step.py), preference pairs (pairs.py)."""
