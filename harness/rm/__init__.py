"""`harness train-rm`: a Bradley–Terry reward model trained here (docs/reward_models.md).

loss.py the pairwise loss; pairs.py the pairs (a file, or a run's samples); model.py the sequence
classifier built from a base and its scores; calibration.py held-out accuracy and calibration;
train.py the loop and the folder it writes; cli.py the command's options.
"""
