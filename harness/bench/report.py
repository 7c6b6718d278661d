"""The benchmark's output: a markdown table of the cases, the ratios ours/TRL, and the JSON file."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

from harness.atomic import atomic_write_text
from harness.bench.protocol import pairing_key

# (header, row key, format) of the case table; seconds are means per step over steps >= 1.
COLUMNS = (
    ("trainer", "trainer", "{}"),
    ("model", "model", "{}"),
    ("backend", "backend", "{}"),
    ("levers", "lever_set", "{}"),
    ("NxGxT", "workload", "{}"),
    ("steps", "steps", "{}"),
    ("warm-up", "warmup_steps", "{}"),
    ("measured", "measured_steps", "{}"),
    ("steady", "steady", "{}"),
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
    ("precision", "precision", "{}"),
    ("rollout precision", "rollout_precision", "{}"),
    ("attention", "attn_implementation", "{}"),
    ("grad ckpt", "gradient_checkpointing", "{}"),
)
RATIO_COLUMNS = (
    ("model", "model", "{}"),
    ("engine", "engine", "{}"),
    ("s/step ours/TRL", "step_s_ratio", "{:.2f}"),
    ("tok/s ours/TRL", "tok_s_ratio", "{:.2f}"),
    ("rollout_s ours/TRL", "rollout_s_ratio", "{:.2f}"),
    ("update_s ours/TRL", "update_s_ratio", "{:.2f}"),
    ("ours s/step", "ours_step_s", "{:.2f}"),
    ("TRL s/step", "trl_step_s", "{:.2f}"),
)
PROFILE_COLUMNS = (
    ("trainer", "trainer", "{}"),
    ("model", "model", "{}"),
    ("backend", "backend", "{}"),
    ("levers", "lever_set", "{}"),
    ("step", "step", "{}"),
    ("aten ops", "cpu_ops", "{}"),
    ("kernels", "kernels", "{}"),
    ("host syncs", "host_syncs", "{}"),
    ("item reads", "item_reads", "{}"),
    ("nonzero", "nonzero", "{}"),
    ("span_s", "span_s", "{:.2f}"),
    ("GPU idle", "gpu_idle_share", "{:.0%}"),
)
# the two tables of the fair protocol (harness/bench/levers.py), and the label of older JSON's rows
TABLE_TITLES = {
    "defaults": "defaults against defaults",
    "levers": "every lever against every lever",
    "as run": "as run (a JSON from before the lever sets)",
}


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
    """One row per case of ours that has a TRL case of the same model, engine, lever set, fixed length and repeat
    (protocol.pairing_key: hf against TRL's hf, vLLM only against TRL's vLLM): ours / TRL, each repeat against its
    own TRL run."""
    trl = {pairing_key(r): r for r in rows if r["trainer"] == "trl" and r.get("step_s")}
    out = []
    for r in rows:
        key = pairing_key(r)
        ref = trl.get(key)
        if r["trainer"] != "ours" or ref is None or not r.get("step_s"):
            continue
        item = {"model": r["model"], "backend": r["backend"], "engine": key[1], "lever_set": key[2]}
        item.update(fixed_length=key[3], repeat=key[4], ours_step_s=r["step_s"], trl_step_s=ref["step_s"])
        for k in ("step_s", "rollout_s", "update_s", "tok_s"):
            item[f"{k}_ratio"] = r[k] / ref[k] if r.get(k) is not None and ref.get(k) else None
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
    """Over the repeats of each case (trainer, model, backend, lever set): step, rollout, score and update seconds
    as median [min, max]; for ours, s/step ours/TRL paired by repeat (each repeat's ours over the same repeat's
    TRL of the same engine and lever set)."""
    cases: dict[tuple, list[dict]] = {}
    for r in rows:
        if r.get("step_s"):
            cases.setdefault((r["trainer"], r["model"], r["backend"], r.get("lever_set", "as run")), []).append(r)
    paired = ratios(rows)
    out = []
    for (trainer, model, backend, lever_set), rs in cases.items():
        item = {"trainer": trainer, "model": model, "backend": backend, "lever_set": lever_set, "repeats": len(rs)}
        for key in ("step_s", "rollout_s", "score_s", "update_s"):
            item[key] = spread([r.get(key) for r in rs])
        mine = [
            p["step_s_ratio"]
            for p in paired
            if (p["model"], p["backend"], p["lever_set"]) == (model, backend, lever_set)
        ]
        item["ratio"] = spread(mine) if trainer == "ours" and mine else "-"
        out.append(item)
    return out


REPEAT_COLUMNS = (
    ("trainer", "trainer", "{}"),
    ("model", "model", "{}"),
    ("backend", "backend", "{}"),
    ("levers", "lever_set", "{}"),
    ("repeats", "repeats", "{}"),
    ("step_s", "step_s", "{}"),
    ("rollout_s", "rollout_s", "{}"),
    ("score_s", "score_s", "{}"),
    ("update_s", "update_s", "{}"),
    ("s/step ours/TRL (paired by repeat)", "ratio", "{}"),
)


def _header(meta: dict) -> str:
    return (
        f"## harness bench ({meta['timestamp']}, {meta.get('machine', '?')}, torch threads {meta['threads']}, "
        f"{meta['cpu_count']} CPUs, load {meta['loadavg_before'][0]:.1f} before, "
        f"OMP wait policy {meta.get('omp_wait_policy', '?')}, {meta.get('busy_processes', 0)} busy-loop processes beside, "
        f"ours: {meta.get('malloc', '?')}, TRL: {'the same allocator' if meta.get('trl_malloc') == 'ours' else 'glibc defaults'})"
    )


def _protocol_line(meta: dict) -> str:
    """How the figures were taken (older JSON: step 0 the warm-up)."""
    if "warmup" not in meta:
        return "Seconds are means per step over steps >= 1 (step 0 = warm-up, ours includes the initial eval);"
    fixed = "; every response exactly T tokens (--fixed-length)" if meta.get("fixed_length") else ""
    return (
        f"Seconds are means per step over the measured steps ({meta['steps']} or more a case) after at least "
        f"{meta['warmup']} untimed warm-up steps, up to {meta['warmup_max']} while a step is over "
        f"{1 + meta['steady_tol']:.2f}x the median of the steps after it (`warm-up`; `steady` False: not steady by "
        f"then); each phase edge waits for the device on both sides{fixed};"
    )


def _ratio_tables(rows: list[dict], meta: dict) -> list[str]:
    """Ours / TRL, one table per lever set (defaults against defaults, every lever against every lever)."""
    rat = ratios([r for r in rows if r.get("repeat", 0) == 0])
    parts = []
    for lever_set in dict.fromkeys(r["lever_set"] for r in rat):
        title = TABLE_TITLES.get(lever_set, lever_set)
        sets = meta.get("lever_sets", {}).get(lever_set)
        parts += [
            "",
            f"Ours / TRL, {title} (same model, prompts, G, T, steps, lr, clip, KL, micro-batch, memory policy, "
            "engine, precision, attention; < 1 = ours faster for s, > 1 = ours faster for tok/s)"
            + (f"; ours {' '.join(sets['ours']) or '(none)'}, TRL {sets['trl'] or '(none)'}" if sets else "")
            + ("; the first repeat (all repeats: the table above)" if meta.get("repeats", 1) > 1 else "")
            + ":",
            "",
            markdown([r for r in rat if r["lever_set"] == lever_set], RATIO_COLUMNS),
        ]
    if meta.get("trl_vllm_refused"):
        parts += ["", f"Ours on vLLM is set against no TRL case: {meta['trl_vllm_refused']}."]
    return parts


def render(rows: list[dict], meta: dict) -> str:
    """The whole stdout report (markdown)."""
    parts = [
        _header(meta),
        "",
        markdown(rows),
        "",
        _protocol_line(meta) + " step_s excludes the checkpoint (ckpt_s); tok = completion tokens.",
    ]
    parts += [f"- FAILED {r['trainer']} {r['model']} {r['backend']}: {r['error']}" for r in rows if r.get("error")]
    parts += [f"- NOT STEADY {r['trainer']} {r['model']} {r['backend']} {r.get('lever_set')}: measured from step "
              f"{r['warmup_steps']}" for r in rows if r.get("steady") is False and not r.get("warmup_only")]  # fmt: skip
    if meta.get("repeats", 1) > 1:
        parts += [
            "",
            f"Over {meta['repeats']} repeats (cases alternating): median [min, max]"
            + (f"; overrides: {' '.join(meta['overrides'])}" if meta.get("overrides") else ""),
            "",
            markdown(repeated(rows), REPEAT_COLUMNS),
        ]
    parts += _ratio_tables(rows, meta)
    profiles = [{**r, **r["profile"]} for r in rows if r.get("profile") and r.get("repeat", 0) == 0]
    if profiles:
        parts += [
            "",
            "One profiled step per case (by default the one after the measured ones; `step` names it; harness/bench/profiling.py):",
            "",
        ]
        parts.append(markdown(profiles, PROFILE_COLUMNS))
        parts += ["", *top_ops_lines(profiles)]
    return "\n".join(parts) + "\n"


def top_ops_lines(profiles: list[dict], n: int = 5) -> list[str]:
    """One line a profiled case: its n operators with the most self time (device ms on a GPU, host ms on a CPU)."""
    out = []
    for p in profiles:
        ops = p.get("top_ops") or []
        unit = 3 if p.get("gpu_idle_share") is not None else 2
        where = "device" if unit == 3 else "host"
        cells = ", ".join(f"{o[0]} {o[unit]:.1f} ms ({o[1]} calls)" for o in ops[:n])
        if cells:
            out.append(f"- {p['trainer']} {p['model']} step {p['step']}, most self {where} time: {cells}")
    return out


def write_json(out_dir: str | Path, rows: list[dict], meta: dict) -> Path:
    path = Path(out_dir) / f"{meta['timestamp']}.json"
    atomic_write_text(path, json.dumps({"meta": meta, "rows": rows, "ratios": ratios(rows)}, indent=1))
    return path


def timestamp(out_dir: str | Path | None = None) -> str:
    """The run's name: the second it started, with -2, -3... where out_dir already holds a report of that second
    (two benches in one second, e.g. the GPU check's blocks on a fast machine, must not overwrite each other)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    if out_dir is None:
        return stamp
    taken, n = stamp, 1
    while (Path(out_dir) / f"{taken}.json").exists():
        n += 1
        taken = f"{stamp}-{n}"
    return taken
