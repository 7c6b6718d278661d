"""The fair protocol of `harness bench` (harness/bench/protocol.py, levers.py, figures.py, report.py, profiling.py,
benchmarks/trl_grpo.py): the warm-up rule, the step plan, the TRL config it builds (gradient checkpointing, bf16,
attention, engine, fixed length), tokens/s, the pairing by engine and lever set, the two tables, the profile's
figures. Figures only: no timing is asserted."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from harness.bench import cli as bench_cli
from harness.bench.figures import summarize_steps
from harness.bench.levers import OURS_LEVERS, ours_levers, trl_levers
from harness.bench.profiling import busy_seconds, summarize_profile
from harness.bench.protocol import steady_start, step_plan, trl_vllm_refusal
from harness.bench.report import ratios, render
from harness.bench.workload import bench_config
from harness.cli import main

REPO = Path(__file__).resolve().parents[1]


def _trl_module():
    spec = importlib.util.spec_from_file_location("trl_grpo", REPO / "benchmarks" / "trl_grpo.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _steps(times, tokens=10.0):
    return [
        {
            "step": i,
            "rollout_s": t / 2,
            "score_s": 0.0,
            "update_s": t / 2,
            "log_s": 0.0,
            "eval_s": 0.0,
            "ckpt_s": None,
            "step_s": t,
            "tokens": tokens,
        }  # fmt: skip
        for i, t in enumerate(times)
    ]


def test_warmup_lasts_until_a_step_is_steady():
    # step 1 is still 5x the steps after it: warm-up; step 2 is within 10% of the median after it: measured from 2
    assert steady_start([10.0, 5.0, 1.0, 1.05, 0.98], warmup=1, warmup_max=3) == (2, True)
    assert steady_start([10.0, 1.0, 1.0, 1.0], warmup=1, warmup_max=3) == (1, True)  # steady at once
    assert steady_start([9.0, 8.0, 7.0, 6.0, 5.0], warmup=1, warmup_max=2) == (2, False)  # never: from warmup_max
    assert steady_start([3.0, 2.0], warmup=1, warmup_max=4) == (1, True)  # the last step: nothing after it
    fig = summarize_steps(_steps([10.0, 5.0, 1.0, 1.0, 1.0]), warmup=1, warmup_max=3)
    assert fig["warmup_steps"] == 2 and fig["measured_steps"] == 3 and fig["steady"] and fig["step_s"] == 1.0
    old = summarize_steps(_steps([10.0, 5.0, 1.0, 1.0, 1.0]))  # the default: step 0 alone, as before
    assert old["warmup_steps"] == 1 and old["measured_steps"] == 4 and old["step_s"] == 2.0


def test_tokens_per_second_are_totals_over_totals():
    steps = _steps([9.0, 2.0, 4.0])
    steps[2]["tokens"] = 30.0
    fig = summarize_steps(steps)
    assert fig["tokens_per_step"] == 20.0 and fig["tok_s"] == 40.0 / 6.0  # not the mean of 10/2 and 30/4
    assert fig["rollout_tok_s"] == 40.0 / 3.0 and fig["train_tok_s"] == 40.0 / 3.0


def test_step_plan_defaults_by_device_and_errors():
    assert step_plan(None, None, None, "cuda") == (2, 5, 10)  # >= 10 measured steps on a GPU
    assert step_plan(None, None, None, "cpu") == (1, 1, 2)
    assert step_plan(3, None, 4, "cpu") == (3, 3, 4)
    with pytest.raises(ValueError, match="--warmup-max=1 is below --warmup=2"):
        step_plan(2, 1, None, "cpu")


@pytest.mark.parametrize("ckpt", [False, True])
def test_trl_gradient_checkpointing_follows_ours(ckpt):
    cfg = bench_config("smollm2-135m", "hf", steps=3, threads=1, extra=[f"train.gradient_checkpointing={ckpt}"])
    args = _trl_module().trl_args(cfg, "/tmp/out", attn="sdpa")
    assert args["gradient_checkpointing"] is ckpt and args["bf16"] is False and args["use_vllm"] is False
    assert args["model_init_kwargs"] == {"dtype": "float32", "attn_implementation": "sdpa"}
    if importlib.util.find_spec("trl"):  # TRL 1.16's own default is True: the config the bench builds says False
        code = (  # in a subprocess: TRL stays out of the test process (tests/test_bench_cli.py checks it)
            "import json, sys; from trl import GRPOConfig; a = json.loads(sys.argv[1]); "
            "d, b = GRPOConfig(output_dir='/tmp/out', use_cpu=True), GRPOConfig(**a); "
            "print(d.gradient_checkpointing, b.gradient_checkpointing, b.bf16)"
        )
        built = subprocess.run([sys.executable, "-c", code, json.dumps({**args, "use_cpu": True})],
                               capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
        assert built == ["True", str(ckpt), "False"]


def test_trl_fixed_length_engine_and_bf16():
    trl = _trl_module()
    cfg = bench_config("tiny-dense", "hf", steps=3, threads=1, max_new_tokens=8, fixed_length=True,
                       extra=["train.autocast=bf16"])  # fmt: skip
    assert cfg.rollout.min_new_tokens == 8
    hf = trl.trl_args(cfg, "/tmp/out")
    assert hf["generation_kwargs"] == {"min_new_tokens": 8} and hf["bf16"] is True
    vllm = trl.trl_args(cfg, "/tmp/out", use_cpu=False, engine="vllm")
    assert (
        vllm["use_vllm"] is True and vllm["vllm_mode"] == "colocate" and vllm["generation_kwargs"] == {"min_tokens": 8}
    )
    assert trl.trl_args(bench_config("tiny-dense", "hf", steps=3, threads=1), "/o")["generation_kwargs"] is None


def test_lever_sets_in_one_place():
    assert ours_levers("defaults", "cpu") == () and trl_levers("defaults", "cuda") == {}
    assert "train.micro_batch_size=16" in ours_levers("levers", "cpu", rows=64)
    assert "train.micro_batch_size=4" in ours_levers("levers", "cpu", rows=4)  # the largest divisor up to 16
    assert not any("share_prefix" in o for o in OURS_LEVERS["cuda"])  # a CPU lever, measured 2x slower on a GPU
    with pytest.raises(ValueError, match="--lever-sets: 'fast' is unknown"):
        ours_levers("fast", "cpu")
    assert main(["bench", "--lever-sets", "defaults,fast", "--no-trl"]) == 2


def test_vllm_is_set_against_trls_vllm_only(capsys):
    assert "no GPU here" in trl_vllm_refusal(cuda=False)
    args = SimpleNamespace(trl=True, lever_set_list=["defaults"])
    cases = bench_cli._cases(["tiny-dense"], ["hf", "vllm"], args)
    if trl_vllm_refusal() is not None:  # here: TRL runs no vLLM case; ours on vLLM is measured alone
        assert cases == [("ours", "tiny-dense", "hf", "defaults"), ("trl", "tiny-dense", "hf", "defaults"),
                         ("ours", "tiny-dense", "vllm", "defaults")]  # fmt: skip


def _row(trainer, backend, lever_set, step_s, engine=None):
    engine = engine or backend
    return {"trainer": trainer, "model": "m", "backend": backend if trainer == "ours" else f"{backend} (TRL)",
            "engine": engine, "lever_set": lever_set, "repeat": 0, "step_s": step_s, "rollout_s": 1.0,
            "update_s": 1.0, "tok_s": 10.0 / step_s}  # fmt: skip


def test_two_tables_each_engine_against_its_own():
    rows = [
        _row("ours", "hf", "defaults", 2.0), _row("trl", "hf", "defaults", 4.0),
        _row("ours", "vllm", "defaults", 1.0),  # no TRL vLLM case: set against nothing, not against TRL's hf
        _row("ours", "hf", "levers", 1.0), _row("trl", "hf", "levers", 5.0),
    ]  # fmt: skip
    rat = ratios(rows)
    assert [(r["lever_set"], r["engine"], r["step_s_ratio"]) for r in rat] == [
        ("defaults", "hf", 0.5),
        ("levers", "hf", 0.2),
    ]
    meta = {"timestamp": "t", "threads": 1, "cpu_count": 2, "loadavg_before": (0.0,), "trl_vllm_refused": "no GPU here",
            "lever_sets": {"defaults": {"ours": [], "trl": {}}, "levers": {"ours": ["train.autocast=bf16"], "trl": {}}}}  # fmt: skip
    out = render(rows, meta)
    assert "Ours / TRL, defaults against defaults" in out and "Ours / TRL, every lever against every lever" in out
    assert "Ours on vLLM is set against no TRL case: no GPU here." in out
    assert out.index("defaults against defaults") < out.index("| m | hf | 0.50 |") < out.index("every lever against")


def test_an_old_json_still_renders_and_pairs():
    """A results/bench JSON from before the protocol (no engine, lever_set; steps = iterations) reads as it did."""
    old = [
        {"trainer": "ours", "model": "m", "backend": "hf", "repeat": 0, "step_s": 3.0, "tok_s": 1.0},
        {"trainer": "ours", "model": "m", "backend": "vllm", "repeat": 0, "step_s": 2.0, "tok_s": 1.0},
        {"trainer": "trl", "model": "m", "backend": "hf (TRL)", "repeat": 0, "step_s": 4.0, "tok_s": 1.0},
    ]
    assert [(r["engine"], r["step_s_ratio"]) for r in ratios(old)] == [("hf", 0.75)]
    out = render(old, {"timestamp": "t", "threads": 1, "cpu_count": 2, "loadavg_before": (0.0,)})
    assert "as run (a JSON from before the lever sets)" in out and "step 0 = warm-up" in out


def test_profile_figures():
    assert busy_seconds([(0, 2), (1, 3), (5, 6)]) == 4  # the union: [0, 3] and [5, 6]

    def ev(name, start, end, device=False):
        kind = torch.autograd.DeviceType.CUDA if device else torch.autograd.DeviceType.CPU
        return SimpleNamespace(name=name, time_range=SimpleNamespace(start=start, end=end), device_type=kind)

    events = [ev("aten::mm", 0, 10), ev("aten::_local_scalar_dense", 10, 12), ev("cudaStreamSynchronize", 12, 20),
              ev("gemm", 2, 6, True), ev("gemm", 4, 8, True), ev("aten::nonzero", 90, 100)]  # fmt: skip
    fig = summarize_profile(events, cuda=True)
    assert (fig["cpu_ops"], fig["kernels"], fig["host_syncs"], fig["item_reads"], fig["nonzero"]) == (3, 2, 1, 1, 1)
    assert fig["span_s"] == pytest.approx(100e-6) and fig["gpu_idle_share"] == pytest.approx(0.94)
    assert summarize_profile(events[:3], cuda=False)["gpu_idle_share"] is None
    # where the time went: host-side operators by self device time on CUDA, by self host time on a CPU
    timed = [SimpleNamespace(**vars(ev("aten::mm", 0, 1)), self_cpu_time_total=100.0, self_device_time_total=9000.0),
             SimpleNamespace(**vars(ev("aten::mm", 1, 2)), self_cpu_time_total=100.0, self_device_time_total=1000.0),
             SimpleNamespace(**vars(ev("aten::copy_", 2, 3)), self_cpu_time_total=5000.0, self_device_time_total=0.0),
             ev("gemm", 0, 1, True)]  # fmt: skip
    assert summarize_profile(timed, cuda=True)["top_ops"] == [["aten::mm", 2, 0.2, 10.0], ["aten::copy_", 1, 5.0, 0.0]]
    assert [r[0] for r in summarize_profile(timed, cuda=False)["top_ops"]] == ["aten::copy_", "aten::mm"]


def test_bench_json_records_the_protocol(tmp_path):
    """A tiny in-process case: the JSON says what was matched and how it was measured; --fixed-length makes every
    response T tokens; --profile profiles one more step, left out of the figures."""
    rc = main(["bench", "--models", "tiny-dense", "--backends", "hf", "--no-trl", "--lever-sets", "defaults",
               "--steps", "2", "--warmup", "1", "--threads", "1", "--prompts", "2", "--group-size", "2",
               "--max-new-tokens", "5", "--fixed-length", "--profile", "--in-process", "--out-dir", str(tmp_path)])  # fmt: skip
    assert rc == 0
    report = json.loads(next(tmp_path.glob("*.json")).read_text())
    (row,) = report["rows"]
    assert report["meta"]["warmup"] == 1 and report["meta"]["steps"] == 2 and report["meta"]["fixed_length"]
    assert row["steps"] == 4 and row["measured_steps"] == 2 and row["profile"]["step"] == 3  # 1 + 2 + 1 profiled
    assert row["tokens_per_step"] == 2 * 2 * 5  # exactly T tokens a response
    assert row["precision"] == "float32" and row["attn_implementation"] == "sdpa" and row["levers"] == []
    assert row["rollout_precision"] == "float32 weights"
    assert row["profile"]["cpu_ops"] > 0 and row["profile"]["item_reads"] > 0


def test_profile_step_profiles_a_step_of_the_plan(tmp_path, capsys):
    """--profile-step N profiles step N itself (no step added), left out of the figures; one outside the case's
    steps is refused before anything runs, naming the flag and the range."""
    argv = ["bench", "--models", "tiny-dense", "--backends", "hf", "--no-trl", "--lever-sets", "defaults",
            "--steps", "2", "--warmup", "1", "--threads", "1", "--prompts", "2", "--group-size", "2",
            "--max-new-tokens", "4", "--fixed-length", "--in-process", "--out-dir", str(tmp_path)]  # fmt: skip
    assert main([*argv, "--profile-step", "1"]) == 0
    (row,) = json.loads(next(tmp_path.glob("*.json")).read_text())["rows"]
    assert row["steps"] == 3 and row["profile"]["step"] == 1 and row["measured_steps"] == 1
    assert row["profile"]["top_ops"] and all(len(r) == 4 for r in row["profile"]["top_ops"])
    assert "- ours tiny-dense step 1, most self host time: aten::" in capsys.readouterr().out  # the report's line
    assert main([*argv, "--profile-step", "3"]) != 0
    assert "--profile-step 3: allowed 0 to 2" in capsys.readouterr().err


def test_phase_edges_wait_for_the_device(monkeypatch):
    """Our step's perf/*_seconds: torch.cuda.synchronize at each phase edge on CUDA (the work, not its launch), none
    on a CPU."""
    from harness.train.rl.observers import PhaseClock

    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(device))
    PhaseClock(torch.device("cpu")).edge()
    assert calls == []
    PhaseClock(torch.device("cuda", 0)).edge()
    assert calls == [torch.device("cuda", 0)] * 2  # the first edge at the start, the next at the phase's end


def test_two_benches_in_one_second_get_two_reports(tmp_path, monkeypatch):
    """The GPU check's blocks ran within one second on CI and the second report overwrote the first."""
    from harness.bench import report

    monkeypatch.setattr(report.time, "strftime", lambda fmt: "20261127-171535")
    first = report.write_json(tmp_path, [], {"timestamp": report.timestamp(tmp_path)})
    second = report.write_json(tmp_path, [], {"timestamp": report.timestamp(tmp_path)})
    assert first.name == "20261127-171535.json" and second.name == "20261127-171535-2.json"
    assert report.timestamp() == "20261127-171535"  # no folder: the second alone


def test_the_weight_sync_check_is_timed_apart_from_the_step():
    """vLLM's verify_sync (after syncs 1-3 and every 10th) would land in some measured steps and not others."""
    from harness.bench.figures import ours_steps

    base = {"perf/rollout_seconds": 1.0, "perf/score_seconds": 0.5, "perf/rollout_tokens_per_s": 10.0}
    recs = [
        {**base, "step": 0, "perf/update_seconds": 2.5, "perf/step_seconds": 4.25, "perf/verify_seconds": 0.5},
        {**base, "step": 1, "perf/update_seconds": 2.0, "perf/step_seconds": 3.75, "perf/verify_seconds": 0.0},
        {**base, "step": 2, "perf/update_seconds": 2.0, "perf/step_seconds": 3.75},  # hf: no sync, no key
    ]
    steps = ours_steps(recs)
    assert [s["update_s"] for s in steps] == [2.0, 2.0, 2.0]
    assert [s["step_s"] for s in steps] == [3.75, 3.75, 3.75]
    assert [s["verify_s"] for s in steps] == [0.5, 0.0, 0.0]
    assert [s["log_s"] for s in steps] == [0.25, 0.25, 0.25]


@pytest.mark.parametrize("tol", ["nan", "inf", "-0.1"])
def test_a_steady_tolerance_that_is_not_a_finite_number_ge_0_is_refused(tol, capsys, monkeypatch):
    """--steady-tol nan used to be accepted and the benchmark run: every `slower than (1 + nan) x` is False."""
    from harness.bench import cli as bench_cli
    from harness.cli import main

    monkeypatch.setattr(bench_cli, "_config", lambda *a, **k: pytest.fail("a case was built"))
    assert main(["bench", "--models", "tiny-dense", "--backends", "hf", "--no-trl", "--steady-tol", tol]) == 2
    assert f"--steady-tol must be a finite number >= 0 (got {float(tol)})" in capsys.readouterr().err
