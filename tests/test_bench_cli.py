"""`harness bench`: the table's columns and JSON on a tiny-dense hf case of 1 warm-up + 1 measured step (no TRL),
the warm-up exclusion of the figures, and clear errors on bad options. Figures only: no timing is asserted.
The fair protocol's rules: tests/test_bench_protocol.py."""

import json
import sys

from harness import machine
from harness.bench import cli as bench_cli
from harness.bench.figures import summarize_steps
from harness.bench.report import COLUMNS, ratios
from harness.cli import main

HEADER = [h for h, _, _ in COLUMNS]


def _step(step, seconds, tokens=10.0, ckpt=None):
    return {
        "step": step,
        "rollout_s": seconds,
        "score_s": 0.0,
        "update_s": seconds,
        "log_s": 0.0,
        "eval_s": 0.0,
        "ckpt_s": ckpt,
        "step_s": 2 * seconds,
        "tokens": tokens,
    }


def test_bench_one_step_table_and_json(tmp_path, capsys):
    rc = main(
        [
            "bench",
            "--models",
            "tiny-dense",
            "--backends",
            "hf",
            "--steps",
            "1",
            "--lever-sets",
            "defaults",
            "--no-trl",
            "--threads",
            "1",
            "--prompts",
            "2",
            "--group-size",
            "2",
            "--max-new-tokens",
            "8",
            "--out-dir",
            str(tmp_path),
            "--in-process",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    lines = [ln for ln in out.splitlines() if ln.startswith("|")]
    assert [c.strip() for c in lines[0].strip("|").split("|")] == HEADER
    rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines[2:]]
    assert len(rows) == 1 and rows[0][:8] == ["ours", "tiny-dense", "hf", "defaults", "2x2x8", "2", "1", "1"]
    assert all(cell != "" for cell in rows[0])
    (path,) = tmp_path.glob("*.json")
    report = json.loads(path.read_text())
    (row,) = report["rows"]
    assert "error" not in row, row.get("error")
    assert row["warmup_only"] is False and row["measured_steps"] == 1 and row["warmup_steps"] == 1
    assert 0 < row["tokens_per_step"] <= 2 * 2 * 8  # 2 prompts x G 2 x at most 8 tokens (EOS may end one early)
    assert [s["step"] for s in row["per_step"]] == [0, 1]
    assert report["ratios"] == [] and report["meta"]["run_trl"] is False
    assert report["meta"]["complete"] is True  # written after each case with False, once more at the end
    assert report["meta"]["machine"] == machine.one_line() and machine.cpu_model() in next(
        ln for ln in out.splitlines() if ln.startswith("## harness bench")
    )
    assert "trl" not in sys.modules  # TRL stays a benchmark-only dependency


def test_a_killed_bench_keeps_the_cases_it_finished(tmp_path, monkeypatch):
    """The JSON is rewritten after every case (complete: false), so a bench stopped in its second case (a
    timeout, Ctrl-C) keeps the first case's figures."""
    done = []

    def case(trainer, model, backend, lever_set, args, work):
        if done:
            raise KeyboardInterrupt
        done.append(trainer)
        return {"trainer": trainer, "model": model, "backend": backend, "step_s": 1.0}

    monkeypatch.setattr(bench_cli, "_case", case)
    args = ["bench", "--models", "tiny-dense", "--backends", "hf", "--trl", "--out-dir", str(tmp_path)]
    try:
        main(args)
    except KeyboardInterrupt:
        pass
    (path,) = tmp_path.glob("*.json")
    report = json.loads(path.read_text())
    assert report["meta"]["complete"] is False and [r["trainer"] for r in report["rows"]] == ["ours"]


def test_summarize_excludes_warmup_step():
    fig = summarize_steps([_step(0, 10.0, ckpt=5.0), _step(1, 1.0, ckpt=0.5), _step(2, 3.0)])
    assert fig["step0_s"] == 20.0 and fig["measured_steps"] == 2 and not fig["warmup_only"]
    assert fig["rollout_s"] == 2.0 and fig["step_s"] == 4.0
    assert fig["ckpt_s"] == 0.5  # step 2's checkpoint was not measured: not counted as 0
    assert fig["tok_s"] == 20.0 / 8.0 and fig["rollout_tok_s"] == 20.0 / 4.0


def test_bench_bad_option_names_the_flag(capsys):
    assert main(["bench", "--models", "gpt-9", "--no-trl"]) == 2
    err = capsys.readouterr().err
    assert "--models" in err and "tiny-dense" in err
    assert main(["bench", "--backends", "hf,sglang", "--no-trl"]) == 2
    assert "--backends" in capsys.readouterr().err


def test_repeats_give_median_range_and_ratios_paired_by_repeat():
    from harness.bench.report import repeated, spread

    assert spread([3.0, 1.0, 2.0]) == "2.00 [1.00, 3.00]" and spread([1.0, 2.0]) == "1.50 [1.00, 2.00]"
    assert spread([4.0]) == "4.00" and spread([None]) == "-"
    case = {"model": "m", "rollout_s": 1.0, "score_s": 1.0, "update_s": 1.0}
    rows = [
        {**case, "trainer": "ours", "backend": "hf", "repeat": 0, "step_s": 2.0},
        {**case, "trainer": "trl", "backend": "hf (TRL)", "repeat": 0, "step_s": 4.0},
        {**case, "trainer": "ours", "backend": "hf", "repeat": 1, "step_s": 3.0},
        {**case, "trainer": "trl", "backend": "hf (TRL)", "repeat": 1, "step_s": 10.0},
    ]
    ours, trl = repeated(rows)
    assert ours["step_s"] == "2.50 [2.00, 3.00]" and ours["repeats"] == 2
    assert ours["ratio"] == "0.40 [0.30, 0.50]"  # 2/4 and 3/10, each repeat against its own TRL run
    assert trl["ratio"] == "-"
    # the JSON's ratios: each repeat against its own TRL run too (not every repeat against the last TRL row)
    assert [(r["repeat"], r["step_s_ratio"]) for r in ratios(rows)] == [(0, 0.5), (1, 0.3)]


def test_trl_malloc_ours_gives_trls_process_our_allocator(tmp_path, monkeypatch, capsys):
    """--trl-malloc ours: TRL's child process starts with glibc's variables set to harness/malloc.py's settings
    (default: none of them), so a comparison can leave the allocator out; the header says which."""
    import harness.bench.cli as bench_cli
    from harness import malloc

    seen = {}

    def child(cmd, threads, wait_policy="inherit", extra_env=None):
        seen[cmd[1].rsplit("/", 1)[-1]] = dict(extra_env or {})
        raise RuntimeError("not run")  # the case is recorded as failed; its figures are not the point here

    monkeypatch.setattr(bench_cli, "_child", child)
    for flag in ("ours", "glibc"):
        main(["bench", "--models", "tiny-dense", "--backends", "hf", "--steps", "1", "--trl", "--trl-malloc", flag,
              "--out-dir", str(tmp_path)])  # fmt: skip
        header = capsys.readouterr().out.splitlines()[0]
        if flag == "ours":
            assert (
                seen["trl_grpo.py"]
                == malloc.glibc_env()
                == {
                    "MALLOC_MMAP_THRESHOLD_": str(32 << 20),
                    "MALLOC_TRIM_THRESHOLD_": str((1 << 31) - 1),
                    "MALLOC_TOP_PAD_": str(256 << 20),
                }
            )
            assert "TRL: the same allocator" in header
        else:
            assert seen["trl_grpo.py"] == {} and "TRL: glibc defaults" in header
