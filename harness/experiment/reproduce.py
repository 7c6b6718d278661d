"""Does a report reproduce? Rerun one cell of a study the way its report did, and compare every
number the report took from that cell.

    harness reproduce STUDY --cell CELL [--scale S] [--results DIR] [--cores N]
    harness reproduce STUDY --write-record [--scale S] [--results DIR]    # when a report is made
    harness reproduce STUDY --write-record --merge ...    # new cells added to a report: the record keeps the rest

A report's record (analysis/reports/<study>/record.json) says what the report stands on and
what it took from each cell:

    {"study": ..., "scale": ..., "commit": ..., "machine": {...} | null, "warm_starts": {...},
     "cell_machines": {CELL: {...} | null}, "preregistration": {...},
     "cells": {CELL: {NAME: number | {"value": v, "ci95": [lo, hi]}}}}

`preregistration` is the verdict's (harness/experiment/verdict/prereg.py): the study file's git blob, the commit
its hypotheses entered at and its time, each cell's start, and whether the hypotheses precede the first start
(`confirmatory`, with the reason).

NAME is one of `cell_numbers`' names: `paired_rise_pass_at_1` (with its bootstrap interval),
`initial_pass_at_1`, `final_pass_at_1`, `final_eval eval/...` and `final_eval delta/...` (with
intervals) from the final eval, `change eval/...` (last eval minus first), and for every logged
metric KEY `mean KEY`, `last_quarter KEY` and `max KEY` over the training steps. A number copied
by hand from a report's text carries `"decimals"`: a rerun matches it when rounded to them.

How numbers are compared depends on the machine (harness/machine.py). On the report's kernel
path (same CPU capability, BLAS, oneDNN, torch) a cell is deterministic: every number must come
back equal (to 1e-9 relative). On another kernel path, trained and sampled numbers move with the
CPU's rounding, amplified by training, as much as with another training seed: the demo's paired
rise was +0.044 on an AVX512 Xeon, +0.053 on an AMD EPYC (AVX2) and +0.027 there under torch's
portable kernels, each with a bootstrap interval of about +-0.013 that covers the prompts drawn,
not the training. So a number is judged by its `predict95`, the 95% prediction interval of one
more seed of its arm (mean +- t * sd * sqrt(1 + 1/n) over the report's seeds), where the report
has 2 or more seeds; else by its `ci95` (flagged: that interval excludes training noise); levels
without either are listed, not judged. Each cell is judged against the machine IT ran on
(`cell_machines`; a record that merged cells of several machines names each); a record made
before cells named theirs falls back on `machine`, and a cell whose machine was never recorded
(null) is treated as another kernel path.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

from harness import machine
from harness.experiment import load_study, study_dir
from harness.experiment.results import load_index, read_jsonl
from harness.experiment.stats import prediction_interval
from harness.experiment.verdict.prereg import preregistration
from harness.train.run.warmstart import warm_start_folder

REPO = Path(__file__).resolve().parents[2]
REPORTS = REPO / "analysis" / "reports"
EQUAL_REL = 1e-9


def record_path(study: str) -> Path:
    return REPORTS / study / "record.json"


# ------------------------------------------------------------------------------ a cell's numbers
def cell_numbers(run_dir: str | os.PathLike) -> dict:
    """Every number a report may take from one cell's run directory."""
    run = Path(run_dir)
    out: dict = {}
    summary = _json(run / "summary.json")
    rise = summary.get("paired_rise") or {}
    if rise.get("delta_pass_at_1") is not None:
        out["paired_rise_pass_at_1"] = {"value": rise["delta_pass_at_1"], "ci95": list(rise.get("ci95") or [])}
    for name, section in (("initial_pass_at_1", "initial_eval"), ("final_pass_at_1", "final_eval")):
        value = (summary.get(section) or {}).get("eval/pass_at_1")
        if value is not None:
            out[name] = value
    final = _json(run / "eval.json")
    for key, value in final.items():
        if key.startswith("eval/") and _is_number(value):
            out[f"final_eval {key}"] = value
    for key, value in final.items():  # --vs-initial: the paired rise of pass@k over the starting policy
        if key.startswith("delta/") and key.count("/") == 1 and _is_number(value):
            out[f"final_eval {key}"] = {"value": value, "ci95": list(final.get(f"{key}/ci95") or [])}
    records = read_jsonl(run / "metrics.jsonl")
    for key in sorted({k for r in records for k in r if k.startswith("eval/")}):  # evals: first -> last
        values = [r[key] for r in records if _is_number(r.get(key)) and math.isfinite(r[key])]
        if len(values) > 1:
            out[f"change {key}"] = values[-1] - values[0]
    train = [r for r in records if "reward/mean" in r or "loss/policy" in r]
    tail = train[-max(1, len(train) // 4) :]
    for key in sorted({k for r in train for k in r if k != "step" and not k.startswith("perf/")}):
        values = [r[key] for r in train if _is_number(r.get(key)) and math.isfinite(r[key])]
        if values:
            out[f"mean {key}"] = sum(values) / len(values)
            out[f"max {key}"] = max(values)
            last = [r[key] for r in tail if _is_number(r.get(key)) and math.isfinite(r[key])]
            if last:
                out[f"last_quarter {key}"] = sum(last) / len(last)
    return out


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def run_machine(run_dir: str | os.PathLike) -> dict | None:
    """The machine of a run's last attempt (run.json), None for a run made before it was recorded."""
    attempts = _json(Path(run_dir) / "run.json").get("attempts") or []
    return attempts[-1].get("machine") if attempts else None


def study_warm_starts(folder: Path, cells: list) -> list[Path]:
    """The warm-start folders a study's cells trained from: the ones its Snakemake rule wrote down
    (<folder>/warmstart/<name>.json names each folder by its absolute path), so the record finds them from any
    working directory; else each cell config's cache folder (relative to where Snakemake ran)."""
    named = [Path(_json(j).get("folder") or "") for j in sorted((folder / "warmstart").glob("*.json"))]
    found = [f for f in named if str(f) not in ("", ".") and f.exists()]
    if found:
        return found
    paths = {warm_start_folder(c.config) for c in cells if c.config.warm_start.enabled}
    return sorted(f for f in paths if f.exists())


def warm_start_fingerprint(folder: str | os.PathLike) -> dict:
    """A warm start's identity: the sha256 of its weights and its own sampled accuracy (warmstart.json)."""
    folder = Path(folder)
    digest = hashlib.sha256()
    for f in sorted(folder.glob("*.safetensors")):
        digest.update(f.read_bytes())
    report = _json(folder / "warmstart.json")
    return {
        "weights_sha256": digest.hexdigest()[:16],
        "accuracy": report.get("accuracy"),
        "kernels": (report.get("key") or {}).get("kernels"),
        "code": (report.get("key") or {}).get("code"),
    }


# ------------------------------------------------------------------------------ comparing
def same_kernel_path(recorded: dict | None, now: dict) -> bool:
    if not recorded:
        return False
    keys = ("arch", "cpu_vendor", "isa", "cpu_capability", "torch", "blas", "onednn", "env", "gpu")
    return all(recorded.get(k) == now.get(k) for k in keys)


def same_number(want: float, have: float, decimals: int | None = None) -> bool:
    """Equal to the recorded decimals, or to EQUAL_REL; NaN equals NaN (a mean over an empty set, e.g.
    the length of correct answers when none is correct, is NaN in the record and in the rerun)."""
    if math.isnan(want) or math.isnan(have):
        return math.isnan(want) and math.isnan(have)
    if decimals is not None:
        return round(have, decimals) == round(want, decimals)
    return math.isclose(want, have, rel_tol=EQUAL_REL, abs_tol=1e-12)


def compare(recorded: dict, got: dict, same_path: bool) -> list[dict]:
    """One row per recorded number: {name, report, rerun, verdict} with verdict in
    equal | DIFFERS (same kernel path), inside | OUTSIDE (an interval, another path), level (not judged),
    MISSING (the rerun lacks it); on another path "(equal)" is added where the rerun still equals the report."""
    rows = []
    for name, want in recorded.items():
        want = want if isinstance(want, dict) else {"value": want}
        value, decimals = want.get("value"), want.get("decimals")
        ci = want.get("predict95") or want.get("ci95")
        basis = "seeds" if want.get("predict95") else "bootstrap"
        have = got.get(name)
        have_value = have.get("value") if isinstance(have, dict) else have
        row = {"name": name, "report": value, "ci95": ci, "rerun": have_value, "basis": basis if ci else None}
        if have_value is None:
            row["verdict"] = "MISSING"
            rows.append(row)
            continue
        equal = same_number(value, have_value, decimals)
        if same_path:
            row["verdict"] = "equal" if equal else "DIFFERS"
        elif ci and len(ci) == 2:
            row["verdict"] = (
                ("inside" if ci[0] <= have_value <= ci[1] else "OUTSIDE")
                + f" ({basis})"
                + (" (equal)" if equal else "")
            )
        else:
            row["verdict"] = "level" + (" (equal)" if equal else "")
        rows.append(row)
    return rows


def failed(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["verdict"].split()[0] in ("DIFFERS", "OUTSIDE", "MISSING")]


def format_rows(rows: list[dict]) -> str:
    def num(v):
        return "-" if v is None else f"{v:+.4g}" if isinstance(v, float) else str(v)

    lines = [
        f"{'number':48s} {'report':>11s} {'interval':>22s} {'rerun':>11s}  verdict (interval: seeds = "
        "prediction interval over the report's seeds, bootstrap = over prompts only)"
    ]
    for r in rows:
        ci = f"[{num(r['ci95'][0])}, {num(r['ci95'][1])}]" if r["ci95"] else ""
        lines.append(f"{r['name'][:48]:48s} {num(r['report']):>11s} {ci:>22s} {num(r['rerun']):>11s}  {r['verdict']}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------ records
def write_record(
    study: str,
    scale: str | None,
    results: str | os.PathLike = "results",
    out: Path | None = None,
    merge: bool = False,
) -> Path:
    """record.json of a study's results folder: the commit, machine and warm starts of its cells and
    every number of every complete cell (the report is written from the same folder). With `merge`, the
    existing record's cells that the folder lacks are kept (a report that adds arms to an older run);
    a cell in both takes the folder's numbers (`merge_records`)."""
    st = load_study(study, scale)
    folder = study_dir(st, results)
    _, cells = load_index(folder)
    machines, commits, cells_out, warm, per_cell = [], set(), {}, {}, {}
    for cell in cells:
        run = Path(cell["run_dir"])
        if not (run / "summary.json").exists():
            continue
        cells_out[cell["id"]] = cell_numbers(run)
        per_cell[cell["id"]] = run_machine(run)
        attempts = _json(run / "run.json").get("attempts") or []
        for a in attempts:
            commits.add(a.get("commit"))
            if a.get("machine") and a["machine"] not in machines:
                machines.append(a["machine"])
    for f in study_warm_starts(folder, st.cells):
        warm[f.name] = warm_start_fingerprint(f)
    out = out or record_path(st.name)
    old = json.loads(out.read_text()) if merge and out.exists() else {}
    if old:
        per_cell = {**kept_cell_machines(old, set(old.get("cells", {})) - set(cells_out)), **per_cell}
        cells_out, machines, commits, warm = merge_records(old, cells_out, machines, commits, warm)
    add_prediction_intervals(cells_out, {c["id"]: c.get("variant", "") for c in cells})
    record = {
        "study": st.name,
        "scale": st.scale,
        "commit": sorted(c for c in commits if c) or None,
        # the one machine of every cell; null where they differ or one was never recorded (`cell_machines` then
        # names each cell's: a rerun is judged against its own cell's machine)
        "machine": machines[0] if len(machines) == 1 and None not in per_cell.values() else None,
        "machines": machines,
        "cell_machines": per_cell,
        "packages": machine.package_versions(),
        "warm_starts": warm,
        # what the study declared when: its file's blob, the commit its hypotheses entered at, each cell's start
        "preregistration": preregistration(st.path, cells) if st.path else None,
        "cells": cells_out,
    }
    if old.get("note"):  # what the kept cells stand on (a transcribed record's decimals, say)
        record["note"] = f"cells kept from the earlier record: {old['note']}"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1, sort_keys=False) + "\n")
    return out


def kept_cell_machines(old: dict, kept: set) -> dict:
    """The machine of each cell an earlier record keeps in a merge: its own (`cell_machines`) where that record
    names one per cell, else the record-wide one (null for a record made before machines were recorded)."""
    return {cell: record_machine(old, cell) for cell in sorted(kept)}


def record_machine(record: dict, cell: str) -> dict | None:
    """The machine a record's `cell` ran on: its own entry in `cell_machines`, else the record-wide machine (a
    record made before cells named their machine)."""
    per_cell = record.get("cell_machines") or {}
    return per_cell[cell] if cell in per_cell else record.get("machine")


def merge_records(old: dict, cells: dict, machines: list, commits: set, warm: dict) -> tuple:
    """The old record's cells absent from `cells` kept, as recorded (their interval fields dropped: the
    prediction intervals are recomputed over the merged arms); the commits, machines and warm starts of both.
    -> (cells, machines, commits, warm)."""
    kept = {
        cell: {name: _without_intervals(entry) for name, entry in numbers.items()}
        for cell, numbers in old.get("cells", {}).items()
        if cell not in cells
    }
    old_machines = old.get("machines") or ([old["machine"]] if old.get("machine") else [])
    machines = machines + [m for m in old_machines if m not in machines]
    commits = set(commits) | set(old.get("commit") or [])
    return {**kept, **cells}, machines, commits, {**(old.get("warm_starts") or {}), **warm}  # null: transcribed


def merge_report(before: dict, after: dict, rerun: set) -> str:
    """What a merged record changed: cells added, kept as recorded, and re-recorded (the cells of `rerun`, the
    results folder's, that the old record held: equal to the old numbers, or how many of them differ; a rerun on
    the report's kernel path must give every number back)."""
    old, new = before.get("cells", {}), after.get("cells", {})
    lines = [
        f"added: {', '.join(c for c in new if c not in old) or 'none'}",
        f"kept as recorded: {', '.join(c for c in old if c not in rerun) or 'none'}",
    ]
    for cell in (c for c in new if c in old and c in rerun):
        rows = compare(old[cell], {k: _value(v) for k, v in new[cell].items()}, same_path=True)
        bad = [r["name"] for r in failed(rows)]
        lines.append(
            f"re-recorded {cell}: "
            + (f"{len(rows)} numbers equal" if not bad else f"{len(bad)} of {len(rows)} differ ({', '.join(bad[:5])})")
        )
    return "\n".join(lines)


def complete_cells(study: str, scale: str | None, results: str | os.PathLike = "results") -> set:
    """The ids of the cells of a study's results folder that finished (summary.json written)."""
    _, cells = load_index(study_dir(load_study(study, scale), results))
    return {c["id"] for c in cells if (Path(c["run_dir"]) / "summary.json").exists()}


def _without_intervals(entry):
    """A recorded number without its `predict95` (a bootstrap `ci95` and hand-copied `decimals` stay)."""
    if not isinstance(entry, dict):
        return entry
    rest = {k: v for k, v in entry.items() if k != "predict95"}
    return rest["value"] if set(rest) == {"value"} else rest


def add_prediction_intervals(cells: dict, variant_of: dict) -> None:
    """Give every number of a cell whose arm (variant) has 2+ seeds recorded `predict95`: the 95%
    prediction interval of one more seed (harness/experiment/stats.py)."""
    arms: dict = {}
    for cell in cells:
        arms.setdefault(variant_of.get(cell, cell), []).append(cell)
    for members in arms.values():
        for name in {n for c in members for n in cells[c]}:
            values = [_value(cells[c].get(name)) for c in members]
            values = [v for v in values if v is not None and math.isfinite(v)]
            interval = prediction_interval(values) if len(values) == len(members) else None
            if interval is None:
                continue
            for c in members:
                entry = cells[c][name]
                cells[c][name] = {
                    **(entry if isinstance(entry, dict) else {"value": entry}),
                    "predict95": [interval[0], interval[1]],
                }


def _value(entry):
    return entry.get("value") if isinstance(entry, dict) else entry


def load_record(study: str) -> dict:
    path = record_path(study)
    if not path.exists():
        raise FileNotFoundError(
            f"{path}: no record for study {study!r} (reports with one: "
            f"{', '.join(sorted(p.parent.name for p in REPORTS.glob('*/record.json')))})"
        )
    return json.loads(path.read_text())


# ------------------------------------------------------------------------------ rerunning a cell
def rerun_cell(study: str, scale: str, cell: str, results: str, cores: int) -> Path:
    """Train and evaluate one cell through the study's own Snakefile (the report's command, one target)."""
    st = load_study(study, scale)
    if cell not in {c.id for c in st.cells}:
        raise ValueError(
            f"--cell {cell!r} is not a cell of {study} ({scale}); cells: {', '.join(c.id for c in st.cells)}"
        )
    run_dir = study_dir(st, results) / "runs" / cell
    target = run_dir / "eval.json"
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(REPO / "Snakefile"),
        "--cores",
        str(cores),
        "--nolock",
        "--config",
        f"study={study}",
        f"scale={scale}",
        f"results={results}",
        "--",
        str(target),
    ]
    print("[reproduce] " + " ".join(cmd), flush=True)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    subprocess.run(cmd, check=True, cwd=REPO, env=env)
    return run_dir


def reproduce(
    study: str, cell: str, scale: str | None = None, results: str = "results/reproduce", cores: int = 2
) -> tuple[list[dict], dict]:
    """Rerun `cell` and compare it with the report's record -> (rows, context)."""
    record = load_record(study)
    scale = scale or record["scale"]
    if cell not in record["cells"]:
        raise ValueError(f"the {study} report records no cell {cell!r}; recorded: {', '.join(record['cells'])}")
    run_dir = rerun_cell(study, scale, cell, results, cores)
    now = run_machine(run_dir) or machine.describe()
    then = record_machine(record, cell)
    same = same_kernel_path(then, now)
    rows = compare(record["cells"][cell], cell_numbers(run_dir), same)
    context = {
        "study": study,
        "scale": scale,
        "cell": cell,
        "run_dir": str(run_dir),
        "report_commit": record.get("commit"),
        "rerun_commit": machine.git_commit(),
        "report_machine": machine.one_line(then) if then else "not recorded",
        "rerun_machine": machine.one_line(now),
        "same_kernel_path": same,
    }
    (Path(run_dir) / "reproduce.json").write_text(json.dumps({**context, "rows": rows}, indent=1) + "\n")
    return rows, context


def describe_case(context: dict) -> str:
    if context["same_kernel_path"]:
        return f"same kernel path as the report: every number must come back equal (relative {EQUAL_REL:g})"
    return (
        "another kernel path than the report's (or the report's was not recorded): numbers with an "
        "interval must come back inside it; levels move with the CPU's rounding and are listed, not judged"
    )
