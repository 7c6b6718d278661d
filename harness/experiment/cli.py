"""Command-line entry points of the experiment layer (wired into harness/cli.py).

    harness grid STUDY [--scale S] --list                  the cells: id + overrides
    harness grid STUDY [--scale S] --write-configs DIR     DIR/<cell>.yaml (resolved configs) + cells.json
    harness tune STUDY_OR_TUNE_YAML [--scale S] [--trials N]   Optuna search (harness/experiment/tune.py)
    harness summarize RESULTS_DIR --csv FILE              one row per cell (harness/experiment/summary.py)
    harness summarize RESULTS_DIR --figures DIR [--notebook analysis/<study>.py]
    harness figures STUDY [--scale S] [--from-mlflow] [--out DIR]   summary.csv + figures/, from the run
                                                          folders or from MLflow alone (harness/experiment/regenerate.py)
    harness fit STUDY [--scale S] [--metric M] [--compute C] [--reference ARM]   the sigmoid of compute per run and
                                                          arm, arms compared on A and B (harness/experiment/fit/)
    harness verdict STUDY [--scale S] [--results DIR] [--json]   each preregistered hypothesis judged from the cells,
                                                          paired by seed, Holm over the family (harness/experiment/verdict/)
    harness verdict STUDY --plan [--pilot DIR]            the seeds a confirmatory run needs, from a pilot's cells
    harness mlflow-sync [RESULTS_DIR ...]                 bring finished studies' MLflow experiments to the
                                                          current layout (harness/experiment/study_runs.py)

STUDY is a name under experiments/ (`demo`) or a path to a study YAML.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness.argtypes import out_dir
from harness.atomic import atomic_write_text
from harness.experiment import cells_index, describe, load_study, study_dir, write_configs
from harness.experiment import reproduce as rp
from harness.experiment.fit.data import COMPUTE_AXES
from harness.experiment.fit.outputs import log_mlflow, write_outputs
from harness.experiment.fit.study_fit import Options, fit_study, format_fits
from harness.experiment.regenerate import regenerate
from harness.experiment.render import log_cell_evals, make_figures
from harness.experiment.study import SCALES, StudyError
from harness.experiment.study_runs import study_dirs, sync
from harness.experiment.summary import summary_table, write_csv
from harness.experiment.tune import run_tune
from harness.experiment.verdict.report import to_json
from harness.experiment.verdict.run import verdict, verdict_plan
from harness.tracking.experiment import mark_all
from harness.tracking.store import client_for

COMMANDS = ("grid", "tune", "summarize", "figures", "fit", "verdict", "mlflow-sync", "reproduce")


def add_commands(sub) -> None:
    p = sub.add_parser("grid", help="expand and validate a study's grid")
    p.add_argument("study", help="study name under experiments/ or a study YAML")
    p.add_argument("--scale", choices=list(SCALES), default=None, help="default: the study's `scale:`")
    p.add_argument("--list", action="store_true", help="print the cells (default action)")
    p.add_argument("--json", action="store_true", help="print the cells as JSON")
    p.add_argument("--write-configs", metavar="DIR", help="write DIR/<cell>.yaml and DIR/cells.json")

    p = sub.add_parser("tune", help="Optuna search over run-config knobs (sqlite storage under results/)")
    p.add_argument("study", help="tune YAML or study YAML with a `tune:` section (name or path)")
    p.add_argument("--scale", choices=list(SCALES), default=None)
    p.add_argument("--trials", type=int, default=None, help="total trials wanted (default: tune.trials)")
    p.add_argument("--jobs", type=int, default=1, help="trials in parallel (each a `harness train` subprocess)")
    p.add_argument("--results", default="results", help="results root (default: results)")

    _add_results_commands(sub)
    _add_fit_command(sub)
    _add_verdict_command(sub)
    _add_reproduce_commands(sub)


def _add_verdict_command(sub) -> None:
    p = sub.add_parser(
        "verdict",
        help="judge a study's preregistered hypotheses from its cells: paired t-test / TOST over seeds, Holm over "
        "the family, CONFIRMED | EQUIVALENT | NOT CONFIRMED | INCONCLUSIVE (verdict.md, verdict.json)",
    )
    p.add_argument("study", help="study name under experiments/ or a study YAML (with `hypotheses:`)")
    p.add_argument("--scale", choices=list(SCALES), default=None, help="default: the study's `scale:`")
    p.add_argument("--results", default="results", help="results root (default: results)")
    p.add_argument("--json", action="store_true", help="print verdict.json instead of the table")
    p.add_argument("--plan", action="store_true", help="the seeds needed for 80%% power, from a pilot's cells")
    p.add_argument("--pilot", default=None, help="with --plan: the pilot's results folder (default: the study's)")


def _add_fit_command(sub) -> None:
    p = sub.add_parser(
        "fit",
        help="fit R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) per run and arm; arms compared on A and B "
        "(fit.csv, fit_compare.csv, fit.png beside summary.csv; docs/fit.md)",
    )
    p.add_argument("study", help="results/<study>/<scale> (holds cells.json), or a study name/YAML")
    p.add_argument("--scale", choices=list(SCALES), default=None, help="with a study name")
    p.add_argument("--metric", default="eval/pass_at_1", help="the eval metric fitted (default eval/pass_at_1)")
    p.add_argument("--compute", choices=list(COMPUTE_AXES), default="generated_tokens", help="the compute axis")
    p.add_argument("--params", type=float, default=None, help="the model's parameters, for --compute flops")
    p.add_argument("--reference", default=None, help="the arm the others are compared with (default: the first)")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap replicates (default 1000)")
    p.add_argument("--level", type=float, default=0.95, help="interval level (default 0.95)")
    p.add_argument(
        "--out", type=out_dir, default=None, help="where the table and figure go (default: the results folder)"
    )
    p.add_argument("--no-mlflow", action="store_true", help="do not log the fits to MLflow")


def _add_results_commands(sub) -> None:
    """summarize and figures: a study's table and figures."""
    p = sub.add_parser("summarize", help="summary table / figures of a study's results folder")
    p.add_argument("study_dir", help="results/<study>/<scale> (holds cells.json), or a study name/YAML")
    p.add_argument("--scale", choices=list(SCALES), default=None, help="with a study name")
    p.add_argument("--csv", help="write the summary table here")
    p.add_argument("--figures", help="write figures into this folder (replaced atomically)")
    p.add_argument("--notebook", help="analysis notebook (jupytext .py) to run instead of the generic figures")
    p.add_argument("--no-mlflow", action="store_true", help="do not log the figures to MLflow")

    p = sub.add_parser("figures", help="a study's summary.csv and figures, from its run folders or from MLflow alone")
    p.add_argument("study", help="study name under experiments/ or a study YAML")
    p.add_argument("--scale", choices=list(SCALES), default=None, help="default: the study's `scale:`")
    p.add_argument(
        "--from-mlflow",
        action="store_true",
        help="read the study's MLflow experiment (MLFLOW_TRACKING_URI, "
        "else sqlite:///results/mlflow.db), not results/<study>/<scale>/runs",
    )
    p.add_argument(
        "--out",
        help="where summary.csv and figures/ go (default: results/<study>/<scale>, with "
        "--from-mlflow results/<study>/<scale>/from_mlflow)",
    )


def _add_reproduce_commands(sub) -> None:
    """reproduce (one cell against its report) and mlflow-sync."""
    p = sub.add_parser(
        "reproduce",
        help="rerun one cell of a study's report and compare every number the report "
        "took from it (harness/experiment/reproduce.py)",
    )
    p.add_argument("study", help="study name (its report's record: analysis/reports/<study>/record.json)")
    p.add_argument("--cell", help="the cell to rerun (e.g. arm=grpo__seed=2)")
    p.add_argument("--scale", choices=["smoke", "cpu", "gpu"], default=None, help="default: the record's")
    p.add_argument(
        "--results",
        default=None,
        help="results root of the rerun (default: results/reproduce; with --write-record: results)",
    )
    p.add_argument("--cores", type=int, default=2, help="snakemake --cores for the rerun (default 2)")
    p.add_argument(
        "--write-record",
        action="store_true",
        help="write the report's record.json from the study's results folder (when the report is made)",
    )
    p.add_argument(
        "--merge",
        action="store_true",
        help="with --write-record: keep the record's cells the results folder lacks (arms added to a report); "
        "a cell in both takes the folder's numbers, and the cells whose numbers changed are listed",
    )

    p = sub.add_parser(
        "mlflow-sync",
        help="one-off: nest finished studies' cells under their study run, attach "
        "their files and results, mark every experiment as model training",
    )
    p.add_argument("study_dirs", nargs="*", help="results/<study>/<scale> folders (default: every one under results/)")


def run(args: argparse.Namespace) -> int:
    try:
        if args.command == "grid":
            return _grid(args)
        if args.command == "tune":
            run_tune(args.study, scale=args.scale, trials=args.trials, jobs=args.jobs, results=args.results)
            return 0
        if args.command == "summarize":
            return _summarize(args)
        if args.command == "figures":
            return _figures(args)
        if args.command == "fit":
            return _fit(args)
        if args.command == "verdict":
            return _verdict(args)
        if args.command == "mlflow-sync":
            return _mlflow_sync(args)
        if args.command == "reproduce":
            return _reproduce(args)
    except StudyError as err:
        if getattr(args, "debug", False):  # harness --debug: the traceback
            raise
        print(f"harness: {err}", file=sys.stderr)
        return 2
    raise ValueError(args.command)


def _grid(args) -> int:
    study = load_study(args.study, args.scale)
    if args.write_configs:
        out = Path(args.write_configs)
        paths = write_configs(study, out)
        atomic_write_text(
            out / "cells.json",
            json.dumps(cells_index(study, "results"), indent=1, default=str) + "\n",
            only_if_changed=True,
        )
        print(f"wrote {len(paths)} configs to {out}/", file=sys.stderr)
    if args.json:
        print(
            json.dumps(
                [{"id": c.id, "overrides": c.overrides, "tags": c.tags} for c in study.cells], indent=1, default=str
            )
        )
    elif args.list or not args.write_configs:
        print(describe(study))
    return 0


def _figures(args) -> int:
    paths = regenerate(args.study, args.scale, from_mlflow=args.from_mlflow, out=args.out)
    print(f"wrote {paths['summary']} and {paths['figures']}/ (inputs: {paths['inputs']})")
    return 0


def _fit_options(args) -> Options:
    """The options, checked before any run folder is read."""
    if not 0 < args.level < 1:
        raise StudyError(f"--level {args.level}: must lie strictly between 0 and 1 (e.g. 0.95)")
    if args.bootstrap < 100:
        raise StudyError(f"--bootstrap {args.bootstrap}: at least 100 replicates")
    if not args.metric.startswith("eval/"):
        raise StudyError(f"--metric {args.metric!r}: an eval metric (eval/..., e.g. eval/pass_at_1)")
    if args.params is not None and args.params <= 0:
        raise StudyError(f"--params {args.params}: the model's parameter count, > 0")
    return Options(args.metric, args.compute, args.params, args.bootstrap, args.level, 0, args.reference)


def _fit(args) -> int:
    opts = _fit_options(args)
    d = Path(args.study)
    if not (d / "cells.json").exists():  # a study name: its default results folder
        d = study_dir(load_study(args.study, args.scale))
        if not (d / "cells.json").exists():
            raise StudyError(f"{d}: no cells.json (the study has not run at this scale)")
    sf = fit_study(d, opts)
    paths = write_outputs(d, sf, opts, args.out)
    print(format_fits(sf))
    print(f"wrote {paths['table']}, {paths['compare']} and {paths['figure']}")
    if not args.no_mlflow:
        try:
            print(f"logged the fits to {log_mlflow(d, sf, opts, paths)} MLflow run(s)")
        except Exception as err:  # noqa: BLE001 -- the tables are written; MLflow being down must not fail the step
            print(f"harness: the fits were not logged to MLflow ({type(err).__name__}: {err})", file=sys.stderr)
    return 0


def _verdict(args) -> int:
    if args.pilot and not args.plan:
        raise StudyError(f"--pilot {args.pilot}: goes with --plan (the pilot's cells size the confirmatory run)")
    if args.plan:
        out = verdict_plan(args.study, args.scale, args.results, args.pilot)
    else:
        out = verdict(args.study, args.scale, args.results)
    print(to_json(out["json"]) if args.json else out["markdown"], end="")
    if not args.plan:
        print(f"wrote {out['folder']}/verdict.md and verdict.json", file=sys.stderr)
    return 0


def _mlflow_sync(args) -> int:
    dirs = args.study_dirs or study_dirs()
    missing = [str(d) for d in dirs if not (Path(d) / "cells.json").is_file()]
    if missing:  # checked before anything is written to MLflow
        raise StudyError(
            f"mlflow-sync: {', '.join(missing)}: no cells.json there (a study's results folder, "
            "results/<study>/<scale>, holds one after its Snakemake run)"
        )
    for d in dirs:
        print(sync(d))
    marked = mark_all(client_for()[0])
    print(f"marked {len(marked)} more experiment(s) as model training: {marked}")
    return 0


def _summarize(args) -> int:
    d = Path(args.study_dir)
    if not (d / "cells.json").exists():  # a study name: its default results folder
        d = study_dir(load_study(args.study_dir, args.scale))
    if not args.csv and not args.figures:
        print(summary_table(d).to_string(index=False))
    if args.csv:
        print(f"wrote {write_csv(d, args.csv)}")
        if not args.no_mlflow:
            print(f"recorded eval.json, groups.jsonl and results of {log_cell_evals(d)} cells in MLflow")
    if args.figures:
        print(f"wrote {make_figures(d, args.figures, args.notebook, log_mlflow=not args.no_mlflow)}")
    return 0


def _reproduce(args) -> int:
    if args.merge and not args.write_record:
        print("harness: reproduce --merge goes with --write-record", file=sys.stderr)
        return 2
    if args.write_record:
        before = rp.load_record(args.study) if args.merge and rp.record_path(args.study).exists() else None
        path = rp.write_record(args.study, args.scale, args.results or "results", merge=args.merge)
        print(f"record -> {path}")
        if before is not None:
            rerun = rp.complete_cells(args.study, args.scale, args.results or "results")
            print(rp.merge_report(before, json.loads(path.read_text()), rerun))
        return 0
    if not args.cell:
        print("harness: reproduce needs --cell CELL (or --write-record)", file=sys.stderr)
        return 2
    try:
        rows, ctx = rp.reproduce(args.study, args.cell, args.scale, args.results or "results/reproduce", args.cores)
    except (FileNotFoundError, ValueError) as err:
        print(f"harness: {err}", file=sys.stderr)
        return 2
    print(
        f"{ctx['study']} ({ctx['scale']}), cell {ctx['cell']}: report at {ctx['report_commit']}, rerun at "
        f"{ctx['rerun_commit']}"
    )
    print(f"  report machine: {ctx['report_machine']}\n  rerun machine:  {ctx['rerun_machine']}")
    print(f"  {rp.describe_case(ctx)}")
    print(rp.format_rows(rows))
    bad = rp.failed(rows)
    print(f"{len(rows) - len(bad)} of {len(rows)} numbers reproduce" + (f"; {len(bad)} do not" if bad else ""))
    return 1 if bad else 0
