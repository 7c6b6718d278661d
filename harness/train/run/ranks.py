"""What the run shell does differently on N processes (train.nproc, torchrun; harness/parallel.py).

One run, one record: rank 0 opens the run directory, writes every file of it and logs to MLflow; every
other rank runs the same steps with its writes going to a scratch folder of its own (deleted at the end)
and no tracker. The ranks start together and stay together:

    rank 0 builds the task, the warm start (cached on disk) and the initial policy; the others wait,
    then read the same cached warm start;
    rank 0 finds the checkpoint to resume from; every rank restores the state rank 0 read (so a run
    resumes on another number of processes as on the same one);
    the initial weights are checked equal on every rank before the first step;
    a stop signal received by any rank stops every rank at the same step boundary.
"""

from __future__ import annotations

import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

import torch

from harness import parallel
from harness.config import RunConfig


def own_dir(out_dir: str | Path) -> tuple[Path, Path | None]:
    """(the directory this rank writes, the scratch folder to delete at the end or None): rank 0 writes the run."""
    if parallel.is_main():
        return Path(out_dir), None
    scratch = Path(tempfile.mkdtemp(prefix=f"harness-rank{parallel.rank()}-"))
    return scratch / "run", scratch


def quiet_config(cfg: RunConfig) -> RunConfig:
    """A non-main rank's config: the same run without a tracker (rank 0 logs the run)."""
    if parallel.is_main() or not cfg.tracking.mlflow:
        return cfg
    return cfg.model_copy(update={"tracking": cfg.tracking.model_copy(update={"mlflow": False})})


@contextmanager
def rank_zero_first():
    """Rank 0 runs the block before the others (it builds what they then read from disk: the warm start)."""
    if not parallel.is_main():
        parallel.barrier()
    yield
    if parallel.is_main():
        parallel.barrier()


def weights_digest(module: torch.nn.Module) -> list[float]:
    """A cheap fingerprint of a module's weights: sum and sum of squares of every parameter (float64)."""
    with torch.no_grad():
        return [float(p.detach().double().pow(k).sum()) for p in module.parameters() for k in (1, 2)]


def check_same_start(module: torch.nn.Module) -> None:
    """Every rank must start the first step from the same weights (the same warm start, the same restore)."""
    digests = parallel.gather_objects(weights_digest(module))
    bad = [r for r, d in enumerate(digests) if d != digests[0]]
    if bad:
        raise RuntimeError(
            f"ranks {bad} start from other weights than rank 0 (different warm starts, or a restore that "
            "did not reach them); a data-parallel run needs one initial policy"
        )


def cleanup(scratch: Path | None) -> None:
    if scratch is not None:
        shutil.rmtree(scratch, ignore_errors=True)
