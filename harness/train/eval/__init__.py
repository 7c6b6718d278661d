"""Held-out evaluation: pass@k (evaluate.py), the cached step-0 eval (eval_cache.py), `harness eval` (final_eval.py), paired comparisons (paired.py)."""
