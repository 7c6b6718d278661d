"""pass@k, the unbiased estimator (Chen et al. 2021, "Evaluating Large Language Models Trained
on Code", arXiv 2107.03374, Eq. 1): with n samples of which c are correct,

    pass@k = 1 - C(n-c, k) / C(n, k) = 1 - prod_{i=n-c+1}^{n} (1 - k/i)

computed with the stable product (no huge binomials). Taking "the first k of n samples" is not
unbiased. Metric names: eval/pass_at_1, eval/pass_at_8, ... (MLflow rejects '@').
"""

from __future__ import annotations

import operator


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k samples drawn without replacement from the n
    (c correct) is correct. 0 <= c <= n, 1 <= k <= n; n - c < k gives exactly 1.0."""
    n, c, k = (operator.index(x) for x in (n, c, k))
    if n < 1:
        raise ValueError(f"pass_at_k needs n >= 1 samples, got n={n}")
    if not 0 <= c <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n, got c={c}, n={n}")
    if k < 1:
        raise ValueError(f"pass_at_k needs k >= 1, got k={k}")
    if k > n:
        raise ValueError(f"pass_at_k needs k <= n (cannot draw k={k} of n={n} samples)")
    if n - c < k:
        return 1.0  # every k-subset holds a correct sample
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod
