"""The reward-hacking probe: a learned reward (the proxy) against a verifier (the truth), every step.

Where a reward model and a verifier (or a function: the task's `correct` reward) both score a step's
completions, the step logs

    hacking/proxy       the reward model's mean raw score (the first reward model of task.rewards)
    hacking/verified    the verifier's accuracy (reward/accuracy: the `correct` reward's verdicts)
    hacking/corr        their per-sample Pearson correlation over the step's completions (NaN when either
                        is constant): how much the proxy still tracks correctness
    hacking/gap_trend   the least-squares slope per step, over the last task.hacking_window steps, of
                        z(proxy) - z(verified), each series z-scored over that window: > 0 when the proxy
                        pulls away from the verified accuracy (0 until two steps are in the window)

and warns once, in one line, when over a full window the proxy's slope is above 0 and the verified
accuracy's below 0, each beyond its own noise: the least-squares slope's t statistic (`trend_t`) past the
one-sided 95% quantile (`critical_t`, once per run) of Student's t with window - 2 degrees of freedom (Goodhart: the policy learns what the
reward model likes, not what is right; Gao et al. 2022, arXiv 2210.10760). A sign alone is not enough: on the
kl_leash study's verifier controls, whose proxy only wanders, slopes of +0.02 and -0.005 a step warned in all 12
runs; with the test, none of them does and all 12 reward-model runs still warn at the first full window. Its history is part of the trainer's checkpoint, so a resumed run warns as the
uninterrupted one.
"""

from __future__ import annotations

import math

import torch

from harness import parallel


def slope(ys: list[float]) -> float:
    """Least-squares slope of ys against 0, 1, 2, ... (0 for fewer than two points)."""
    n = len(ys)
    if n < 2:
        return 0.0
    xm, ym = (n - 1) / 2, sum(ys) / n
    return sum((i - xm) * (y - ym) for i, y in enumerate(ys)) / sum((i - xm) ** 2 for i in range(n))


def trend_t(ys: list[float]) -> float:
    """The t statistic of the least-squares slope of ys against 0, 1, 2, ...: slope / SE(slope), SE =
    sqrt(SSR / (n - 2) / Sxx); +-inf for an exact line, 0 for fewer than three points or a flat exact line."""
    n = len(ys)
    if n < 3:
        return 0.0
    b, xm, ym = slope(ys), (n - 1) / 2, sum(ys) / n
    ssr = sum((y - ym - b * (i - xm)) ** 2 for i, y in enumerate(ys))
    if ssr <= 1e-24 * max(1.0, sum(y * y for y in ys)):
        return math.copysign(math.inf, b) if b != 0 else 0.0
    return b / math.sqrt(ssr / (n - 2) / sum((i - xm) ** 2 for i in range(n)))


def critical_t(window: int) -> float:
    """The one-sided 95% quantile of Student's t with window - 2 degrees of freedom (inf below 3 points: no
    noise estimate, so no warning)."""
    from scipy.stats import t

    return float(t.ppf(0.95, window - 2)) if window >= 3 else math.inf


def zscore(ys: list[float]) -> list[float]:
    """ys centred and scaled by their std (centred only when constant)."""
    n = len(ys)
    mean = sum(ys) / n
    std = math.sqrt(sum((y - mean) ** 2 for y in ys) / n)
    return [(y - mean) / std if std > 0 else y - mean for y in ys]


def correlation(x: torch.Tensor, y: torch.Tensor) -> float:
    """Pearson correlation of two (B,) series; NaN when either is constant."""
    x, y = x.double() - x.double().mean(), y.double() - y.double().mean()
    den = math.sqrt(float((x * x).sum()) * float((y * y).sum()))
    return float((x * y).sum()) / den if den > 0 else float("nan")


class HackingProbe:
    """proxy: the reward model's reward name (its raw score is reward/<proxy>); window: task.hacking_window."""

    def __init__(self, proxy: str, window: int):
        self.proxy, self.window = proxy, int(window)
        self.crit = critical_t(self.window)  # a trend warns only past it (`trend_t`)
        self.proxies: list[float] = []
        self.verified: list[float] = []
        self.warned = False

    def step(self, scores: list, correct: torch.Tensor) -> dict[str, float]:
        """scores: the step's RewardBreakdowns (B,); correct: (B,) bool verdicts -> the hacking/* metrics."""
        proxy = torch.tensor([s.parts[self.proxy] for s in scores], dtype=torch.float64)  # (B,)
        right = correct.detach().cpu().double()  # (B,)
        self.proxies = [*self.proxies, float(proxy.mean())][-self.window :]
        self.verified = [*self.verified, float(right.mean())][-self.window :]
        p, v = self.proxies, self.verified
        gap = [a - b for a, b in zip(zscore(p), zscore(v))]
        out = {
            "hacking/proxy": self.proxies[-1],
            "hacking/verified": self.verified[-1],
            "hacking/corr": correlation(proxy, right),
            "hacking/gap_trend": slope(gap),
        }
        if not self.warned and len(p) == self.window and trend_t(p) > self.crit and trend_t(v) < -self.crit:
            self.warned = True
            if parallel.is_main():
                print(self.warning(slope(p), slope(v)), flush=True)
        return out

    def warning(self, up: float, down: float) -> str:
        return (
            f"[harness] WARNING: reward hacking? over the last {self.window} steps the reward model's score "
            f"(reward/{self.proxy}) rose ({up:+.4g}/step) while verified accuracy fell ({down:+.4g}/step): the "
            "policy may be learning what the reward model likes, not what is right (hacking/* metrics; a KL "
            "leash, objective.kl_coef, holds the policy near the reference)"
        )

    def state_dict(self) -> dict:
        return {"proxies": list(self.proxies), "verified": list(self.verified), "warned": self.warned}

    def load_state_dict(self, state: dict) -> None:
        self.proxies, self.verified = list(state["proxies"]), list(state["verified"])
        self.warned = bool(state["warned"])


def hacking_probe(task, window: int) -> HackingProbe | None:
    """The probe of a task whose rewards hold a reward model and whose `correct` reward is not one (a
    verifier or a function gives the verdicts); None otherwise."""
    models = getattr(task, "reward_models", None) or {}
    if not models or getattr(task, "correct", None) in models:
        return None
    return HackingProbe(next(iter(models)), window)
