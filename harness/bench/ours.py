"""One benchmark case through our trainer, in its own process:

    python -m harness.bench.ours CONFIG_JSON OUT_JSON RUN_DIR

CONFIG_JSON: a resolved run config (RunConfig.to_dict()). Runs harness.train.train into
RUN_DIR, then writes OUT_JSON = {"per_step": [step records, figures.py], "setup_s": ...}.
setup_s = model load + rollout engine start (vLLM) = wall time of train() minus the run's
own wall_seconds (which start after the backend is up).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from harness.bench.figures import ours_steps
from harness.config import build_config
from harness.jsonl import read_jsonl
from harness.train import train


def run_ours(cfg_dict: dict, run_dir: str | Path) -> dict:
    cfg = build_config(cfg_dict)
    t0 = time.perf_counter()
    summary = train(cfg, run_dir)
    total = time.perf_counter() - t0
    records = read_jsonl(Path(run_dir) / "metrics.jsonl")
    return {"per_step": ours_steps(records), "setup_s": max(total - summary["wall_seconds"], 0.0), "wall_s": total}


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    cfg_path, out_path, run_dir = argv
    res = run_ours(json.loads(Path(cfg_path).read_text()), run_dir)
    Path(out_path).write_text(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
