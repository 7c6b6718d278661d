"""Held-out evaluation: pass@k (evaluate.py), paired comparisons (paired.py), `harness compare` (compare.py).
The cached step-0 eval and `harness eval RUN_DIR` build on it in the run layer (harness/train/run/eval_cache.py,
final_eval.py)."""
