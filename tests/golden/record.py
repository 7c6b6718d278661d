"""The golden records: the first steps of seeded smoke-scale runs, every logged metric except perf/*,
replayed from stored fixtures so that the numbers do not depend on the CPU that computes them.

    python tests/golden/record.py [NAME ...]            # run NAME for real; (re)write its record and rollouts
    python tests/golden/record.py --check [NAME ...]    # replay the stored rollouts, compare, print every difference
    python tests/golden/record.py --fixtures [WS ...]   # (re)build the warm-start fixtures (then re-record all)

What is stored (tests/golden/):
  fixtures/WS/            the warm start each run starts from (a 300-step SFT of a tiny model, saved in fp16,
                          loaded as fp32): the one part of a run that no tolerance could absorb, since
                          300 SFT steps amplify the last bit of a matmul (they came out differently on an
                          AVX2 and an AVX512 CPU) and every later number follows
  records/NAME.json       the metric records (one per logged step) and, last, the final weights' digest
  records/NAME.rollouts.pt  every generate() call of the run: its inputs (prompt ids, G, sampling params)
                          and what the sampler returned (token ids, mask, sampler log-probs, truncation,
                          texts, MoE routing)

`--check` (and tests/golden/test_golden.py) runs the same config again with the rollout engine replaced
by a replayer that returns the stored samples, after checking that the run asked for exactly the stored
inputs (a change to the prompt draw, its rendering, the seeds or the sampling params fails there). So
everything computed from the samples -- rewards, advantages, ratios, clipping, KL, aggregation, the
gradients, each optimizer step, the metrics, the evals' scores -- is checked, and no sampled token can
flip: the numbers vary across CPUs only by float rounding, which TOLERANCE covers (measured: see
test_golden.py). The sampler itself is not in this record (its samples are data here).

A refactor that moves no number leaves these files unchanged; a fix that moves a number re-records the
run it moves (`python tests/golden/record.py NAME`), and its commit says which metrics moved and why.
Each run uses one torch thread.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import torch

HERE = Path(__file__).resolve().parent
RECORDS = HERE / "records"
FIXTURES = HERE / "fixtures"

# Relative tolerance and the absolute floor under which two values count as equal: measured across
# torch's CPU kernel paths (test_golden.py's docstring has the numbers).
REL_TOL = 1e-4
ABS_TOL = 1e-6

# Warm-start fixtures: a 300-step SFT (seed 0) of each model x task the runs below start from.
WARM_STARTS: dict[str, list[str]] = {
    "dense-arithmetic": ["model.name=tiny-dense", "task.name=arithmetic"],
    "moe-arithmetic": ["model.name=tiny-moe", "task.name=arithmetic"],
    "dense-countdown": ["model.name=tiny-dense", "task.name=countdown"],
}


def _from(ws: str) -> list[str]:
    return [f"model.name={FIXTURES / ws}", "warm_start.enabled=false"]


# The engine tests' fast regime (tests/train/conftest.py) for 3 steps, an eval at steps 0, 2, 3.
_FAST = [
    "rollout.temperature=1.0",
    "eval.temperature=1.0",
    "train.prompts_per_step=8",
    "train.group_size=4",
    "rollout.max_new_tokens=40",
    "task.difficulty_mix={easy: 1}",
    "eval.num_prompts=8",
    "eval.n_samples=4",
    "eval.ks=[1,4]",
    "tracking.mlflow=false",
    "train.samples_to_log=2",
    "train.threads=1",
]
_RL = [*_FAST, "train.steps=3", "eval.every=2", "train.mini_batches=2", "train.checkpoint_every=2"]

RUNS: dict[str, tuple[str, list[str]]] = {
    "grpo": ("experiments/runs/smoke.yaml", [*_from("dense-arithmetic"), *_RL, "objective.preset=grpo"]),
    # overlong shaping bites past 10 tokens (40 max, a 30-token buffer); dynamic sampling drops groups
    "dapo": (
        "experiments/runs/smoke.yaml",
        [*_from("dense-arithmetic"), *_RL, "objective.preset=dapo", "objective.overlong_buffer=30"],
    ),
    "ppo": ("experiments/runs/smoke.yaml", [*_from("dense-arithmetic"), *_RL, "objective.preset=ppo"]),
    "dpo": (
        "experiments/runs/dpo.yaml",
        [
            *_from("dense-arithmetic"),
            *_FAST,
            "rollout.max_new_tokens=40",
            "dpo.rounds=2",
            "dpo.num_prompts=16",
            "dpo.samples_per_prompt=4",
            "dpo.batch_size=4",
            "dpo.max_steps=6",
            "eval.every=2",
            "train.checkpoint_every=2",
        ],
    ),
    # the MoE study's paths: router noise at rollout, routing replay (the rollout's experts in every
    # training forward), TIS, the mismatch and router-disagreement metrics (old_logp recomputed)
    "moe": (
        "experiments/runs/smoke.yaml",
        [
            *_from("moe-arithmetic"),
            *_RL,
            "objective.preset=grpo",
            "objective.kl_coef=0.0",
            "rollout.router_noise=0.5",
            "objective.routing_replay=true",
            "objective.tis_cap=2.0",
            "train.old_logp=recompute",
        ],
    ),
    # the length-bias study's task: countdown search traces, Dr.GRPO's sum / constant
    "countdown": (
        "experiments/runs/smoke.yaml",
        [
            *_from("dense-countdown"),
            *_RL,
            "task.name=countdown",
            "objective.preset=dr_grpo",
            "rollout.max_new_tokens=96",
        ],
    ),
}


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value


# ---------------------------------------------------------------------------------- rollouts
class Recorder:
    """Wraps a real rollout engine; keeps every generate() call's inputs and outputs."""

    def __init__(self, inner, calls: list):
        self.inner, self.calls = inner, calls

    def generate(self, prompts, group_size, params):
        out = self.inner.generate(prompts, group_size, params)
        self.calls.append(
            {
                "prompts": [list(p) for p in prompts],
                "group_size": group_size,
                "params": dataclasses.asdict(params),
                "batch": _batch_to_dict(out),
            }
        )
        return out

    def sync_weights(self, model):
        self.inner.sync_weights(model)

    def close(self):
        self.inner.close()


class ReplayMismatch(AssertionError):
    """The run asked the rollout engine for something other than what the record holds."""


class Replayer:
    """Returns the stored samples, in order, after checking each call asks for what was recorded."""

    def __init__(self, calls: list):
        self.calls, self.n = calls, 0

    def generate(self, prompts, group_size, params):
        if self.n >= len(self.calls):
            raise ReplayMismatch(f"generate call #{self.n}: the record holds only {len(self.calls)} calls")
        call = self.calls[self.n]
        asked = {
            "prompts": [list(p) for p in prompts],
            "group_size": group_size,
            "params": _recorded_params(params, call["params"]),
        }
        for key, value in asked.items():
            if value != call[key]:
                raise ReplayMismatch(
                    f"generate call #{self.n}: {key} differ from the record "
                    f"(the prompt draw, its rendering, a seed or a sampling param changed): "
                    f"asked {str(value)[:200]}, recorded {str(call[key])[:200]}"
                )
        self.n += 1
        return _batch_from_dict(call["batch"])

    def sync_weights(self, model):
        pass

    def close(self):
        pass


def _recorded_params(params, recorded: dict) -> dict:
    """The sampling params as the record holds them: a field added since (e.g. `stop`) counts only
    when it is away from its default, so old records stay valid for runs that do not use it."""
    asked = dataclasses.asdict(params)
    defaults = {f.name: f.default for f in dataclasses.fields(params)}
    return {k: v for k, v in asked.items() if k in recorded or v != defaults.get(k)}


def _batch_to_dict(b) -> dict:
    return {
        "prompt_ids": [list(p) for p in b.prompt_ids],
        "response_ids": b.response_ids.clone(),
        "response_mask": b.response_mask.clone(),
        "sampler_logp": b.sampler_logp.detach().clone(),
        "truncated": b.truncated.clone(),
        "texts": list(b.texts),
        "extras": {k: v.clone() for k, v in b.extras.items()},
    }


def _batch_from_dict(d: dict):
    from harness.rollout.base import RolloutBatch

    return RolloutBatch(
        prompt_ids=[list(p) for p in d["prompt_ids"]],
        response_ids=d["response_ids"].clone(),
        response_mask=d["response_mask"].clone(),
        sampler_logp=d["sampler_logp"].clone(),
        truncated=d["truncated"].clone(),
        texts=list(d["texts"]),
        extras={k: v.clone() for k, v in d["extras"].items()},
    )


@contextmanager
def _engine(make):
    """Every rollout engine a run builds (training and evals, the final eval) is make(real_factory, cfg, model, tok)."""
    import harness.rollout as rollout

    def factory(cfg, model, tok):
        return make(rollout.make_backend, cfg, model, tok)

    with (
        mock.patch("harness.train.run.shell.make_backend", factory),
        mock.patch("harness.train.run.final_eval.make_backend", factory),
    ):
        yield


# ---------------------------------------------------------------------------------- runs
def record(name: str, replay: list | None = None, extra: tuple[str, ...] = ()) -> tuple[list[dict], list]:
    """Run `name` -> (its metric records, perf/* removed, then the final weights' digest; the
    generate() calls). replay: stored calls to return instead of sampling (None: sample for real). extra:
    overrides after the run's own (a knob that must not move its numbers)."""
    from harness.config import load_config
    from harness.train import train

    path, overrides = RUNS[name]
    cfg = load_config(path, [*overrides, *extra])
    calls: list = []
    replayer = Replayer(replay) if replay is not None else None

    def make(real, rollout_cfg, model, tok):
        return Recorder(real(rollout_cfg, model, tok), calls) if replayer is None else replayer

    with tempfile.TemporaryDirectory() as tmp, _engine(make):
        out = Path(tmp) / name
        train(cfg, out)  # the run shell: the preset's trainer (rl | dpo)
        lines = (out / "metrics.jsonl").read_text().splitlines()
        digest = weights_digest(out, FIXTURES / _fixture_of(overrides))
    if replayer is not None and replayer.n != len(replay):
        raise ReplayMismatch(f"the run made {replayer.n} generate calls, the record holds {len(replay)}")
    recs = []
    for line in lines:
        rec = json.loads(line)
        recs.append({k: _clean(v) for k, v in sorted(rec.items()) if not k.startswith("perf/")})
    return [*recs, digest], calls


def _fixture_of(overrides: list[str]) -> str:
    return next(Path(o.split("=", 1)[1]).name for o in overrides if o.startswith("model.name="))


def weights_digest(run_dir: Path, start: Path) -> dict:
    """The newest checkpoint's policy weights against the warm start: the L2 norm of the change,
    the sum of the weights and their L2 norm (every optimizer step's effect, in three numbers)."""
    from safetensors.torch import load_file

    ckpts = sorted((run_dir / "checkpoints").glob("step_*"), key=lambda p: int(p.name[5:]))
    end = load_file(str(ckpts[-1] / "model.safetensors"))
    begin = load_file(str(start / "model.safetensors"))
    delta = sum(float(((end[k].double() - begin[k].double()) ** 2).sum()) for k in end)
    return {
        "step": "final",
        "checkpoint": ckpts[-1].name,
        "weights/delta_l2": math.sqrt(delta),
        "weights/sum": sum(float(v.double().sum()) for v in end.values()),
        "weights/l2": math.sqrt(sum(float((v.double() ** 2).sum()) for v in end.values())),
    }


def rollouts_path(name: str) -> Path:
    return RECORDS / f"{name}.rollouts.pt"


def load_rollouts(name: str) -> list:
    return torch.load(rollouts_path(name), weights_only=True)


def check(name: str, extra: tuple[str, ...] = ()) -> list[str]:
    """Replay run `name` from its stored rollouts (with the overrides `extra`); every difference from its stored
    record."""
    expected = json.loads((RECORDS / f"{name}.json").read_text())
    got, _ = record(name, replay=load_rollouts(name), extra=extra)
    return diff(expected, got)


def build_fixture(ws: str) -> Path:
    """A 300-step SFT warm start of WARM_STARTS[ws], saved in fp16 under fixtures/ws."""
    from harness.config import load_config
    from harness.models import load_model, save_model
    from harness.train.run.warmstart import sft

    torch.set_num_threads(1)
    cfg = load_config("experiments/runs/smoke.yaml", [*WARM_STARTS[ws], "warm_start.steps=300"])
    with tempfile.TemporaryDirectory() as tmp:
        sft(cfg, Path(tmp) / ws)
        model, tok = load_model(Path(tmp) / ws)
        report = json.loads((Path(tmp) / ws / "warmstart.json").read_text())
    save_model(model.half(), tok, FIXTURES / ws)
    (FIXTURES / ws / "warmstart.json").write_text(json.dumps(report, indent=2) + "\n")
    return FIXTURES / ws


# ---------------------------------------------------------------------------------- comparing
def diff(expected: list[dict], got: list[dict], rel: float = REL_TOL, abs_: float = ABS_TOL) -> list[str]:
    """Every (step, key) whose value differs beyond the tolerance, or is present in only one."""
    out = []
    if len(expected) != len(got):
        out.append(f"{len(expected)} records expected, {len(got)} logged")
    for i, (e, g) in enumerate(zip(expected, got)):
        step = e.get("step", i)
        for key in sorted(set(e) | set(g)):
            if key not in g:
                out.append(f"step {step}: {key} missing (expected {e[key]!r})")
            elif key not in e:
                out.append(f"step {step}: {key} new ({g[key]!r})")
            elif not _close(e[key], g[key], rel, abs_):
                out.append(f"step {step}: {key} {e[key]!r} -> {g[key]!r}")
    return out


def deviation(expected: list[dict], got: list[dict], abs_: float = ABS_TOL) -> tuple[float, str]:
    """The smallest relative tolerance that `diff` would pass with this absolute floor: the largest
    |a - b| / max(|a|, |b|) over the numbers that differ by more than abs_, and where it is."""
    worst, where = 0.0, ""
    for e, g in zip(expected, got):
        for key in set(e) & set(g):
            a, b = e[key], g[key]
            if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
                if abs(a - b) > abs_:
                    r = abs(a - b) / max(abs(a), abs(b))
                    if r > worst:
                        worst, where = r, f"step {e.get('step')}: {key} {a!r} vs {b!r}"
    return worst, where


def _close(a, b, rel, abs_) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(a, b, rel_tol=rel, abs_tol=abs_)
    return a == b


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*")
    ap.add_argument("--check", action="store_true", help="replay the stored rollouts and compare; write nothing")
    ap.add_argument("--fixtures", action="store_true", help="rebuild the warm-start fixtures named (default: all)")
    args = ap.parse_args(argv)
    if args.fixtures:
        for ws in args.names or list(WARM_STARTS):
            print(f"{ws}: {build_fixture(ws)}")
        return 0
    RECORDS.mkdir(exist_ok=True)
    bad = 0
    for name in args.names or list(RUNS):
        if args.check:
            expected = json.loads((RECORDS / f"{name}.json").read_text())
            got, _ = record(name, replay=load_rollouts(name))
            d = diff(expected, got)
            worst, where = deviation(expected, got)
            print(
                f"{name}: {'unchanged' if not d else f'{len(d)} differences'}; largest relative deviation "
                f"beyond {ABS_TOL:g} absolute: {worst:.2e} ({where or 'none'})"
            )
            for line in d:
                print("   ", line)
            bad += bool(d)
        else:
            got, calls = record(name)
            (RECORDS / f"{name}.json").write_text(json.dumps(got, indent=1) + "\n")
            torch.save(calls, rollouts_path(name))
            print(f"{name}: {len(got)} records, {len(calls)} generate calls -> {RECORDS / name}.*")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
