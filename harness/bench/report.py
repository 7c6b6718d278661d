"""The benchmark's output: a markdown table of the cases, the ratios ours/TRL, and the JSON file."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

from harness.atomic import atomic_write_text

# (header, row key, format) of the case table; seconds are means per step over steps >= 1.
COLUMNS = (
    ("trainer", "trainer", "{}"),
    ("model", "model", "{}"),
    ("backend", "backend", "{}"),
    ("NxGxT", "workload", "{}"),
    ("steps", "steps", "{}"),
    ("setup_s", "setup_s", "{:.1f}"),
    ("step0_s", "step0_s", "{:.2f}"),
    ("rollout_s", "rollout_s", "{:.2f}"),
    ("score_s", "score_s", "{:.2f}"),
    ("update_s", "update_s", "{:.2f}"),
    ("log_s", "log_s", "{:.3f}"),
    ("ckpt_s", "ckpt_s", "{:.2f}"),
    ("step_s", "step_s", "{:.2f}"),
    ("tok/step", "tokens_per_step", "{:.0f}"),
    ("rollout_tok/s", "rollout_tok_s", "{:.0f}"),
    ("train_tok/s", "train_tok_s", "{:.0f}"),
    ("tok/s", "tok_s", "{:.0f}"),
)
RATIO_COLUMNS = (
    ("model", "model", "{}"),
    ("ours backend", "backend", "{}"),
    ("s/step ours/TRL", "step_s_ratio", "{:.2f}"),
    ("rollout_s ours/TRL", "rollout_s_ratio", "{:.2f}"),
    ("update_s ours/TRL", "update_s_ratio", "{:.2f}"),
    ("tok/s ours/TRL", "tok_s_ratio", "{:.2f}"),
)


def _cell(row: dict, key: str, fmt: str) -> str:
    value = row.get(key)
    if value is None:
        return "-"
    return fmt.format(value)


def markdown(rows: list[dict], columns=COLUMNS) -> str:
    head = "| " + " | ".join(h for h, _, _ in columns) + " |"
    rule = "|" + "|".join("---" for _ in columns) + "|"
    body = ["| " + " | ".join(_cell(r, k, f) for _, k, f in columns) + " |" for r in rows]
    return "\n".join([head, rule, *body])


def ratios(rows: list[dict]) -> list[dict]:
    """One row per (model, our backend, repeat) that has a TRL row of the same model and repeat: ours / TRL,
    each repeat against its own TRL run."""
    trl = {(r["model"], r.get("repeat", 0)): r for r in rows if r["trainer"] == "trl" and r.get("step_s")}
    out = []
    for r in rows:
        ref = trl.get((r["model"], r.get("repeat", 0)))
        if r["trainer"] != "ours" or ref is None or not r.get("step_s"):
            continue
        item = {"model": r["model"], "backend": r["backend"], "repeat": r.get("repeat", 0)}
        for key in ("step_s", "rollout_s", "update_s", "tok_s"):
            item[f"{key}_ratio"] = r[key] / ref[key] if r.get(key) is not None and ref.get(key) else None
        out.append(item)
    return out


def spread(values: list[float]) -> str:
    """median [min, max] of repeated figures (one value: itself)."""
    v = sorted(x for x in values if x is not None)
    if not v:
        return "-"
    med = statistics.median(v)
    return f"{med:.2f}" if len(v) == 1 else f"{med:.2f} [{v[0]:.2f}, {v[-1]:.2f}]"


def repeated(rows: list[dict]) -> list[dict]:
    """Over the repeats of each case (trainer, model, backend): step, rollout, score and update seconds as
    median [min, max]; for ours, s/step ours/TRL paired by repeat (each repeat's ours over the same repeat's TRL)."""
    cases: dict[tuple, list[dict]] = {}
    for r in rows:
        if r.get("step_s"):
            cases.setdefault((r["trainer"], r["model"], r["backend"]), []).append(r)
    paired = ratios(rows)  # each repeat's ours over the same repeat's TRL
    out = []
    for (trainer, model, backend), rs in cases.items():
        item = {"trainer": trainer, "model": model, "backend": backend, "repeats": len(rs)}
        for key in ("step_s", "rollout_s", "score_s", "update_s"):
            item[key] = spread([r.get(key) for r in rs])
        mine = [p["step_s_ratio"] for p in paired if (p["model"], p["backend"]) == (model, backend)]
        item["ratio"] = spread(mine) if trainer == "ours" and mine else "-"
        out.append(item)
    return out


REPEAT_COLUMNS = (
    ("trainer", "trainer", "{}"),
    ("model", "model", "{}"),
    ("backend", "backend", "{}"),
    ("repeats", "repeats", "{}"),
    ("step_s", "step_s", "{}"),
    ("rollout_s", "rollout_s", "{}"),
    ("score_s", "score_s", "{}"),
    ("update_s", "update_s", "{}"),
    ("s/step ours/TRL (paired by repeat)", "ratio", "{}"),
)


def render(rows: list[dict], meta: dict) -> str:
    """The whole stdout report (markdown)."""
    parts = [
        f"## harness bench ({meta['timestamp']}, {meta.get('machine', '?')}, torch threads {meta['threads']}, "
        f"{meta['cpu_count']} CPUs, load {meta['loadavg_before'][0]:.1f} before, "
        f"OMP wait policy {meta.get('omp_wait_policy', '?')}, {meta.get('busy_processes', 0)} busy-loop processes beside, "
        f"ours: {meta.get('malloc', '?')}, TRL: {'the same allocator' if meta.get('trl_malloc') == 'ours' else 'glibc defaults'})",
        "",
        markdown(rows),
        "",
        "Seconds are means per step over steps >= 1 (step 0 = warm-up, ours includes the initial eval);"
        " step_s excludes the checkpoint (ckpt_s); tok = completion tokens.",
    ]
    failed = [r for r in rows if r.get("error")]
    for r in failed:
        parts.append(f"- FAILED {r['trainer']} {r['model']} {r['backend']}: {r['error']}")
    if meta.get("repeats", 1) > 1:
        parts += [
            "",
            f"Over {meta['repeats']} repeats (cases alternating): median [min, max]"
            + (f"; overrides: {' '.join(meta['overrides'])}" if meta.get("overrides") else ""),
            "",
            markdown(repeated(rows), REPEAT_COLUMNS),
        ]
    rat = ratios([r for r in rows if r.get("repeat", 0) == 0])
    if rat:
        parts += [
            "",
            "Ours / TRL (same model, prompts, G, T, steps, lr, clip, KL; < 1 = ours faster for s, "
            "> 1 = ours faster for tok/s)"
            + ("; the first repeat (all repeats: the table above)" if meta.get("repeats", 1) > 1 else "")
            + ":",
            "",
            markdown(rat, RATIO_COLUMNS),
        ]
    return "\n".join(parts) + "\n"


def write_json(out_dir: str | Path, rows: list[dict], meta: dict) -> Path:
    path = Path(out_dir) / f"{meta['timestamp']}.json"
    atomic_write_text(path, json.dumps({"meta": meta, "rows": rows, "ratios": ratios(rows)}, indent=1))
    return path


def timestamp() -> str:
    return time.strftime("%Y%m%d-%H%M%S")
