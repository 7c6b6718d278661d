"""`harness train --nproc N`: torchrun's launcher in this process, and a rank's failure told as one line.

    code = launch(2, ["CONFIG", "key=value", "--out", "DIR"])    # the exit status of the run

The launcher is torchrun's own (`torch.distributed.run`, `--standalone --nproc_per_node N`), run in this
process: it starts the N ranks (`python -m harness.cli train ...` each) as its children and passes a
signal it gets (SIGTERM, SIGINT) to every rank. When a rank fails, torchrun stops the others (SIGTERM,
then SIGKILL after 30 s) and raises ChildFailedError, whose traceback used to bury the rank's one line.
Instead, each rank writes how it ended to a report folder (`report_rank`: the environment variable
REPORTS names it) and prints nothing of it; the launcher then prints ONE line, the one a 1-process run
prints, and exits with its status:

    a rank's fault (RewardFunctionError, NonFiniteError, a ConfigError, UserCodeExit: a line and an
    exit status): the earliest one. The other ranks' ends are its consequences (a peer that left the
    process group, torchrun's SIGTERM) and are not shown;
    else a rank that died without a report (SIGKILL, out of memory, a crash): "rank R died: ...";
    else a stop by a signal (StoppedBySignal, 143 / 130): the earliest rank's line;
    else a rank's own traceback (a bug): the earliest traceback, then one line naming its rank.

Under a plain `torchrun` (REPORTS unset) a rank prints its line itself, as one process does.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.run import parse_args
from torch.distributed.run import run as torchrun

from harness.tasks.rewards.exits import exit_status
from harness.train.run.nodes import Nodes

REPORTS = "HARNESS_RANK_REPORTS"  # the folder each rank writes rank_<R>.json to


def report_rank(line: str | None, exit_code: int, traceback_text: str | None = None) -> bool:
    """Under `launch`: write how this rank ended (its one line and exit status, or its traceback) for the
    launcher to print; True when written (then the rank prints nothing of it)."""
    folder = os.environ.get(REPORTS)
    if not folder or "RANK" not in os.environ or not os.path.isdir(folder):  # not a rank of `launch`
        return False
    rank = os.environ.get("RANK", "0")
    report = {"rank": int(rank), "time": time.time(), "line": line, "exit_code": exit_code, "traceback": traceback_text}
    tmp = Path(folder) / f".rank_{rank}.json.tmp"
    tmp.write_text(json.dumps(report))
    tmp.rename(Path(folder) / f"rank_{rank}.json")
    return True


def launch(nproc: int, train_args: list[str], nodes: Nodes | None = None) -> int:
    """Run `harness train *train_args` on nproc ranks under torchrun's launcher; the run's exit status.
    nodes: this node's place in a run of several (harness/train/run/nodes.py; None: one node, --standalone)."""
    where = nodes.torchrun_args() if nodes is not None else ["--standalone"]
    argv = [*where, f"--nproc_per_node={nproc}", "-m", "harness.cli", "train", *train_args]
    print(f"[harness] torch.distributed.run {' '.join(argv)}", flush=True)
    folder = tempfile.mkdtemp(prefix="harness-ranks-")
    os.environ[REPORTS] = folder
    elastic = logging.getLogger("torch.distributed.elastic")
    level, elastic.level = elastic.level, logging.CRITICAL  # its failure logs: the one line below says it
    try:
        torchrun(parse_args(argv))
        return 0
    except ChildFailedError as err:
        line, code = failure_line(err, read_reports(folder))
        print(line, file=sys.stderr, flush=True)
        return code
    except SignalException as err:  # torchrun passed the signal to the ranks, which stop (checkpointed) on it
        told = [r["line"] for r in read_reports(folder) if r["line"] is not None]
        print(told[0] if told else f"harness: stopped by {err.sigval.name}", file=sys.stderr)
        return 128 + int(err.sigval)
    finally:
        elastic.level = level
        os.environ.pop(REPORTS, None)
        shutil.rmtree(folder, ignore_errors=True)


def read_reports(folder: str) -> list[dict]:
    """Every rank's report, earliest first."""
    reports = [json.loads(p.read_text()) for p in Path(folder).glob("rank_*.json")]
    return sorted(reports, key=lambda r: r["time"])


def failure_line(err: ChildFailedError, reports: list[dict]) -> tuple[str, int]:
    """(the one line to print, the exit status) for a run whose ranks failed (see the module docstring)."""
    faults = [r for r in reports if r["line"] is not None]
    own = [r for r in faults if r["exit_code"] < 128]  # not a stop by a signal (torchrun's SIGTERM after a death)
    if own:
        return own[0]["line"], own[0]["exit_code"]
    reported = {r["rank"] for r in reports}
    dead = sorted((rank, f) for rank, f in err.failures.items() if rank not in reported)
    if reports:  # a rank torchrun stopped (SIGTERM) after another one's end is not the cause
        dead = [(rank, f) for rank, f in dead if f.exitcode != -signal.SIGTERM]
    if faults and not dead:  # every rank stopped by a signal (SIGTERM to one of them: all stop at one step)
        return faults[0]["line"], faults[0]["exit_code"]
    if dead:
        rank, f = dead[0]
        return (
            f"harness: rank {rank} (local_rank {f.local_rank}, pid {f.pid}) died: {exit_status(f.exitcode)}; "
            "torchrun stopped the other ranks. Rerun the same command to resume from the last checkpoint",
            1,
        )
    first = reports[0] if reports else None
    if first is not None and first["traceback"]:
        print(first["traceback"], file=sys.stderr, end="")
    rank = first["rank"] if first is not None else err.get_first_failure()[0]
    return f"harness: rank {rank} failed with the error above; torchrun stopped the other ranks", 1
