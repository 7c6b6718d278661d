"""Section `eval`: the held-out pass@k, its schedule, and the rule that a log-spaced schedule fits the run."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from harness.config.base import _Section


class EvalSection(_Section):
    every: int = Field(10, ge=0, description="eval every N steps (0 = only at start and end)")
    spacing: Literal["every", "log"] = Field(
        "every",
        description="every: an eval every `every` steps; log: `points` evals after step 0, evenly spaced in "
        "log compute (docs/fit.md), the last at train.steps (`every` is then not read)",
    )
    points: int | None = Field(None, description="with spacing log: evals after step 0, 4 to train.steps")
    num_prompts: int = Field(64, ge=1, description="held-out prompts per eval (drawn once by eval.seed)")
    n_samples: int = Field(8, ge=1, description="samples per prompt for pass@k")
    ks: list[int] = Field(default_factory=lambda: [1, 8], description="the k of every pass@k logged (eval/pass_at_{k})")
    temperature: float = Field(1.0, gt=0, description="sampling temperature of the held-out eval")
    seed: int = Field(
        0,
        description="seed of the held-out prompt set: the same prompts for every run seed and "
        "every cell, so runs are compared (and paired across seeds) on one set",
    )

    @model_validator(mode="after")
    def _ks_fit(self) -> EvalSection:
        bad = [k for k in self.ks if k < 1 or k > self.n_samples]
        if bad:
            raise ValueError(f"eval.ks {bad} must lie in [1, eval.n_samples={self.n_samples}]")
        if self.spacing == "log" and (self.points is None or self.points < 4):
            raise ValueError(
                f"eval.points={self.points} with eval.spacing=log: allowed 4 to train.steps (a fit of "
                "R(C) needs at least 4 evals after the first)"
            )
        if self.spacing == "every" and self.points is not None:
            raise ValueError(f"eval.points={self.points} is read only with eval.spacing=log; set both, or neither")
        return self

    def log_steps(self, steps: int) -> list[int]:
        """The steps whose record carries an eval under spacing log: `points` of them, the last `steps` (the
        final record), as even as integers allow in log(step) (compute grows about linearly with steps)."""
        n = self.points or 0
        out: list[int] = []
        for i in range(n):
            target = round(steps ** (i / (n - 1)))
            out.append(max(target, out[-1] + 1 if out else 1))
        for i in range(n - 1, -1, -1):  # from the top: leave room for the ones above
            out[i] = min(out[i], steps - (n - 1 - i))
        return out


def check_eval(run: Any) -> None:
    """eval.spacing=log: its points fit in train.steps, and the trainer's step count is known up front."""
    ev = run.eval
    if ev.spacing != "log":
        return
    if run.trainer == "dpo":
        raise ValueError(
            "eval.spacing=log: the DPO trainer's step count is known only once its pairs are built; "
            "allowed: eval.spacing=every"
        )
    if ev.points > run.train.steps:
        raise ValueError(
            f"eval.points={ev.points} with eval.spacing=log: allowed 4 to train.steps={run.train.steps} "
            "(one eval per step at most)"
        )
