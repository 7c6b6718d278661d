"""benchmarks/gpu_check.sh works before a GPU is lent: its --cpu-smoke mode runs every block's code (the random
1B model cut to one narrow layer, both lever sets, fixed length, the profiled step) on a CPU in seconds and writes
the JSON and markdown a GPU run would. With TRL (the slow suite): the same through the shell script, TRL's side
too. The figures mean nothing here; only that the check runs end to end."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", REPO / "benchmarks" / "gpu_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _check_results(out: Path, trainers: set[str]) -> None:
    report = json.loads((out / "gpu_check.json").read_text())
    assert report["meta"]["cpu_smoke"] is True and report["meta"]["skipped"] == []
    blocks = report["blocks"]
    assert [(b["model"], b["lever_set"], b["rc"]) for b in blocks] == [
        ("tiny-dense", "defaults", 0),
        ("llama-1b-random", "levers", 0),
    ]
    for b in blocks:
        rows = b["report"]["rows"]
        assert {r["trainer"] for r in rows} == trainers and not any(r.get("error") for r in rows)
        assert all(r["profile"]["cpu_ops"] > 0 and r["tokens_per_step"] == 2 * 2 * 4 for r in rows), rows
    assert len(list((out / "bench").glob("*/*.json"))) == 2  # one report per block, none overwritten
    md = (out / "gpu_check.md").read_text()
    assert "# GPU check (no GPU: CPU smoke" in md and "One profiled step per case" in md


def test_cpu_smoke_runs_every_block(tmp_path):
    assert _gpu_check().main(["--cpu-smoke", "--no-trl", "--out", str(tmp_path)]) == 0
    _check_results(tmp_path, {"ours"})


def test_only_runs_the_named_blocks_and_refuses_an_unknown_one(tmp_path, capsys):
    """--only MODEL:LEVERS runs just that block (what an earlier check skipped); a name that is no block is refused
    before any block runs, naming it and the allowed ones."""
    gc = _gpu_check()
    assert gc.main(["--cpu-smoke", "--no-trl", "--only", "tiny-dense:defaults", "--out", str(tmp_path)]) == 0
    blocks = json.loads((tmp_path / "gpu_check.json").read_text())["blocks"]
    assert [(b["model"], b["lever_set"]) for b in blocks] == [("tiny-dense", "defaults")]
    with pytest.raises(SystemExit):
        gc.main(["--cpu-smoke", "--only", "tiny-dense:levers", "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert "--only tiny-dense:levers: not a block" in err and "tiny-dense:defaults, llama-1b-random:levers" in err
    assert not (tmp_path / "x").exists()


def test_set_reaches_every_case_of_the_blocks(tmp_path):
    """--set KEY=VALUE (an A/B of one knob on the device) is passed to each block's `harness bench`: the knob shows
    in what the cases ran (here train.pad_to_multiple_of=8: each step's forward width a multiple of 8)."""
    argv = ["--cpu-smoke", "--no-trl", "--only", "tiny-dense:defaults", "--set", "train.pad_to_multiple_of=8"]
    assert _gpu_check().main([*argv, "--out", str(tmp_path)]) == 0
    (block,) = json.loads((tmp_path / "gpu_check.json").read_text())["blocks"]
    assert block["argv"][-2:] == ["--set", "train.pad_to_multiple_of=8"]
    widths = [s["perf"]["perf/batch_width"] for row in block["report"]["rows"] for s in row["per_step"]]
    assert widths and all(w % 8 == 0 for w in widths), widths


def test_without_a_gpu_the_check_says_so(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    assert _gpu_check().main([]) == 2
    assert "no GPU here" in capsys.readouterr().err


@pytest.mark.slow
def test_cpu_smoke_through_the_script_with_trl(tmp_path):
    pytest.importorskip("trl")
    env = {**os.environ, "PY": sys.executable}
    proc = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_check.sh"), "--cpu-smoke", "--out", str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    _check_results(tmp_path, {"ours", "trl"})


def test_the_gpu_blocks_are_valid_configs(monkeypatch, tmp_path):
    """What only a GPU runs is checked here: every GPU block's `harness bench` options and case configs (the
    random 1.17B model, the GPU lever set, fixed length) pass validation as on CUDA, and the plan is 2-3 warm-up
    + 10 measured + 1 profiled steps."""
    from harness.bench import cli as bench_cli
    from harness.cli import build_parser

    gc = _gpu_check()
    monkeypatch.setattr(bench_cli, "device_kind", lambda: "cuda")
    for model, lever_set, extra in gc.GPU_BLOCKS:
        argv = ["bench", "--models", model, "--backends", "hf", "--lever-sets", lever_set, "--trl"]
        args = build_parser().parse_args([*argv, *gc.GPU_ARGS, *extra, "--out-dir", str(tmp_path)])
        assert bench_cli._validate(args) == ([model], ["hf"]) and args.plan == (2, 3, 10)
        cfg = bench_cli._config(model, "hf", lever_set, args)
        assert cfg.train.steps == 3 + 10 + 1 and cfg.rollout.min_new_tokens == cfg.rollout.max_new_tokens == 64
        assert (cfg.train.micro_batch_size, cfg.train.autocast) == (
            (None, "bf16") if lever_set == "levers" else (4, None)
        )
    assert [(m, ls) for m, ls, _ in gc.GPU_BLOCKS][:2] == [
        ("smollm2-135m-random", "levers"),
        ("llama-1b-random", "levers"),
    ]
