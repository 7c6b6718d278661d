"""One benchmark case through our trainer, in its own process:

    python -m harness.bench.ours CONFIG_JSON OUT_JSON RUN_DIR [PROFILE_STEP]

CONFIG_JSON: a resolved run config (RunConfig.to_dict()). Runs harness.train.train into
RUN_DIR, then writes OUT_JSON = {"per_step": [step records, figures.py], "setup_s": ...}.
setup_s = model load + rollout engine start (vLLM) = wall time of train() minus the run's
own wall_seconds (which start after the backend is up). PROFILE_STEP: that step runs under
torch.profiler (profiling.py); its summary is OUT_JSON's "profile". The dtype and attention
implementation of the model the run builds are recorded ("precision", "attn_implementation").
"""

from __future__ import annotations

import json
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from harness.bench.figures import ours_steps
from harness.bench.profiling import profiled
from harness.config import build_config
from harness.jsonl import read_jsonl
from harness.train import train
from harness.train.rl.step import RLTrainer


@contextmanager
def _profile_step(which: int | None, out: dict):
    """Run RLTrainer.step number `which` under the profiler (its summary into out["profile"]) and record the
    model's attention implementation; the class is restored after."""
    real = RLTrainer.step

    def step(trainer, ctx, step, rec):
        out.setdefault("attn_implementation", getattr(ctx.model.config, "_attn_implementation", None))
        if step != which:
            return real(trainer, ctx, step, rec)
        out["profile"] = {"step": step}
        with profiled(out["profile"]):
            return real(trainer, ctx, step, rec)

    RLTrainer.step = step
    try:
        yield
    finally:
        RLTrainer.step = real


def run_ours(cfg_dict: dict, run_dir: str | Path, profile_step: int | None = None) -> dict:
    cfg = build_config(cfg_dict)
    extra: dict = {}
    t0 = time.perf_counter()
    with _profile_step(profile_step, extra):
        summary = train(cfg, run_dir)
    total = time.perf_counter() - t0
    records = read_jsonl(Path(run_dir) / "metrics.jsonl")
    precision = f"{cfg.train.autocast} autocast over {cfg.model.dtype}" if cfg.train.autocast else cfg.model.dtype
    return {
        "per_step": ours_steps(records),
        "setup_s": max(total - summary["wall_seconds"], 0.0),
        "wall_s": total,
        "precision": precision,
        "rollout_precision": f"{cfg.rollout.dtype} weights",  # hf/vLLM generate outside the trainer's autocast
        **extra,
    }


def main(argv: list[str]) -> int:
    if len(argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    cfg_path, out_path, run_dir = argv[:3]
    which = int(argv[3]) if len(argv) == 4 else None
    res = run_ours(json.loads(Path(cfg_path).read_text()), run_dir, which)
    Path(out_path).write_text(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
