"""`harness` command line.

    harness train CONFIG [dotted.key=value ...] --out DIR   train (or resume) one run
        [--nproc P] [--nnodes N --node-rank R --rdzv-endpoint HOST:PORT]   on P processes (a node's), N nodes
    harness config CONFIG [dotted.key=value ...] [--explain]  print the resolved, validated config (--explain:
                                                         every knob with its doc and the mode that reads it)
    harness warmstart CONFIG [dotted.key=value ...]         build (or find) the cached SFT warm start
    harness eval RUN_DIR [--n-samples N] [--vs-initial]      pass@k of a finished run -> RUN_DIR/eval.json
    harness compare RUN_A RUN_B [--step N] [--ks 1,8] [--json]   B vs A prompt by prompt on their saved evals
    harness score CONFIG COMPLETIONS.jsonl [dotted.key=value ...]   a dataset task's rewards on given completions
    harness sample-data [--out DIR]                        write the sample GSM8K-format dataset (results/data)
    harness grid STUDY [--scale S] --list | --write-configs DIR   expand a study's grid (harness/experiment/)
    harness probe STUDY [--scale S] [--regime]             the study's mechanism probe (harness/probes/)
    harness tune STUDY_OR_TUNE_YAML [--scale S] [--trials N]   Optuna search
    harness summarize RESULTS_DIR --csv FILE | --figures DIR   summary table / figures of a study
    harness figures STUDY [--scale S] [--from-mlflow] [--out DIR]   summary.csv + figures, from run folders or MLflow
    harness fit STUDY [--scale S] [--metric M] [--compute C]   R(C) per run and arm, arms compared on A and B (docs/fit.md)
    harness verdict STUDY [--scale S] [--plan [--pilot DIR]]   each preregistered hypothesis judged (docs/studies.md)
    harness mlflow-sync [RESULTS_DIR ...]                  finished studies' MLflow runs into the study layout
    harness train-rm --pairs FILE | --run RUN_DIR --out DIR [--base B] [--steps N] ...
                                                         a Bradley–Terry reward model (docs/reward_models.md)
    harness bench [--models M,..] [--backends hf,vllm] [--steps S] [--lever-sets L] [--trl|--no-trl] ...
                                                         GRPO step-time breakdown, ours vs TRL (harness/bench/)

Bad input (a config, override, study or path) is reported as one message on stderr, naming the
file and key, with exit status 2, before any model loads; `--debug` (before or after the
subcommand) raises it with its traceback instead. A fault a run stops on (disk full during a
checkpoint, NaN with train.nan_policy=stop, no readable checkpoint) is one message too, exit
status 1; SIGTERM / SIGINT stop `train` at the end of a step, checkpointed, exit 143 / 130
(docs/faults.md). So is code of the user's that exits inside a command (a plugin or reward function
calling sys.exit: UserCodeExit, exit status 1; never 0), and a rank's failure under `train --nproc N`
(the launcher prints the rank's one line: harness/train/run/launch.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
import warnings
from pathlib import Path

from harness import parallel
from harness.argtypes import int_list, out_dir, positive_int
from harness.atomic import atomic_write_text
from harness.bench import cli as bench_cli
from harness.config import ConfigError, ConfigWarning, dump_config, explain_config, load_config
from harness.experiment import cli as study_cli
from harness.experiment.study import StudyError
from harness.faults import RunFault, StoppedBySignal, user_exit
from harness.probes import cli as probe_cli
from harness.rm import cli as rm_cli
from harness.tasks import task_from_config
from harness.tasks.dataset.score_file import ScoreFileError, score_file
from harness.tasks.sample_data import ROWS, write_samples
from harness.train import train
from harness.train.eval.compare import compare_runs, format_comparison
from harness.train.run.final_eval import eval_run
from harness.train.run.launch import launch, report_rank
from harness.train.run.nodes import per_node, resolve_nodes
from harness.train.run.warmstart import ensure_warm_start


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    """Config warnings (e.g. an ignored knob) as one line; others as Python prints them."""
    if issubclass(category, ConfigWarning):
        return f"harness: warning: {message}\n"
    return _FORMAT_WARNING(message, category, filename, lineno, line)


_FORMAT_WARNING = warnings.formatwarning


def _add_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="run config YAML (e.g. experiments/runs/smoke.yaml)")
    p.add_argument("overrides", nargs="*", help="dotted overrides, e.g. objective.preset=dapo train.steps=10")


def _add_node_args(p: argparse.ArgumentParser) -> None:
    """`train`'s multi-node options: torchrun's rendezvous (harness/train/run/nodes.py; under srun: SLURM's)."""
    p.add_argument("--nnodes", type=int, default=None, help="nodes of the run, one launcher each (default 1)")
    p.add_argument(
        "--node-rank", type=int, default=None, help="this node's place, 0 .. nnodes-1 (default: SLURM_NODEID)"
    )
    p.add_argument(
        "--rdzv-endpoint",
        default=None,
        help="HOST:PORT where the node launchers meet: node 0's address (default under SLURM: the first host)",
    )
    p.add_argument("--rdzv-id", default=None, help="the rendezvous id (default: SLURM_JOB_ID, else 'harness')")
    p.add_argument(
        "--rdzv-backend",
        default="static",
        help="torchrun's rendezvous: static (node R holds ranks R*P..R*P+P-1; the default) or c10d",
    )


def _add_config_commands(sub) -> None:
    """The commands that take a run config: train, config, warmstart."""
    p_train = sub.add_parser("train", help="train or resume one run")
    _add_config_args(p_train)
    p_train.add_argument("--out", required=True, type=out_dir, help="run directory (rerun the same command to resume)")
    p_train.add_argument(
        "--nproc",
        type=positive_int,
        default=None,
        help="processes of the run (train.nproc): launches torchrun --standalone --nproc_per_node N; with "
        "--nnodes N: processes per node, the run has N * P (docs/scale.md)",
    )
    _add_node_args(p_train)

    p_cfg = sub.add_parser("config", help="print the resolved config")
    _add_config_args(p_cfg)
    p_cfg.add_argument(
        "--explain",
        action="store_true",
        help="print every knob with its doc and the mode that reads it, instead of the YAML",
    )

    p_ws = sub.add_parser("warmstart", help="build or locate the cached SFT warm start")
    _add_config_args(p_ws)
    p_ws.add_argument("--out", help="also write a JSON {folder, accuracy, ...} here (atomically)")


def _add_run_dir_commands(sub) -> None:
    """The commands that read finished run directories: eval, compare."""
    p_eval = sub.add_parser("eval", help="pass@k of a finished run's final checkpoint -> RUN_DIR/eval.json")
    p_eval.add_argument("run_dir")
    p_eval.add_argument(
        "--n-samples",
        type=positive_int,
        default=None,
        help="samples per prompt, >= 1 (default: the run's eval.n_samples)",
    )
    p_eval.add_argument(
        "--num-prompts", type=positive_int, default=None, help=">= 1 (default: the run's eval.num_prompts)"
    )
    p_eval.add_argument(
        "--vs-initial",
        action="store_true",
        help="also eval the starting policy on the same prompts "
        "and seed: paired rise of pass@k with a bootstrap 95%% interval over prompts",
    )

    p_cmp = sub.add_parser("compare", help="run B vs run A prompt by prompt on the evals both saved (paired bootstrap)")
    p_cmp.add_argument("run_a", help="run directory A (the reference)")
    p_cmp.add_argument("run_b", help="run directory B")
    p_cmp.add_argument(
        "--step", type=int, default=None, help="eval step to compare (default: the last step both saved)"
    )
    p_cmp.add_argument(
        "--ks",
        type=int_list,
        default=None,
        help="comma-separated k of pass@k, each <= eval.n_samples (default: the runs' eval.ks)",
    )
    p_cmp.add_argument("--json", action="store_true", help="print the comparison as JSON")


def _add_data_commands(sub) -> None:
    """The commands on a dataset task's data: score, sample-data."""
    p_score = sub.add_parser(
        "score",
        help="score given completions with a dataset task's verifiers and reward "
        "functions: one JSON line each on stdout, a summary on stderr",
    )
    p_score.add_argument("config", help="run config YAML with task.name=dataset")
    p_score.add_argument("completions", help="JSONL: {completion, uid | row (+ file) | answer, truncated?} per line")
    p_score.add_argument("overrides", nargs="*", help="dotted overrides, e.g. task.reward_workers=0")

    p_sample = sub.add_parser(
        "sample-data",
        help="write the sample dataset: GSM8K-format word problems "
        "(gsm8k_sample/, math_sample/ with \\boxed{} answers), train.jsonl and test.jsonl each",
    )
    p_sample.add_argument(
        "--out", default="results/data", type=out_dir, help="folder to write into (default: results/data)"
    )
    p_sample.add_argument("--rows", type=positive_int, default=None, help="problems in all (default 4000)")
    p_sample.add_argument("--seed", type=int, default=0, help="generator seed (default 0: the shipped sample)")


def build_parser() -> argparse.ArgumentParser:
    """`harness` and every subcommand."""
    parser = argparse.ArgumentParser(prog="harness", description="RL post-training research harness")
    parser.add_argument(
        "--debug", action="store_true", help="show the traceback of an input error (exit status 2 otherwise)"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_config_commands(sub)
    _add_run_dir_commands(sub)
    _add_data_commands(sub)
    study_cli.add_commands(
        sub
    )  # grid, tune, summarize, figures, fit, verdict, mlflow-sync, reproduce (experiment/cli.py)
    probe_cli.add_command(sub)
    bench_cli.add_command(sub)
    rm_cli.add_command(sub)
    for p in sub.choices.values():  # `--debug` after the subcommand too (SUPPRESS: it never resets the global one)
        p.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help="show the traceback of an input error"
        )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    fmt = warnings.formatwarning
    warnings.formatwarning = _one_line_warning
    try:
        try:
            return _run(args)
        except SystemExit as err:  # sys.exit in code the harness called (a plugin, a reward function): never 0
            if args.debug:
                raise
            raise user_exit(err, args.command) from None
    except (ConfigError, StudyError) as err:
        if args.debug:
            raise
        return _failed(f"harness: {err}", 2)
    except (RunFault, StoppedBySignal) as err:  # a fault the run stopped on (disk full, NaN, a signal): docs/faults.md
        if args.debug:
            raise
        return _failed(f"harness: {type(err).__name__}: {err}", err.exit_code)
    except BaseException:  # a rank of `--nproc N`: its launcher prints it (or not: a peer's failure caused it)
        if report_rank(None, 1, traceback.format_exc()):
            return 1
        raise
    finally:
        warnings.formatwarning = fmt


def _failed(line: str, code: int) -> int:
    """Print the one line of a failed command (a rank of `--nproc N` hands it to its launcher); -> code."""
    if not report_rank(line, code):
        print(line, file=sys.stderr)
    return code


def _run(args: argparse.Namespace) -> int:
    if args.command in study_cli.COMMANDS:
        return study_cli.run(args)
    if args.command == "probe":
        return probe_cli.run(args)
    if args.command == "bench":
        return bench_cli.run(args)
    if args.command == "train-rm":
        return rm_cli.run(args)
    return COMMANDS[args.command](args)


def _eval(args: argparse.Namespace) -> int:
    print(json.dumps(eval_run(args.run_dir, args.n_samples, args.num_prompts, args.vs_initial), indent=2))
    return 0


def _compare(args: argparse.Namespace) -> int:
    result = compare_runs(args.run_a, args.run_b, args.step, args.ks)
    print(json.dumps(result, indent=2) if args.json else format_comparison(result))
    return 0


def _sample_data(args: argparse.Namespace) -> int:
    for path in write_samples(args.out, args.rows or ROWS, args.seed):
        print(path)
    return 0


def _score(args: argparse.Namespace) -> int:
    cfg = load_config(args.config, args.overrides)
    if cfg.task.name != "dataset":
        raise ConfigError(
            f"harness score scores a dataset task's completions; {args.config} has task.name="
            f"{cfg.task.name!r}, which generates its problems"
        )
    section = cfg.task.model_copy(
        update={"data": cfg.task.data.model_copy(update={"max_train_rows": None, "max_eval_rows": None})}
    )  # every row of the files can be named
    try:
        score_file(task_from_config(section), args.completions)
    except ScoreFileError as err:
        raise ConfigError(str(err)) from None
    return 0


def _config(args: argparse.Namespace) -> int:
    cfg = load_config(args.config, args.overrides)
    print(explain_config(cfg) if args.explain else dump_config(cfg), end="")
    return 0


def _warmstart(args: argparse.Namespace) -> int:
    cfg = load_config(args.config, args.overrides)  # a bad config fails before transformers loads
    folder = ensure_warm_start(cfg)
    if args.out:
        report = json.loads((folder / "warmstart.json").read_text())
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(Path(args.out), json.dumps({"folder": str(folder.resolve()), **report}, indent=2))
    print(folder)
    return 0


def _train(args: argparse.Namespace) -> int:
    overrides = list(args.overrides)
    nodes = None
    if parallel.launched_world() > 1:  # under torchrun: the run has as many processes as it launched
        overrides.append(f"train.nproc={parallel.launched_world()}")
    else:  # a launcher: its node's rendezvous checked before the config (one node: None)
        nodes = resolve_nodes(args.nnodes, args.node_rank, args.rdzv_endpoint, args.rdzv_id, args.rdzv_backend)
        if args.nproc is not None:
            overrides.append(f"train.nproc={args.nproc * (nodes.nnodes if nodes else 1)}")
    cfg = load_config(args.config, overrides)  # a bad config fails before transformers loads
    if parallel.launched_world() == 1 and (cfg.train.nproc > 1 or nodes is not None):
        train_args = [args.config, *overrides, "--out", args.out]
        return launch(per_node(cfg.train.nproc, nodes), train_args, nodes)  # torchrun: one line a failure
    # a ConfigError from here (e.g. a bad dpo.pairs file, or --out holding a run with another config) -> exit 2
    summary = train(cfg, args.out)
    if os.environ.get("RANK", "0") != "0":  # rank 0 reports the run (torchrun's RANK: vLLM may end the group)
        return 0
    fe = summary.get("final_eval", {})
    ie = summary.get("initial_eval", {})
    rise = summary.get("paired_rise") or {}
    ci = (
        f" (paired rise {rise['delta_pass_at_1']:+.3f}, 95% CI [{rise['ci95'][0]:+.3f}, {rise['ci95'][1]:+.3f}] "
        f"over {rise['prompts']} prompts)"
        if rise
        else ""
    )
    print(
        f"[harness] done: eval pass@1 {ie.get('eval/pass_at_1', float('nan')):.3f} -> "
        f"{fe.get('eval/pass_at_1', float('nan')):.3f}{ci} in {summary.get('wall_seconds', 0):.0f} s; "
        f"run dir {args.out}"
    )
    return 0


COMMANDS = {
    "eval": _eval,
    "compare": _compare,
    "sample-data": _sample_data,
    "score": _score,
    "config": _config,
    "warmstart": _warmstart,
    "train": _train,
}


if __name__ == "__main__":
    sys.exit(main())
