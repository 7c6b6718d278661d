"""Paired comparison of two policies on the same eval prompts: is a rise of pass@1 real?

Both policies are sampled on the same prompts with the same sampling seed (common random
numbers), so the per-prompt difference d_i = pass@1_final(i) - pass@1_initial(i) removes the
prompt-difficulty variance that dominates a 64-prompt eval. The 95% interval is a percentile
bootstrap over prompts (Efron & Tibshirani 1993, ch. 13): resample the P prompts with
replacement, take the mean of d over the resample, repeat n_boot times, read the 2.5% and
97.5% quantiles. An interval that excludes 0 is what "pass@1 rises clearly" means here.
"""

from __future__ import annotations

import torch


def paired_bootstrap(
    initial: torch.Tensor, final: torch.Tensor, n_boot: int = 2000, seed: int = 0, level: float = 0.95
) -> dict[str, float]:
    """initial, final: (P,) per-prompt scores of the same P prompts.
    -> {"delta": mean(final - initial), "lo", "hi": the bootstrap interval, "p_le_0": share of
    resampled means <= 0 (a one-sided bootstrap p-value for "no rise")}."""
    if initial.shape != final.shape or initial.dim() != 1 or initial.numel() == 0:
        raise ValueError(
            f"need two (P,) tensors of the same P > 0 prompts, got {tuple(initial.shape)} and {tuple(final.shape)}"
        )
    d = final.double() - initial.double()  # (P,)
    P = d.numel()
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, P, (n_boot, P), generator=g)  # (n_boot, P) resampled prompt indices
    means = d[idx].mean(-1)  # (n_boot,)
    alpha = (1.0 - level) / 2
    lo, hi = torch.quantile(means, torch.tensor([alpha, 1.0 - alpha], dtype=torch.float64)).tolist()
    return {"delta": float(d.mean()), "lo": lo, "hi": hi, "p_le_0": float((means <= 0).double().mean())}
