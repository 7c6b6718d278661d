"""`harness fit` (docs/fit.md): ScaleRL's sigmoid of compute per run and arm, arms compared on A and B.

sigmoid.py     R(C), the grid + bounded Levenberg-Marquardt fit (batched for the bootstrap)
data.py        a run's eval curve against cumulative compute (generated / trained tokens, FLOPs, wall, steps)
params.py      the model's parameter count from a run's config.yaml (meta device), for FLOPs
bootstrap.py   pooled seeds, resampling of seeds and prompts, intervals, the paired comparison
study_fit.py   refusals, per-run and per-arm rows, the extrapolation check, the printed summary
figure.py      fit.png
outputs.py     fit.csv, fit_compare.csv, fit.png; MLflow
"""
