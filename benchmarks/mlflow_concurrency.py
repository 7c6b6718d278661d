"""Do parallel grid cells lose or corrupt MLflow metrics?  Measure it.

N writer processes (default 8) start at the same instant; each creates its own run through
`harness.tracking.MlflowTracker` (the class the trainer uses, which also creates the
experiment and, for sqlite, the store) and logs S steps x M metrics, one `log_batch` per
step, flushed in chunks of `--flush-every` steps like the trainer's checkpoints. Then the
store is read back and every (run, metric, step) point is counted: lost, duplicated,
errors, duplicated runs, wall time.

Backends:
  sqlite   embedded store sqlite:///<tmp>/mlflow.db (WAL, created once under a file lock)
  server   `mlflow server` on 127.0.0.1 (its own sqlite backend), started here, as the
           workflow would start it

    .venv/bin/python benchmarks/mlflow_concurrency.py                 # both backends
    .venv/bin/python benchmarks/mlflow_concurrency.py --backend sqlite --writers 12
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import shutil
import sys
import tempfile
import time
from pathlib import Path

EXPERIMENT = "concurrency-bench"


def _writer(
    idx: int, uri: str, root: str, steps: int, n_metrics: int, flush_every: int, barrier, out_q, no_retry: bool = False
) -> None:
    import mlflow  # noqa: F401  (imported before the clock starts)
    from mlflow.tracking import MlflowClient  # noqa: F401

    import harness.tracking.mlflow_tracker as mt
    from harness.tracking import MlflowTracker

    if no_retry:  # the tracker without its sqlite-lock retry (the A/B of retry_locked)
        mt.retry_locked = lambda fn, *a, **kw: fn(*a, **kw)

    run_dir = Path(root) / f"run_{idx:02d}"
    run_dir.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    barrier.wait()  # all writers hit the store at the same moment
    t0 = time.perf_counter()
    try:
        tracker = MlflowTracker(
            run_dir,
            EXPERIMENT,
            {"bench": {"writer": idx, "steps": steps}},
            {"writer": str(idx)},
            run_name=f"writer_{idx:02d}",
            uri=uri,
        )
    except Exception as err:  # noqa: BLE001 - counted, not hidden
        out_q.put(
            {
                "writer": idx,
                "run_id": None,
                "errors": [f"create: {type(err).__name__}: {err}"],
                "seconds": time.perf_counter() - t0,
            }
        )
        return
    t_created = time.perf_counter() - t0
    pending: list[dict] = []
    for step in range(steps):
        rec = {"step": step, "perf/step_seconds": 0.1}
        rec.update({f"bench/m{j:02d}": step + j / 100 for j in range(n_metrics - 1)})
        pending.append(rec)
        if len(pending) == flush_every or step == steps - 1:
            try:
                tracker.log_steps(pending)
            except Exception as err:  # noqa: BLE001
                errors.append(f"step {step}: {type(err).__name__}: {str(err)[:200]}")
                # like a crashed trainer resuming: the tracker's cursor did not move, retry once
                try:
                    tracker.log_steps(pending)
                except Exception as err2:  # noqa: BLE001
                    errors.append(f"retry step {step}: {type(err2).__name__}: {str(err2)[:200]}")
            pending = []
    try:
        tracker.finish()
    except Exception as err:  # noqa: BLE001
        errors.append(f"finish: {type(err).__name__}: {err}")
    from harness.tracking import store

    out_q.put(
        {
            "writer": idx,
            "run_id": tracker.run_id,
            "errors": errors,
            "lock_retries": store.lock_retries,
            "create_seconds": t_created,
            "log_seconds": time.perf_counter() - t0 - t_created,
            "seconds": time.perf_counter() - t0,
        }
    )


def start_server(workdir: Path, workers: int = 1):
    """The same local server the Snakefile starts with --config mlflow_server=1."""
    from harness.tracking.server import start_mlflow_server

    return start_mlflow_server(
        f"sqlite:///{workdir / 'server.db'}", workdir / "server-artifacts", workdir / "server.log", workers=workers
    )


def stop_server(proc) -> None:
    from harness.tracking.server import stop_mlflow_server

    stop_mlflow_server(proc)


def count(uri: str, results: list[dict], steps: int, n_metrics: int) -> dict:
    """Read every metric history back; count lost and duplicated points and runs."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(EXPERIMENT)
    runs = client.search_runs([exp.experiment_id], max_results=1000) if exp else []
    names = [r.info.run_name for r in runs]
    lost = dup = 0
    keys = ["perf/step_seconds"] + [f"bench/m{j:02d}" for j in range(n_metrics - 1)]
    wrong_values = 0
    for res in results:
        if res["run_id"] is None:
            lost += steps * n_metrics
            continue
        for key in keys:
            hist = client.get_metric_history(res["run_id"], key)
            got = [m.step for m in hist]
            lost += steps - len(set(got))
            dup += len(got) - len(set(got))
            if key.startswith("bench/"):
                j = int(key[-2:])
                wrong_values += sum(abs(m.value - (m.step + j / 100)) > 1e-9 for m in hist)
    return {
        "runs_in_store": len(runs),
        "duplicated_runs": len(names) - len(set(names)),
        "lost_points": lost,
        "duplicated_points": dup,
        "wrong_values": wrong_values,
    }


def bench(
    backend: str,
    writers: int,
    steps: int,
    n_metrics: int,
    flush_every: int,
    server_workers: int,
    keep: bool,
    no_retry: bool = False,
) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix=f"mlflow-bench-{backend}-"))
    server = None
    try:
        if backend == "sqlite":
            uri = f"sqlite:///{workdir / 'mlflow.db'}"  # fresh: the writers race to create it (ensure_store's lock)
        else:
            t0 = time.perf_counter()
            server, uri = start_server(workdir, server_workers)
            print(f"  server up in {time.perf_counter() - t0:.1f} s at {uri}", flush=True)
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        barrier = ctx.Barrier(writers + 1)
        procs = [
            ctx.Process(
                target=_writer,
                args=(i, uri, str(workdir / "runs"), steps, n_metrics, flush_every, barrier, q, no_retry),
            )
            for i in range(writers)
        ]
        for p in procs:
            p.start()
        barrier.wait()  # every writer has imported mlflow
        t_start = time.perf_counter()
        results = [q.get() for _ in procs]
        wall_all = time.perf_counter() - t_start
        for p in procs:
            p.join()
        wall = wall_all
        counts = count(uri, results, steps, n_metrics)
        errors = [e for r in results for e in r["errors"]]
        return {
            "backend": backend + ("(no retry)" if no_retry else ""),
            "writers": writers,
            "steps": steps,
            "metrics_per_step": n_metrics,
            "expected_points": writers * steps * n_metrics,
            **counts,
            "errors": len(errors),
            "lock_retries": sum(r.get("lock_retries", 0) for r in results),
            "error_examples": errors[:3],
            "wall_seconds": round(wall, 2),
            "max_create_seconds": round(max(r.get("create_seconds", 0) for r in results), 2),
            "max_log_seconds": round(max(r.get("log_seconds", 0) for r in results), 2),
            "points_per_second": round(writers * steps * n_metrics / wall),
            "exit_codes": [p.exitcode for p in procs],
            "workdir": str(workdir),
        }
    finally:
        if server is not None:
            stop_server(server)
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=["sqlite", "server", "both"], default="both")
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--metrics", type=int, default=40)
    ap.add_argument(
        "--flush-every", type=int, default=5, help="steps per log_steps call (the trainer's checkpoint_every)"
    )
    ap.add_argument("--server-workers", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the temporary stores")
    ap.add_argument("--no-retry", action="store_true", help="disable the tracker's sqlite-lock retry (A/B)")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args(argv)
    backends = ["sqlite", "server"] if args.backend == "both" else [args.backend]
    out = []
    for b in backends:
        print(f"[bench] {b}: {args.writers} writers x {args.steps} steps x {args.metrics} metrics", flush=True)
        res = bench(
            b, args.writers, args.steps, args.metrics, args.flush_every, args.server_workers, args.keep, args.no_retry
        )
        print(json.dumps(res, indent=2), flush=True)
        out.append(res)
    print(
        "\nbackend  writers  expected  lost  duplicated  dup_runs  errors  retries  wall_s  create_s  log_s  points/s"
    )
    for r in out:
        print(
            f"{r['backend']:<8} {r['writers']:>7} {r['expected_points']:>9} {r['lost_points']:>5} "
            f"{r['duplicated_points']:>11} {r['duplicated_runs']:>9} {r['errors']:>7} {r['lock_retries']:>8} "
            f"{r['wall_seconds']:>7} "
            f"{r['max_create_seconds']:>9} {r['max_log_seconds']:>6} "
            f"{r['points_per_second']:>9}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    bad = any(r["lost_points"] or r["duplicated_points"] or r["errors"] or r["duplicated_runs"] for r in out)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
