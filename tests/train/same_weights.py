"""Two runs that should take the same optimizer steps land on the same weights, up to what Adam does to rounding.

Adam moves a weight by about lr * g / (|g| + eps): where a gradient component is itself at rounding level
(|g| ~ eps), a last-bit difference in g (a matmul of another width, a sum in another order, another CPU's
kernels) changes the step by a fraction of lr, of either sign. So two correct runs agree to float noise on
all but a handful of weights, and on those differ by at most a few Adam steps (measured on AVX2 kernels:
one weight of 16,384 in a tensor 8.7e-5 apart at lr 1e-4, every other within 1e-6; measured with
ATEN_CPU_CAPABILITY=avx2 on an Intel Xeon: 1 and 5 of the tiny model's 800,384 weights past 1e-5 and 1e-6).
A wrong gradient moves far more: pi_old's log-probs off by 0.05 (the ratio of every token 5% low) put 566
of the 800,384 weights more than 1e-5 from the right run's, 7 times what this allows.
"""

import torch

# Adam's step is bounded by lr * (1 - beta1) / sqrt(1 - beta2) ~= 3.2 lr at torch's default betas
ADAM_STEP_BOUND = 3.2
# the share of weights allowed to sit on a rounding-level gradient: 1 in 10,000
OUTLIER_SHARE = 1e-4


def weight_gaps(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], atol: float) -> tuple[int, int, float]:
    """(weights further apart than atol, weights in all, the largest gap) over every tensor of two state dicts."""
    assert a.keys() == b.keys(), a.keys() ^ b.keys()
    over = total = 0
    worst = 0.0
    for k in a:
        gap = (a[k].float() - b[k].float()).abs()
        over += int((gap > atol).sum())
        total += gap.numel()
        worst = max(worst, float(gap.max()) if gap.numel() else 0.0)
    return over, total, worst


def assert_same_weights(a, b, *, atol: float, lr: float, steps: int) -> None:
    """Every weight within atol but at most OUTLIER_SHARE of them, and those within Adam's bound on `steps` steps."""
    over, total, worst = weight_gaps(a, b, atol)
    allowed = max(1, int(OUTLIER_SHARE * total))
    assert over <= allowed, (
        f"{over} of {total} weights differ by more than {atol:g} (allowed {allowed}); worst {worst:.2e}"
    )
    bound = ADAM_STEP_BOUND * lr * steps
    assert worst <= bound, f"weights differ by {worst:.2e}, past {steps} Adam step(s) of lr {lr:g} ({bound:.2e})"
