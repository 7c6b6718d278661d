"""Does a regime have what a mechanism needs? Numbers of the training batches a policy samples.

    harness probe STUDY --regime [--scale S] [--batches N]

samples N training batches from the study's warm start with the reference arm's settings
(the first cell) and prints, per batch and on average:
    accuracy              share of rollouts correct
    mixed_groups          share of groups with both right and wrong answers (A != 0 somewhere)
    truncated             share of rollouts that hit max_new_tokens
    length_right, length_wrong   mean response length (tokens)
    within_group_std      mean over groups of the population std of the lengths in the group
    wrong_minus_right     mean over MIXED groups of (mean wrong length - mean right length):
                          the length-bias mechanism needs it away from 0 (docs/studies.md (a))
    p_extreme             share of groups with p < 0.2 or p > 0.8 (difficulty bias, (b))
Shapes: N prompts, G group size, B = N*G rows (groups contiguous).
"""

from __future__ import annotations

from harness.probes.engine import setup_policy, t_interval
from harness.train.core.collect import collect
from harness.train.core.episode import Episode
from harness.train.diagnostics.group_stats import P_HIGH, P_LOW

REGIME_FIRST_STEP = 20_000  # batch b draws the prompts and samples of step 20_000 + b: never a run's or a probe's
KEYS = (
    "accuracy",
    "mixed_groups",
    "truncated",
    "length_right",
    "length_wrong",
    "within_group_std",
    "wrong_minus_right",
    "p_extreme",
)


def regime_stats(ep: Episode) -> dict[str, float]:
    """The numbers above for one episode (N groups of G)."""
    G = ep.group_size
    c = ep.correct.view(-1, G).float()  # (N, G)
    L = ep.rollout.lengths.view(-1, G).float()  # (N, G)
    k = c.sum(-1)
    mixed = (k > 0) & (k < G)
    gaps = [float(L[i][c[i] == 0].mean() - L[i][c[i] == 1].mean()) for i in range(len(c)) if mixed[i]]
    p = k / G
    nan = float("nan")
    return {
        "accuracy": float(c.mean()),
        "mixed_groups": float(mixed.float().mean()),
        "truncated": float(ep.rollout.truncated.float().mean()),
        "length_right": float(L[c == 1].mean()) if bool((c == 1).any()) else nan,
        "length_wrong": float(L[c == 0].mean()) if bool((c == 0).any()) else nan,
        "within_group_std": float(L.std(-1, unbiased=False).mean()) if G > 1 else nan,
        "wrong_minus_right": sum(gaps) / len(gaps) if gaps else nan,
        "p_extreme": float(((p < P_LOW) | (p > P_HIGH)).float().mean()),
    }


def run_regime(cfg, batches: int, log=print) -> dict:
    """Sample `batches` training batches from cfg's initial policy; per-key mean and 95% t-interval."""
    task, policy, tok, render, pad_id, backend = setup_policy(cfg)
    rows = []
    for b in range(batches):
        ep, _ = collect(task, backend, render, cfg, REGIME_FIRST_STEP + b)
        rows.append(regime_stats(ep))
        log(f"[regime] batch {b + 1}/{batches}: " + " ".join(f"{k} {rows[-1][k]:.3f}" for k in KEYS))
    out = {}
    for k in KEYS:
        m, h = t_interval([r[k] for r in rows])
        out[k] = {"mean": m, "half": h}
    log(
        "[regime] mean over batches (95% t-interval): "
        + "; ".join(f"{k} {v['mean']:.3f} ± {v['half']:.2g}" for k, v in out.items())
    )
    return {"batches": rows, "mean": out}
