"""`harness probe STUDY [--scale S] [--out FILE]`: the study's mechanism probe -> results/<study>/<scale>/probe.json;
with `--regime [--batches N]`, what the training batches of its first cell hold (regime.py) -> regime.json."""

from __future__ import annotations

import json
from pathlib import Path

from harness.atomic import atomic_write_text
from harness.experiment import load_study, study_dir
from harness.experiment.study import SCALES
from harness.probes import run_probe
from harness.probes.regime import run_regime


def add_command(sub) -> None:
    p = sub.add_parser(
        "probe",
        help="measure a study's mechanism directly: one update per arm from the same "
        "policy and batches (harness/probes/)",
    )
    p.add_argument("study", help="study name under experiments/ or a study YAML")
    p.add_argument("--scale", choices=list(SCALES), default=None, help="default: the study's `scale:`")
    p.add_argument(
        "--out", help="JSON output (default: results/<study>/<scale>/probe.json; with --regime: regime.json)"
    )
    p.add_argument(
        "--regime",
        action="store_true",
        help="only sample training batches from the warm start with the "
        "first cell's settings and print what the mechanisms need (harness/probes/regime.py)",
    )
    p.add_argument("--batches", type=int, default=None, help="with --regime: how many batches (default 4)")


def run(args) -> int:
    study = load_study(args.study, args.scale)
    if args.regime:
        out = Path(args.out) if args.out else study_dir(study) / "regime.json"
        doc = run_regime(study.cells[0].config, args.batches or 4)
        atomic_write_text(
            out, json.dumps({"study": study.name, "scale": study.scale, "cell": study.cells[0].id, **doc}, indent=1)
        )
        print(f"[regime] {study.name} ({study.scale}), cell {study.cells[0].id} -> {out}")
        return 0
    out = Path(args.out) if args.out else study_dir(study) / "probe.json"
    doc = run_probe(study, out)
    print(f"[probe] {study.name} ({study.scale}): {doc['wall_seconds']:.0f} s -> {out}")
    return 0
