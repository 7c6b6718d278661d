"""The warm start's step-0 eval is cached beside it (harness/train/run/eval_cache.py): a second run
with the same eval settings loads it, and it equals a fresh computation of the same eval."""

import json

from harness.train import train
from harness.train.run.eval_cache import eval_cache_path
from harness.train.run.warmstart import ensure_warm_start

# a kernel path no x86 machine runs: "another machine" whatever this one is (AVX2 or AVX512)
OTHER_ISA = "SVE256"

EVAL = [
    "train.steps=1",
    "train.checkpoint_every=1",
    "eval.every=1",
    "eval.num_prompts=6",
    "eval.n_samples=3",
    "eval.ks=[1,3]",
    "eval.seed=9173",
]  # an eval seed of this test's own: a cache entry of its own


def _first(run):
    rec = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
    return (
        {k: v for k, v in rec.items() if k.startswith("eval/")},
        json.loads((run / "eval_prompts" / "step_000000.json").read_text())["pass_at_1"],
    )


def test_step0_eval_cached_and_equal_to_fresh(fast_config, tmp_path, capsys):
    cfg = fast_config(*EVAL)
    path = eval_cache_path(cfg, ensure_warm_start(cfg))
    path.unlink(missing_ok=True)
    train(cfg, tmp_path / "fresh")  # computes the eval and caches it
    assert path.exists()
    assert "cached" not in capsys.readouterr().out
    train(fast_config(*EVAL, "seed=5", "objective.preset=dr_grpo"), tmp_path / "cached")  # another run: loads it
    assert f"cached in {path}" in capsys.readouterr().out
    assert _first(tmp_path / "cached") == _first(tmp_path / "fresh")
    assert len(_first(tmp_path / "fresh")[1]) == 6

    # a cached eval is what a fresh one computes (drop the cache and redo it)
    path.unlink()
    train(cfg, tmp_path / "again")
    assert _first(tmp_path / "again") == _first(tmp_path / "fresh")


def test_other_eval_settings_miss_the_cache(fast_config):
    cfg = fast_config(*EVAL)
    folder = ensure_warm_start(cfg)
    base = eval_cache_path(cfg, folder)
    for change in (
        "eval.temperature=0.7",
        "eval.num_prompts=7",
        "rollout.max_new_tokens=32",
        "task.difficulty_mix={hard: 1}",
        "eval.seed=1",
    ):
        assert eval_cache_path(fast_config(*EVAL, change), folder) != base, change
    # not part of the key: the run's seed, preset, eval cadence
    for same in ("seed=3", "objective.preset=dapo", "eval.every=5"):
        assert eval_cache_path(fast_config(*EVAL, same), folder) == base, same


def test_other_kernels_or_code_miss_the_cache(fast_config, monkeypatch):
    """An eval cached on another kernel path (AVX512 vs AVX2, another BLAS) or by other sampling or
    scoring code is another eval: its key differs (harness/machine.py)."""
    from harness import machine
    from harness.train.run import eval_cache

    cfg = fast_config(*EVAL)
    folder = ensure_warm_start(cfg)
    base = eval_cache_path(cfg, folder)
    here = machine.kernel_path()
    monkeypatch.setattr(machine, "kernel_path", lambda: {**here, "cpu_capability": OTHER_ISA})
    assert eval_cache_path(cfg, folder) != base
    monkeypatch.setattr(machine, "kernel_path", lambda: here)
    assert eval_cache_path(cfg, folder) == base
    monkeypatch.setattr(eval_cache, "eval_code_digest", lambda cfg: "other-code")
    assert eval_cache_path(cfg, folder) != base
