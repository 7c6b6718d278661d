"""Run a study (experiments/<name>.yaml) end to end.

    snakemake --cores 2 --config study=demo                 # the study's default scale
    snakemake --cores 2 --config study=length_bias scale=cpu
    snakemake --cores 2 --configfile experiments/demo.yaml  # same thing
    snakemake -n --config study=moe_stability               # dry run: the job table
    snakemake --report results/demo/smoke/report.html --config study=demo

DAG, per study and scale (everything under results/<study>/<scale>/):

    warmstart (once per model x task x SFT settings, shared by the cells; cached in results/warmstart/)
    reward_model  when the study file has a `reward_model:` section: `harness train-rm` -> reward_model/,
                  the folder its cells name as `@reward_model` (task.rewards), trained before any cell
      -> train  one job per cell: `harness train configs/<cell>.yaml --out runs/<cell>` (resumes by itself);
                output = runs/<cell>/summary.json only (written last by the trainer)
      -> eval   `harness eval runs/<cell>` -> runs/<cell>/eval.json (held-out pass@k of the final policy)
      -> summary  summary.csv, one row per cell
      -> fit      fit.csv, fit_compare.csv, fit.png: R(C) per run and arm (`harness fit`, docs/fit.md)
      -> probe    `harness probe` -> probe.json, when the study file has a `probe:` section: the
                  mechanism measured directly, one update per arm from the warm start (harness/probes/)
      -> figures  analysis/<study>.py when it exists, else the generic figures; logged to MLflow

Cell configs (configs/<cell>.yaml), cells.json and study.json are written when this file is
parsed, and only when their content changes, so their mtimes move only when a cell really
changes. With `--rerun-triggers mtime` (profiles/default) editing code or this file never
retrains a finished cell; a killed run is resumed by rerunning the same command.

MLflow: experiment `<study>/<scale>`, one run per cell (run name = cell id, one tag per
axis), nested under the study's run (harness/experiment/study_runs.py). MLFLOW_TRACKING_URI selects a server; otherwise the embedded sqlite store
results/mlflow.db, created once in `onstart`; writers retry sqlite's "database is locked"
(harness.tracking.store.retry_locked). `--config mlflow_server=1` starts a local
`mlflow server` on 127.0.0.1 over the same store for the duration of the workflow instead
(faster with many parallel local jobs); numbers in benchmarks/mlflow_concurrency.py.
"""
import json
import os
import shlex
import sys
from pathlib import Path

from snakemake.utils import min_version

min_version("9.0")

from harness.atomic import atomic_write_text
from harness.experiment import StudyError, cells_index, load_study, study_dir, write_configs
from harness.experiment.files import final_eval_flags, study_json
from harness.experiment.load import TOP_LEVEL_KEYS

RESULTS = config.get("results", "results")


def _load():
    scale = config.get("scale")
    if "study" in config:
        return load_study(str(config["study"]), scale, results=RESULTS)
    if any(k in config for k in ("base", "grid", "zip")):  # --configfile experiments/<study>.yaml
        raw = {k: v for k, v in config.items() if k in TOP_LEVEL_KEYS}
        path = Path(workflow.configfiles[-1]) if workflow.configfiles else None
        return load_study(raw, scale, name=path.stem if path else None, path=path, results=RESULTS)
    raise StudyError("which study? use --config study=<name> (experiments/<name>.yaml) or --configfile <study.yaml>")


try:
    STUDY = _load()
except StudyError as err:
    sys.exit(f"study error: {err}")

OUT = study_dir(STUDY, RESULTS)
CELLS = {c.id: c for c in STUDY.cells}
GPU = STUDY.scale == "gpu"
_bin = Path(sys.executable).with_name("harness")
HARNESS = shlex.quote(str(_bin)) if _bin.exists() else f"{shlex.quote(sys.executable)} -m harness.cli"

# ---------------------------------------------------------------- files written at parse time (only if changed)
write_configs(STUDY, OUT / "configs")
atomic_write_text(OUT / "cells.json", json.dumps(cells_index(STUDY, RESULTS), indent=1, default=str) + "\n",
                  only_if_changed=True)
atomic_write_text(OUT / "study.json", json.dumps(study_json(STUDY, RESULTS), indent=1) + "\n", only_if_changed=True)


def _warm_start_groups():
    """cell id -> warm start name; name -> the minimal config that defines it."""
    from harness.train.run.warmstart import warm_start_folder

    of_cell, configs = {}, {}
    for c in STUDY.cells:
        cfg = c.config
        if not cfg.uses_warm_start():  # a pretrained model without warm_start.pretrained starts from its weights
            continue
        name = warm_start_folder(cfg).name
        of_cell[c.id] = name
        task = {"name": cfg.task.name, "options": cfg.task.options}
        if cfg.task.name == "dataset":  # its data and rewards define the SFT (on task.data.solution_key)
            task = cfg.task.model_dump(mode="json", exclude={"difficulty_mix", "options"})
        configs.setdefault(name, {
            "model": cfg.model.model_dump(mode="json"),
            "task": task,
            "warm_start": cfg.warm_start.model_dump(mode="json"),
            "rollout": {"max_new_tokens": cfg.rollout.max_new_tokens},
            "tracking": {"mlflow": False},
        })
    return of_cell, configs


WS_OF_CELL, WS_CONFIGS = _warm_start_groups()
import yaml as _yaml  # noqa: E402

for _name, _cfg in WS_CONFIGS.items():
    atomic_write_text(OUT / "warmstart" / f"{_name}.yaml", _yaml.safe_dump(_cfg, sort_keys=False), only_if_changed=True)

# ---------------------------------------------------------------- resources (see profiles/slurm for the cluster)
# CPU scales: one torch thread per training job (2 cells in parallel on 2 cores). GPU scale: one GPU per job.
TRAIN_THREADS = {cid: (c.config.train.threads or (8 if GPU else 1)) for cid, c in CELLS.items()}
# a cell with train.nproc = N is one run on N processes (`harness train` launches torchrun --nproc_per_node N
# itself, docs/scale.md): N GPUs at the gpu scale, N times the threads on a CPU
NPROC = {cid: c.config.train.nproc for cid, c in CELLS.items()}
# --config nodes=N (docs/scale.md, "Several nodes"): every cell is one run on N nodes of train.nproc / N
# processes each, started by `srun` (one `harness train --nnodes N` launcher a node) in one SLURM job of N nodes
NODES = int(config.get("nodes", 1))
_uneven = sorted(cid for cid, n in NPROC.items() if n % NODES)
if NODES < 1 or _uneven:
    sys.exit(f"study error: --config nodes={NODES} must be >= 1 and divide every cell's train.nproc"
             + (f" (cells {_uneven[:3]} have train.nproc {[NPROC[c] for c in _uneven[:3]]})" if _uneven else ""))
# one SLURM job of N nodes: `mpi` makes the jobstep run the shell as it is (its srun starts a launcher on each
# node: one task a node), `gres` asks for each node's GPUs (sbatch --gpus would count the job's), and no
# --ntasks-per-gpu (a launcher starts its node's processes itself)
MULTINODE = {"nodes": NODES, "mpi": "srun", "tasks": NODES, "tasks_per_gpu": 0} if NODES > 1 else {}
LAUNCH = f"srun --nodes={NODES} --ntasks-per-node=1 --kill-on-bad-exit=1 " if NODES > 1 else ""
RUNTIME_MIN = {"smoke": 30, "cpu": 360, "gpu": 720, "dataset": 360}[STUDY.scale]
NOTEBOOK = Path(workflow.basedir) / "analysis" / f"{STUDY.name}.py"
EVAL_FLAGS = final_eval_flags(STUDY.final_eval)  # the study's `final_eval`: --n-samples N --num-prompts P --vs-initial
PROBE = bool(STUDY.probe)  # the study file's `probe:` section (for this scale)
STUDY_ARG = shlex.quote(str(STUDY.path or STUDY.name))
RM_DIR = STUDY.reward_model_dir  # the study's `reward_model:` (None without one): trained before any cell
if RM_DIR is not None:
    atomic_write_text(OUT / "reward_model.json", json.dumps(STUDY.reward_model, indent=1, sort_keys=True) + "\n",
                      only_if_changed=True)
    RM_FLAGS = " ".join(f"--{k.replace('_', '-')} {shlex.quote(str(v))}" for k, v in sorted(STUDY.reward_model.items()))

wildcard_constraints:
    cell="|".join(sorted(CELLS, key=len, reverse=True)).replace(".", r"\.").replace("+", r"\+"),
    ws="[^/]+",


MLFLOW_SERVER = {}  # the local server started by onstart with --config mlflow_server=1


onstart:
    from harness.tracking import default_tracking_uri, ensure_store

    uri = default_tracking_uri()
    ensure_store(uri)  # sqlite: schema + WAL once, before parallel writers; a server URI: nothing to do
    if config.get("mlflow_server") and uri.startswith("sqlite:///"):
        # many parallel local writers: one `mlflow server` on 127.0.0.1 over the same store; the jobs
        # inherit MLFLOW_TRACKING_URI (local executor only: compute nodes cannot reach this host's 127.0.0.1)
        from harness.tracking.server import start_mlflow_server

        proc, uri = start_mlflow_server(default_tracking_uri(), Path(RESULTS) / "mlartifacts",
                                        OUT / "logs" / "mlflow_server.log")
        MLFLOW_SERVER["proc"] = proc
        os.environ["MLFLOW_TRACKING_URI"] = uri
    from harness.experiment.study_runs import open_study

    try:  # model-training experiment with its saved view; the study run the cells nest under
        open_study(OUT)
    except Exception as err:  # an unreachable server: the trainers buffer, the summary rule tries again
        print(f"[harness] MLflow: study run not opened ({err})", file=sys.stderr)
    print(f"[harness] study {STUDY.name} ({STUDY.scale}): {len(CELLS)} cells -> {OUT}; "
          f"MLflow {uri} experiment '{STUDY.experiment}'", file=sys.stderr)


def _stop_server():
    if MLFLOW_SERVER.get("proc") is not None:
        from harness.tracking.server import stop_mlflow_server

        stop_mlflow_server(MLFLOW_SERVER.pop("proc"))


onsuccess:
    _stop_server()


onerror:
    _stop_server()


rule all:
    input:
        OUT / "summary.csv",
        OUT / "figures",
        OUT / "fit.csv",
    default_target: True


rule warmstart:
    """SFT warm start shared by every cell with this model x task x SFT settings."""
    input:
        config=OUT / "warmstart" / "{ws}.yaml",
        reward_model=[OUT / "reward_model" / "rm_report.json"] if RM_DIR is not None else [],  # its config names it
    output:
        OUT / "warmstart" / "{ws}.json",
    log:
        OUT / "logs" / "warmstart" / "{ws}.log",
    threads: lambda w: 8 if GPU else WS_CONFIGS[w.ws]["warm_start"]["threads"]  # the SFT runs on exactly these
    resources:
        mem_mb=16000 if GPU else 4000,
        runtime=120 if GPU else 60,
        gpu=1 if GPU else 0,
    shell:
        "OMP_NUM_THREADS={threads} {HARNESS} warmstart {input.config} --out {output} > {log} 2>&1"


rule reward_model:
    """The study's reward model (its `reward_model:` section): `harness train-rm` into reward_model/, which the
    cells name as `@reward_model`; rm_report.json is written with the folder (held-out accuracy, calibration)."""
    input:
        options=OUT / "reward_model.json",
        pairs=lambda w: STUDY.reward_model["pairs"],
    output:
        OUT / "reward_model" / "rm_report.json",
    log:
        OUT / "logs" / "reward_model.log",
    params:
        folder=lambda w: RM_DIR,
        flags=lambda w: RM_FLAGS,
    threads: 8 if GPU else 1
    resources:
        mem_mb=16000 if GPU else 3000,
        runtime=60,
        gpu=1 if GPU else 0,
    shell:
        "OMP_NUM_THREADS={threads} {HARNESS} train-rm --out {params.folder} {params.flags} > {log} 2>&1"


rule train:
    """One cell: train, or resume after a crash; summary.json is written last (= complete)."""
    input:
        config=OUT / "configs" / "{cell}.yaml",
        warmstart=lambda w: [OUT / "warmstart" / f"{WS_OF_CELL[w.cell]}.json"] if w.cell in WS_OF_CELL else [],
        reward_model=[OUT / "reward_model" / "rm_report.json"] if RM_DIR is not None else [],
    output:
        OUT / "runs" / "{cell}" / "summary.json",
    log:
        OUT / "logs" / "train" / "{cell}.log",
    params:
        run_dir=lambda w: OUT / "runs" / w.cell,
        nodes=lambda w: f" --nnodes {NODES} --nproc {NPROC[w.cell] // NODES}" if NODES > 1 else "",
    threads: lambda w: TRAIN_THREADS[w.cell] * (1 if GPU else NPROC[w.cell] // NODES)
    resources:
        mem_mb=lambda w: (32000 if GPU else 3000) * NPROC[w.cell] // NODES,  # a node's; the SLURM profile may set its own
        runtime=RUNTIME_MIN,
        gpu=lambda w: NPROC[w.cell] if GPU and NODES == 1 else 0,
        **({"gres": lambda w: f"gpu:{NPROC[w.cell] // NODES}"} if GPU and NODES > 1 else {}),
        **MULTINODE,
    shell:
        "OMP_NUM_THREADS={threads} {LAUNCH}{HARNESS} train {input.config}{params.nodes} --out {params.run_dir} > {log} 2>&1"


rule eval:
    """Held-out pass@k of the final policy (unbiased estimator), per difficulty bucket; with the
    study's `final_eval: {vs_initial: true}` also of the starting policy on the same prompts (paired)."""
    input:
        OUT / "runs" / "{cell}" / "summary.json",
    output:
        OUT / "runs" / "{cell}" / "eval.json",
    log:
        OUT / "logs" / "eval" / "{cell}.log",
    params:
        run_dir=lambda w: OUT / "runs" / w.cell,
        flags=EVAL_FLAGS,
    threads: lambda w: TRAIN_THREADS[w.cell]
    resources:
        mem_mb=16000 if GPU else 3000,
        runtime=60,
        gpu=1 if GPU else 0,
    shell:
        "OMP_NUM_THREADS={threads} {HARNESS} eval {params.run_dir} {params.flags} > {log} 2>&1"


rule summary:
    """One row per cell: axes, seed, initial/final pass@1, final pass@k, lengths, wall time."""
    input:
        expand(OUT / "runs" / "{cell}" / "eval.json", cell=CELLS),
    output:
        report(OUT / "summary.csv", category="Summary", labels={"table": "one row per cell"}),
    log:
        OUT / "logs" / "summary.log",
    localrule: True
    shell:
        "{HARNESS} summarize {OUT} --csv {output} > {log} 2>&1"


rule fit:
    """The sigmoid of compute per run and arm, arms compared on A and B (harness/experiment/fit/, docs/fit.md):
    fit.csv, fit_compare.csv, fit.png. A run or arm whose data cannot carry a fit (too few evals, no rise)
    is a refused row of fit.csv with its reason, not a failed job."""
    input:
        OUT / "summary.csv",
    output:
        OUT / "fit.csv",
        OUT / "fit_compare.csv",
        report(OUT / "fit.png", category="Figures", labels={"figure": "fit of compute"}),
    log:
        OUT / "logs" / "fit.log",
    localrule: True
    shell:
        "{HARNESS} fit {OUT} > {log} 2>&1"


rule probe:
    """The study's mechanism probe: one update per arm from the warm start, on the same batches,
    measured on held-out prompts with common random numbers (harness/probes/)."""
    input:
        warmstart=sorted({OUT / "warmstart" / f"{n}.json" for n in WS_OF_CELL.values()}),
    output:
        OUT / "probe.json",
    log:
        OUT / "logs" / "probe.log",
    threads: TRAIN_THREADS[STUDY.cells[0].id]  # the probe sets torch's threads from train.threads too
    resources:
        mem_mb=32000 if GPU else 4000,
        runtime=RUNTIME_MIN,
        gpu=1 if GPU else 0,
    shell:
        "OMP_NUM_THREADS={threads} {HARNESS} probe {STUDY_ARG} --scale {STUDY.scale} --out {output} > {log} 2>&1"


rule figures:
    """analysis/<study>.py (jupytext percent notebook, run as a script) or the generic figures;
    written to a temp folder and renamed, then logged to the study's MLflow experiment."""
    input:
        csv=OUT / "summary.csv",
        probe=[OUT / "probe.json"] if PROBE else [],
        notebook=[str(NOTEBOOK)] if NOTEBOOK.exists() else [],
    output:
        report(directory(OUT / "figures"), patterns=["{name}.png"], category="Figures"),
    log:
        OUT / "logs" / "figures.log",
    localrule: True
    params:
        notebook=f"--notebook {shlex.quote(str(NOTEBOOK))}" if NOTEBOOK.exists() else "",
    shell:
        "{HARNESS} summarize {OUT} --figures {output} {params.notebook} > {log} 2>&1"
