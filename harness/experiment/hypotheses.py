"""A study's preregistered hypotheses: the `hypotheses:` list and `correction:` of the study file
(docs/studies.md "Hypotheses and the verdict").

    Hypothesis       one claim: name, metric, at, contrast, direction, sesoi, alpha, value (pydantic, strict)
    parse_contrast   "armA - armB" -> ("armA", "armB"); "armA" -> ("armA", None)
    arm_names        the names a contrast may use for an arm: each variant (`arm=grpo`), and its bare value
                     (`grpo`) where the variant has one axis
    check_hypotheses what needs the expanded study: the arms exist, the metric is a logged key read where `at`
                     reads it, the eval step is one of the scale's, the step window lies in [0, train.steps)

`at` is one of `final` (the cell's final eval: eval.json, else summary.json's final_eval), `paired_rise`
(summary.json's paired_rise delta_pass_at_1), `{eval_step: N}` (the in-loop eval of step N in metrics.jsonl)
or `{steps: [a, b]}` (the mean of the per-step metric over training steps a..b inclusive).
"""

from __future__ import annotations

import difflib
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StrictFloat, StrictInt

from harness.experiment.metric_keys import documented, is_logged, metric_problem
from harness.experiment.study import SAFE_NAME, StudyError
from harness.train.eval.evaluate import is_eval_step

AT_WORDS = ("final", "paired_rise")
SEPARATOR = " - "


def _at(value: Any) -> Any:
    """`final` | `paired_rise` | {eval_step: N >= 0} | {steps: [a, b]} with 0 <= a <= b."""
    allowed = "final | paired_rise | {eval_step: N} | {steps: [a, b]}"
    if isinstance(value, str) and value in AT_WORDS:
        return value
    if isinstance(value, dict) and list(value) == ["eval_step"]:
        n = value["eval_step"]
        if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
            return {"eval_step": n}
        raise ValueError(f"eval_step must be an integer step >= 0 (got {n!r})")
    if isinstance(value, dict) and list(value) == ["steps"]:
        w = value["steps"]
        ints = isinstance(w, list) and all(isinstance(s, int) and not isinstance(s, bool) for s in w)
        if ints and len(w) == 2 and 0 <= w[0] <= w[1]:
            return {"steps": list(w)}
        raise ValueError(f"steps must be [a, b], integers with 0 <= a <= b (got {w!r})")
    raise ValueError(f"allowed: {allowed}")


def _contrast(value: Any) -> Any:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("allowed: 'armA - armB' (paired by seed) or 'armA' (compared with `value`)")
    parts = value.split(SEPARATOR)
    if len(parts) > 2 or any(not p.strip() for p in parts):
        raise ValueError("allowed: 'armA - armB' (two arms, ' - ' between them) or 'armA'")
    if len(parts) == 2 and parts[0].strip() == parts[1].strip():
        raise ValueError("an arm minus itself is 0 on every seed; allowed: two different arms, or one arm alone")
    return value


def _safe(name: str) -> str:
    if not SAFE_NAME.match(name):
        raise ValueError("may only use letters, digits and . _ + -")
    return name


class Hypothesis(BaseModel):
    """One preregistered claim about a study's cells (docs/studies.md "Hypotheses and the verdict")."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    name: Annotated[str, AfterValidator(_safe)]
    metric: str  # a logged key (docs/objective.md, "DPO" and "Metrics"): eval/... for final, eval_step, paired_rise
    at: Annotated[Any, BeforeValidator(_at)]
    contrast: Annotated[str, AfterValidator(_contrast)]
    direction: Literal["greater", "less", "two-sided", "equivalent"]
    sesoi: Annotated[StrictInt | StrictFloat, Field(gt=0)]  # smallest effect of interest, the metric's units
    alpha: Annotated[StrictInt | StrictFloat, Field(gt=0, lt=0.5)] = 0.05
    value: StrictInt | StrictFloat = 0  # the reference the contrast is compared with


def _check_names(hypotheses: list) -> None:
    seen: list[str] = []
    for i, h in enumerate(hypotheses):
        if h.name in seen:
            raise StudyError(f"hypotheses[{i}].name: {h.name!r} is used twice; each hypothesis needs its own name")
        seen.append(h.name)


def parse_contrast(contrast: str) -> tuple[str, str | None]:
    parts = [p.strip() for p in contrast.split(SEPARATOR)]
    return parts[0], (parts[1] if len(parts) == 2 else None)


def arm_names(variants: list[str]) -> dict[str, str]:
    """name -> variant: every variant under its own name; a one-axis variant (`arm=grpo`) also by its value."""
    out = {v: v for v in variants}
    bare: dict[str, list[str]] = {}
    for v in variants:
        parts = v.split("__")
        if len(parts) == 1 and "=" in v:
            bare.setdefault(v.split("=", 1)[1], []).append(v)
    out.update({name: vs[0] for name, vs in bare.items() if len(vs) == 1 and name not in out})
    return out


def _check_arms(i: int, h: Hypothesis, names: dict[str, str]) -> None:
    for arm in parse_contrast(h.contrast):
        if arm is not None and arm not in names:
            near = difflib.get_close_matches(arm, list(names), n=1)
            raise StudyError(
                f"hypotheses[{i}].contrast: arm {arm!r} is not an arm of the study"
                f"{f' (did you mean {near[0]!r}?)' if near else ''}; arms: {sorted(names)}"
            )


def _check_metric(i: int, h: Hypothesis) -> None:
    problem = metric_problem(h.metric, h.at)
    if problem:
        near = difflib.get_close_matches(h.metric, documented(), n=3) if not is_logged(h.metric) else []
        raise StudyError(f"hypotheses[{i}].metric: {h.metric!r} {problem}" + (f" (close: {near})" if near else ""))


def eval_steps(config) -> list[int]:
    """The steps whose metrics record carries an eval (the final record's step is train.steps)."""
    steps = config.train.steps
    return [s for s in range(steps + 1) if is_eval_step(config, s, s == steps)]


def _check_steps(i: int, h: Hypothesis, cells: list) -> None:
    configs = [c.config for c in cells if c.config is not None]
    if not configs:
        return
    if isinstance(h.at, dict) and "eval_step" in h.at:
        allowed = sorted(set.intersection(*(set(eval_steps(c)) for c in configs)))
        if h.at["eval_step"] not in allowed:
            shown = allowed if len(allowed) <= 12 else [*allowed[:6], "...", *allowed[-3:]]
            raise StudyError(
                f"hypotheses[{i}].at.eval_step: {h.at['eval_step']} is no eval step of this scale; allowed: {shown}"
            )
    if isinstance(h.at, dict) and "steps" in h.at:
        last = min(c.train.steps for c in configs)
        a, b = h.at["steps"]
        if b >= last:
            raise StudyError(
                f"hypotheses[{i}].at.steps: [{a}, {b}] reaches past the training steps; allowed: a window in "
                f"[0, {last - 1}] (train.steps={last})"
            )


def check_hypotheses(study) -> None:
    """Each hypothesis against the expanded study (its arms, its cells' configs); StudyError naming the file and
    the key."""
    try:
        _check_all(study)
    except StudyError as err:
        raise StudyError(f"{study.path or 'study'}: {err}") from None


def _check_all(study) -> None:
    _check_names(study.hypotheses)
    names = arm_names(sorted({c.tags["variant"] for c in study.cells}))
    for i, h in enumerate(study.hypotheses):
        _check_arms(i, h, names)
        _check_metric(i, h)
        arms = {names[a] for a in parse_contrast(h.contrast) if a is not None}
        _check_steps(i, h, [c for c in study.cells if c.tags["variant"] in arms])


__all__ = ["Hypothesis", "arm_names", "check_hypotheses", "eval_steps", "parse_contrast"]
