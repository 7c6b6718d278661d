"""The metric keys a hypothesis may name: every key the trainers log, as docs/objective.md, "DPO" and "Metrics" list
them (tests/docs/test_docs_contract.py checks that list against the golden runs' records and the code's perf/*
keys). `{k}`, `{difficulty}`, `{name}` in a documented key stand for one path component."""

from __future__ import annotations

import functools
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "objective.md"
KEY = re.compile(r"^[a-z_]+(/[a-z0-9_{}]+)*$")


@functools.cache
def documented() -> list[str]:
    """The backticked keys of docs/objective.md from "## DPO" to "## Public Python API" (DPO's metrics and every
    other)."""
    text = DOC.read_text() if DOC.is_file() else ""
    m = re.search(r"^## DPO$.*?(?=^## Public Python API$)", text, re.S | re.M)
    tokens = set(re.findall(r"`([^`\n]+)`", m.group(0) if m else ""))
    return sorted(t for t in tokens if KEY.match(t) and ("/" in t or t == "entropy"))


@functools.cache
def _patterns() -> list[re.Pattern]:
    return [re.compile("^" + re.sub(r"\\\{[^}]*\\\}", "[^/]+", re.escape(t)) + "$") for t in documented()]


def is_logged(key: str) -> bool:
    """True when `key` is a documented key; True for every key when the doc is absent (nothing to check with)."""
    return not documented() or any(p.match(key) for p in _patterns())


def metric_problem(key: str, at) -> str | None:
    """Why `key` cannot be read where `at` reads it (hypotheses.py), or None."""
    if not is_logged(key):
        return "is no key the trainer logs (docs/objective.md, 'DPO' and 'Metrics')"
    is_eval = key.startswith("eval/")
    if at == "paired_rise" and key != "eval/pass_at_1":
        return "cannot be read at paired_rise; allowed: eval/pass_at_1 (summary.json's paired_rise delta_pass_at_1)"
    if (at == "final" or (isinstance(at, dict) and "eval_step" in at)) and not is_eval:
        return f"is a training metric; at {at!r} reads an eval key (eval/...), or use at: {{steps: [a, b]}}"
    if isinstance(at, dict) and "steps" in at and is_eval:
        return "is an eval key; at {steps: [a, b]} averages a training metric (use final or {eval_step: N})"
    return None
