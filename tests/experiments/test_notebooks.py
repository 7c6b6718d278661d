"""The analysis notebooks (analysis/<study>.py) run end to end on FABRICATED study folders.

TEST FIXTURES: the metrics.jsonl / groups.jsonl / eval.json / cells.json written here are
made up (no training): deterministic numbers with the keys and layout the trainer writes,
so that each notebook's every figure and its summary can be produced in seconds. They
are not results. The per-group advantage sums come from the real objective
(harness.objective.group_advantages), so the notebook's closed forms are checked against it.
"""

from __future__ import annotations

import json
import math
import random

import pytest
import torch
from study_helpers import REPO

from harness.experiment.render import make_figures
from harness.objective import ObjectiveConfig, group_advantages

EXPECTED = {
    "length_bias": ["regime", "probe", "lengths_train", "lengths_eval", "truncation_entropy", "incorrect_length_gap"],
    "difficulty_bias": [
        "regime",
        "probe",
        "abs_adv_vs_p",
        "grad_share_extreme",
        "group_std_hist",
        "accuracy_by_difficulty",
        "zero_variance",
    ],
    "demo": ["learning", "difficulty_probe"],
    "moe_stability": [
        "regime",
        "probe",
        "reward_eval",
        "clip_fraction",
        "mismatch",
        "router_disagreement",
        "grad_norm_entropy",
    ],
    "dpo_displacement": ["regime", "logps", "fixes_minus_dpo"],
    "clip_higher": ["regime", "entropy", "pass_at_1_length"],
    "passk": ["passk", "passk_delta"],
    "entropy": ["regime", "controls", "entropy", "pass_at_k"],
    "kl_leash": ["regime", "hacking", "truncation_corr", "held_out"],
}
NO_PROBE = {"dpo_displacement", "clip_higher", "passk", "entropy", "kl_leash"}  # studies without a `probe:` section
PROBE_KEYS = {  # what a fabricated probe batch holds per arm (the keys the probes record)
    "demo": [
        "eval/pass_at_1",
        "eval/pass_at_1/easy",
        "eval/pass_at_1/medium",
        "eval/pass_at_1/hard",
        "adv/share_extreme",
        "grad/share_extreme",
        "adv/closed_form_max_abs_err",
        "groups/zero_var_frac",
    ],
    "length_bias": [
        "eval/length/incorrect",
        "eval/length/correct",
        "eval/pass_at_1",
        "eval/length/truncated_frac",
        "agg/eos_share_incorrect",
        "agg/eos_share_correct",
    ],
    "difficulty_bias": [
        "eval/pass_at_1",
        "eval/pass_at_1/easy",
        "eval/pass_at_1/medium",
        "eval/pass_at_1/hard",
        "adv/share_extreme",
        "grad/share_extreme",
        "adv/closed_form_max_abs_err",
        "groups/zero_var_frac",
    ],
    "moe_stability": ["eval/pass_at_1", "clip/frac", "grad/norm_max", "grad/norm"],
}


def _write_probe(d, name, arms):
    """A fabricated probe.json (made-up numbers), summarised by the real harness.probes code."""
    import importlib

    from harness.probes import PROBES, write_probe
    from harness.probes.engine import Arm, ProbeResult

    mod = importlib.import_module(f"harness.probes.{PROBES[name]}")
    rng = random.Random(5)
    arm_objs = [Arm(a, None) for a in arms]

    def result():
        res = ProbeResult(base={k: 0.5 for k in PROBE_KEYS[name]})
        for _ in range(4):
            res.per_batch.append({a: {k: rng.uniform(0.1, 0.9) for k in PROBE_KEYS[name]} for a in arms})
            res.batch.append({k: rng.uniform(0.01, 0.5) for k in getattr(mod, "STAT_KEYS", ())})
        return res

    res = {"0.0": result(), "0.5": result()} if name == "moe_stability" else result()
    write_probe(
        d / "probe.json",
        name,
        "fixture",
        arm_objs,
        {"batches": 4, "probe_prompts": 8, "probe_samples": 2},
        res,
        mod.summarize(res, arm_objs),
        1.0,
    )


STEPS = 6  # train steps 0..5; the final record (step 6) holds the eval of the trained policy


def _write_study(d, name, cells, seeds):
    for c in cells:
        c["run_dir"] = f"results/{name}/fixture/runs/{c['id']}"  # relative, as the Snakefile writes it
    (d / "cells.json").write_text(json.dumps(cells))
    (d / "study.json").write_text(
        json.dumps(
            {
                "name": name,
                "scale": "fixture",
                "experiment": f"{name}/fixture",
                "axes": [k for k in cells[0]["axes"]],
                "seeds": seeds,
            }
        )
    )


def _run(d, cid, metrics, config, eval_json=None, groups=None):
    run = d / "runs" / cid
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in metrics))
    (run / "config.yaml").write_text(json.dumps(config))  # JSON is YAML
    if eval_json is not None:
        (run / "eval.json").write_text(json.dumps(eval_json))
    if groups is not None:
        (run / "groups.jsonl").write_text("".join(json.dumps(g) + "\n" for g in groups))


def _eval(step, base, rng):
    return {
        "eval/pass_at_1": base + 0.02 * step + rng.uniform(0, 0.02),
        "eval/length/correct": 20 + rng.uniform(0, 2),
        "eval/length/incorrect": 40 + step + rng.uniform(0, 3),
        "eval/length/truncated_frac": 0.3,
        "eval/pass_at_1/easy": 0.8,
        "eval/pass_at_1/medium": 0.5,
        "eval/pass_at_1/hard": base,
    }


def fixture_length_bias(d):
    cells = []
    for a, (arm, drift) in enumerate((("grpo", 3.0), ("dr_grpo", 0.0), ("dapo", 1.0))):
        for seed in (1, 2):
            rng = random.Random(seed * 31 + a)
            cid = f"preset={arm}__seed={seed}"
            recs = []
            for st in range(STEPS + 1):
                r = {"step": st}
                if st % 3 == 0 or st == STEPS:
                    r.update(_eval(st, 0.2, rng))
                if st < STEPS:
                    r.update(
                        {
                            "reward/accuracy": 0.2 + 0.03 * st + 0.01 * a,
                            "length/correct": 25 + rng.uniform(-1, 1),
                            "length/incorrect": 50 + drift * st + rng.uniform(-2, 2),
                            "length/truncated_frac": 0.4 - 0.02 * st,
                            "entropy": 0.8 - 0.05 * st,
                        }
                    )
                    if st == 2 and seed == 2:
                        r["length/correct"] = float("nan")  # a step with no correct answer
                recs.append(r)
            _run(d, cid, recs, {"objective": {"preset": arm}}, _eval(STEPS, 0.25, rng))
            cells.append(
                {"id": cid, "variant": f"preset={arm}", "axes": {"objective.preset": arm, "seed": seed}, "seed": seed}
            )
    _write_study(d, "length_bias", cells, [1, 2])
    _write_probe(d, "length_bias", ["grpo", "dr_grpo", "dapo"])


def fixture_demo(d):
    """One GRPO cell with a paired rise in summary.json, and a probe.json."""
    rng = random.Random(3)
    cid = "preset=grpo__seed=1"
    recs = [
        {
            "step": st,
            **({"reward/accuracy": 0.5 + 0.01 * st} if st < STEPS else {}),
            **(_eval(st, 0.45, rng) if st in (0, STEPS) else {}),
        }
        for st in range(STEPS + 1)
    ]
    _run(d, cid, recs, {"objective": {"preset": "grpo"}}, _eval(STEPS, 0.5, rng))
    (d / "runs" / cid / "summary.json").write_text(
        json.dumps(
            {
                "paired_rise": {
                    "from_step": 0,
                    "to_step": STEPS,
                    "prompts": 512,
                    "delta_pass_at_1": 0.04,
                    "ci95": [0.03, 0.05],
                    "p_le_0": 0.0,
                }
            }
        )
    )
    _write_study(
        d,
        "demo",
        [{"id": cid, "variant": "preset=grpo", "axes": {"objective.preset": "grpo", "seed": 1}, "seed": 1}],
        [1],
    )
    _write_probe(d, "demo", ["group_std", "none", "batch_std"])


def fixture_difficulty_bias(d):
    G, N = 8, 6
    cells = []
    for a, scale in enumerate(("group_std", "none", "batch_std")):
        obj_cfg = {"baseline": "group_mean", "scale": scale, "std": "population", "batch_std_of": "reward"}
        obj = ObjectiveConfig.preset("grpo", scale=scale, std="population", kl_coef=0.0)
        for seed in (1, 2):
            rng = random.Random(seed * 7 + a)
            cid = f"scale={scale}__seed={seed}"
            recs, groups = [], []
            for st in range(STEPS + 1):
                r = {"step": st}
                if st % 3 == 0 or st == STEPS:
                    r.update(_eval(st, 0.1, rng))
                if st < STEPS:
                    ks = [rng.choice([0, 1, 2, 4, 6, 7, 8]) for _ in range(N)]
                    rewards = torch.tensor([1.0 if j < k else 0.0 for k in ks for j in range(G)])
                    adv = group_advantages(obj, rewards, G).view(N, G)
                    for i, k in enumerate(ks):
                        p = k / G
                        groups.append(
                            {
                                "step": st,
                                "group": i,
                                "difficulty": ("easy", "medium", "hard")[i % 3],
                                "G": G,
                                "k": k,
                                "p": p,
                                "reward_mean": p,
                                "reward_std": math.sqrt(p * (1 - p)),
                                "abs_adv_sum": float(adv[i].abs().sum()),
                            }
                        )
                    r.update(
                        {
                            "reward/accuracy": sum(ks) / (N * G),
                            "groups/zero_var_frac": sum(k in (0, G) for k in ks) / N,
                            "adv/share_extreme": rng.uniform(0.2, 0.5),
                        }
                    )
                    if st % 2 == 0:
                        r["grad/share_extreme"] = (
                            rng.uniform(0.3, 0.6) if scale == "group_std" else rng.uniform(0.1, 0.4)
                        )
                recs.append(r)
            _run(d, cid, recs, {"objective": obj_cfg}, _eval(STEPS, 0.15, rng), groups)
            cells.append(
                {"id": cid, "variant": f"scale={scale}", "axes": {"objective.scale": scale, "seed": seed}, "seed": seed}
            )
    _write_study(d, "difficulty_bias", cells, [1, 2])
    _write_probe(d, "difficulty_bias", ["group_std", "none", "batch_std"])


def fixture_moe_stability(d, noises=(0.0, 0.5), noise_axis=True):
    """One seed (the n=1 path); the router/* metrics are NOT logged (the 'absent' path).
    noise_axis=False: the router noise is fixed by the scale (in each run's config, as in the
    shipped study), not an axis of the cells."""
    cells = []
    for noise in noises:
        for a, arm in enumerate(("grpo", "grpo_r3", "gspo")):
            rng = random.Random(int(noise * 10) + a)
            cid = f"arm={arm}__router_noise={noise}__seed=1"
            recs = []
            for st in range(STEPS + 1):
                r = {"step": st}
                if st % 3 == 0 or st == STEPS:
                    r["eval/pass_at_1"] = 0.3 + 0.02 * st
                if st < STEPS:
                    r.update(
                        {
                            "reward/mean": 0.3 + 0.03 * st,
                            "clip/frac": (0.1 if arm == "gspo" else 1e-3) * (1 + st),
                            "mismatch/k3_kl": 1e-3 * (1 + noise) * rng.uniform(0.5, 1.5),
                            "mismatch/max_abs_dp": 0.2 + noise * 0.3,
                            "mismatch/ratio_gt2_frac": 0.01 * (1 + noise),
                            "grad/norm_max": 1.0 + (8.0 if st == 3 and arm == "grpo" else 0.0),
                            "entropy": 0.5,
                        }
                    )
                    if st == 0:
                        r["clip/frac"] = 0.0  # not drawable on the log axis
                recs.append(r)
            _run(
                d,
                cid,
                recs,
                {"objective": {"preset": arm}, "rollout": {"router_noise": noise}},
                {"eval/pass_at_1": 0.4},
            )
            axes = {"arm": arm, "objective.preset": arm, "seed": 1}
            if noise_axis:
                axes["rollout.router_noise"] = noise
            cells.append({"id": cid, "variant": f"arm={arm}__router_noise={noise}", "seed": 1, "axes": axes})
    _write_study(d, "moe_stability", cells, [1])
    _write_probe(d, "moe_stability", ["grpo", "grpo_r3", "gspo"])


def _rise(d, cid, delta, to_step=STEPS):
    (d / "runs" / cid / "summary.json").write_text(
        json.dumps(
            {
                "paired_rise": {
                    "from_step": 0,
                    "to_step": to_step,
                    "prompts": 512,
                    "delta_pass_at_1": delta,
                    "ci95": [delta - 0.01, delta + 0.01],
                    "p_le_0": 0.0,
                }
            }
        )
    )


def fixture_dpo_displacement(d, arms=("dpo", "rpo", "dpo_shift"), shift_slopes=(-0.02, -0.03)):
    """dpo: the chosen answers' log-prob falls 0.1 nats per step; rpo: it rises 0.05 per step;
    dpo_shift: it changes by shift_slopes[seed - 1] per step; rejected falls in all three.
    Margin = beta * (chosen change - rejected change). Cells of an arm not in `arms` are listed
    in cells.json with no run folder (a folder where that arm was never run)."""
    cells = []
    for a, (arm, slope) in enumerate((("dpo", -0.1), ("rpo", 0.05), ("dpo_shift", None))):
        for seed in (1, 2):
            slope_c = shift_slopes[seed - 1] if slope is None else slope
            axes = {"arm": arm, "objective.dpo_sft_coef": float(a == 1), "seed": seed}
            cid = f"arm={arm}__seed={seed}"
            if arm not in arms:
                cells.append({"id": cid, "variant": f"arm={arm}", "seed": seed, "axes": axes})
                continue
            c0, r0 = -3.5 - 0.1 * seed, -6.0 - 0.1 * seed  # the same pairs per seed in both arms
            recs = []
            for st in range(STEPS + 1):
                r = {"step": st}
                if st % 2 == 0 or st == STEPS:
                    dc, dr = slope_c * st, -0.5 * st
                    r.update(
                        {
                            "eval/pairs/logps_chosen": c0 + dc,
                            "eval/pairs/logps_rejected": r0 + dr,
                            "eval/pairs/margin": 0.1 * (dc - dr),
                            "eval/pass_at_1": 0.15 + 0.005 * st,
                        }
                    )
                if st < STEPS:
                    r.update({"loss/policy": 0.69 - 0.02 * st, "logps/chosen": c0, "logps/rejected": r0})
                recs.append(r)
            _run(
                d,
                cid,
                recs,
                {"objective": {"preset": "dpo", "dpo_sft_coef": float(a == 1)}},
                {"eval/pass_at_1": 0.16 + 0.01 * a},
            )
            pairs = [
                {"prompt": "2*2=?\n", "chosen": "2*2=4\nAnswer: 4", "rejected": "2*2=8\nAnswer: 8"},
                {"prompt": "8-7=?\n", "chosen": "8-7=1\nAnswer: 1", "rejected": "8-7=0\nAnswer: 0"},
            ]
            (d / "runs" / cid / "pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs))
            _rise(d, cid, 0.01)
            cells.append({"id": cid, "variant": f"arm={arm}", "seed": seed, "axes": axes})
    _write_study(d, "dpo_displacement", cells, [1, 2])


def fixture_clip_higher(d):
    """symmetric: entropy falls 0.02 nats per step; clip_higher: 0.005 per step."""
    cells = []
    for a, (arm, eps, slope) in enumerate((("clip_higher", 0.28, 0.005), ("symmetric", 0.2, 0.02))):
        for seed in (1, 2):
            rng = random.Random(seed * 17 + a)
            cid = f"arm={arm}__seed={seed}"
            recs = []
            for st in range(STEPS + 1):
                r = {"step": st}
                if st in (0, STEPS):
                    r["eval/pass_at_1"] = 0.5 + 0.01 * st
                if st < STEPS:
                    r.update(
                        {
                            "entropy": 0.2 - slope * st + rng.uniform(-0.002, 0.002),
                            "clip/frac_high": 0.004 - 0.001 * a,
                            "clip/frac_low": 0.015,
                            "reward/accuracy": 0.5 + 0.01 * st,
                            "length/mean": 25.0,
                            "groups/kept": 32.0,
                            "groups/zero_var_frac": 0.3,
                        }
                    )
                recs.append(r)
            _run(d, cid, recs, {"objective": {"preset": "dapo", "eps_high": eps}}, {"eval/pass_at_1": 0.55})
            _rise(d, cid, 0.03)
            cells.append(
                {
                    "id": cid,
                    "variant": f"arm={arm}",
                    "seed": seed,
                    "axes": {"arm": arm, "objective.preset": "dapo", "objective.eps_high": eps, "seed": seed},
                }
            )
    _write_study(d, "clip_higher", cells, [1, 2])


ENTROPY_ARMS = {  # arm -> (preset, its control's metric and value)
    "clip_higher": ("dapo", None),
    "clip_cov": ("clip_cov", ("clip_cov/frac", 2e-4)),
    "kl_cov": ("kl_cov", ("kl_cov/frac", 2e-3)),
    "top_entropy": ("top_entropy", ("entropy/kept_frac", 0.2)),
    "adaptive": ("dapo", ("entropy/coef", None)),  # the coefficient grows 0.005 per step
}


def _entropy_record(arm, st, rng):
    """One fabricated train step: clip_higher's entropy falls 0.02 nats per step, every control's 0.005."""
    control = ENTROPY_ARMS[arm][1]
    r = {
        "entropy": 0.5 - (0.02 if arm == "clip_higher" else 0.005) * st,
        "reward/accuracy": 0.5 + 0.01 * st,
        "length/mean": 25.0 + rng.uniform(-1, 1),
        "groups/kept": 32.0,
        "groups/zero_var_frac": 0.3,
    }
    if control:
        r[control[0]] = 0.005 * st if control[1] is None else control[1]
    if arm != "kl_cov":  # KL-Cov has no clip
        r["clip/frac_high"] = 0.004 + 0.001 * (arm == "clip_cov")
    return r


def fixture_entropy(d):
    """5 arms x 2 seeds. Held-out: 16 prompts x 8 samples; every control solves 1 more sample of 8 than
    clip_higher on 4 prompts (pass@1 +4/128 = +0.031 in each seed) and the same on the rest."""
    from harness.train.eval.evaluate import save_prompt_scores

    cells = []
    for a, (arm, (preset, _)) in enumerate(ENTROPY_ARMS.items()):
        for seed in (1, 2):
            rng = random.Random(seed * 13 + a)
            cid = f"arm={arm}__seed={seed}"
            recs = []
            for st in range(STEPS + 1):
                r = {"step": st}
                if st in (0, STEPS):
                    r.update({"eval/pass_at_1": 0.4 + 0.01 * st, "eval/pass_at_8": 0.7 + 0.01 * st})
                if st < STEPS:
                    r.update(_entropy_record(arm, st, rng))
                recs.append(r)
            obj = {"preset": preset, "use_adaptive_entropy": arm == "adaptive", "entropy_target": 0.4}
            cfg = {"objective": obj, "eval": {"n_samples": 8, "ks": [1, 8], "num_prompts": 16}}
            _run(d, cid, recs, cfg, {"eval/pass_at_1": 0.5})
            _rise(d, cid, 0.03)
            base = [(i % 9) / 8 for i in range(16)]
            for st in (0, STEPS):
                better = st == STEPS and arm != "clip_higher"
                scores = [min(1.0, p + 0.125) if better and i < 4 else p for i, p in enumerate(base)]
                save_prompt_scores(d / "runs" / cid, st, scores)
            axes = {"arm": arm, "objective.preset": preset, "seed": seed}
            cells.append({"id": cid, "variant": f"arm={arm}", "seed": seed, "axes": axes})
    # a cell still training (no summary.json): its numbers must stay out of every table
    cid = "arm=clip_cov__seed=3"
    _run(d, cid, [{"step": 0, "entropy": 9.0, "eval/pass_at_1": 0.9, "eval/pass_at_8": 0.9}], {"objective": {}})
    cells.append({"id": cid, "variant": "arm=clip_cov", "seed": 3, "axes": {"arm": "clip_cov", "seed": 3}})
    _write_study(d, "entropy", cells, [1, 2])


def passk_eval_json(rl_p, init_p, ks=(1, 2, 4, 8)):
    """An eval.json of `harness eval --vs-initial` whose per-prompt success chances are rl_p and
    init_p (pass@k = mean of 1 - (1 - p)^k; a made-up interval of +-0.02 around each difference)."""

    def pk(ps, k):
        return sum(1 - (1 - p) ** k for p in ps) / len(ps)

    ev = {"n_samples": ks[-1], "num_prompts": len(rl_p), "initial": {}}
    for k in ks:
        for b in (None, "easy", "medium", "hard"):
            suffix = f"/{b}" if b else ""
            ev[f"eval/pass_at_{k}{suffix}"] = pk(rl_p, k)
            ev["initial"][f"eval/pass_at_{k}{suffix}"] = pk(init_p, k)
        delta = pk(rl_p, k) - pk(init_p, k)
        ev[f"delta/pass_at_{k}"] = delta
        ev[f"delta/pass_at_{k}/ci95"] = [delta - 0.02, delta + 0.02]
    return ev


def fixture_passk(d):
    """RL: p = 0.9 on half the prompts and 0 on the rest; warm start: 0.5 and 0.1. RL wins at
    k = 1 (0.45 vs 0.30) and k = 2 (0.495 vs 0.47), loses from k = 4 on (0.49995 vs 0.640)."""
    cells = []
    for seed in (1, 2):
        cid = f"arm=grpo__seed={seed}"
        recs = [
            {
                "step": st,
                **({"reward/accuracy": 0.5} if st < STEPS else {}),
                **({"eval/pass_at_1": 0.3 + 0.02 * st} if st in (0, STEPS) else {}),
            }
            for st in range(STEPS + 1)
        ]
        _run(d, cid, recs, {"objective": {"preset": "grpo"}}, passk_eval_json([0.9, 0.0] * 4, [0.5, 0.1] * 4))
        _rise(d, cid, 0.12)
        cells.append(
            {
                "id": cid,
                "variant": "arm=grpo",
                "seed": seed,
                "axes": {"arm": "grpo", "objective.preset": "grpo", "seed": seed},
            }
        )
    _write_study(d, "passk", cells, [1, 2])


KL_LEASH_ARMS = {  # arm -> per seed 1, 2, 3: (held-out pass@1 change, held-out reward-model score change), step 0 -> 30
    "rm_kl0": ((-0.10, -0.12, -0.14), (8.0, 9.0, 10.0)),  # proxy up, pass@1 down in every seed: hacking
    "rm_kl0.04": ((-0.09, -0.13, -0.13), (6.0, 7.5, 7.0)),  # pass@1 as rm_kl0's, proxy 1.5-3 lower: SLOWS
    "rm_kl0.1": ((-0.02, -0.05, -0.04), (3.0, 4.0, 3.5)),  # pass@1 0.07-0.10 above rm_kl0's: HOLDS
    "verifier_kl0": ((0.04, 0.05, 0.06), (0.5, 0.4, 0.6)),  # the control learns
    "verifier_kl0.04": ((0.045, 0.045, 0.055), (0.5, 0.4, 0.6)),  # within 0.005 of the control: no cost
    "verifier_kl0.1": ((0.02, 0.02, 0.03), (0.5, 0.4, 0.6)),  # 0.02-0.03 below the control: a cost
}
TRAIN_PROXY_SPREAD = {"rm_kl0.04": (0.1, 1.0, 2.0)}  # per seed: its train-batch proxy moves x this held-out change
KL_STEPS = 30  # train steps 0..29; held-out evals at 0, 10, 20 and 30 (the record of step 30 holds only the eval)


def _kl_leash_record(arm, st, p0, r0, dp, drm, seed):
    """One fabricated step: the held-out eval (steps 0, 10, 20, 30) moves linearly from (p0, r0) by
    (dp, drm) over the 30 steps; the train batch's verified accuracy follows it, and its proxy too, but
    in rm_kl0.04 spread over seeds (TRAIN_PROXY_SPREAD: by the train-batch proxy alone its interval
    would include 0, by the held-out score it does not)."""
    f = st / KL_STEPS
    spread = TRAIN_PROXY_SPREAD.get(arm, (1.0, 1.0, 1.0))[seed - 1]
    r = {"step": st}
    if st % 10 == 0:
        r.update({"eval/pass_at_1": p0 + dp * f, "eval/reward/rm": r0 + drm * f})
    if st < KL_STEPS:
        rm = arm.startswith("rm_")
        r.update(
            {
                "hacking/proxy": r0 + drm * spread * f + 0.1 * (st % 3),
                "hacking/verified": p0 + dp * f,
                "hacking/corr": -0.2 if rm else 0.3,
                "length/mean": 20.0 + (0.3 if rm else 0.0) * st,
                "length/truncated_frac": (0.3 if rm else 0.01) * f,
                "loss/kl": 0.001 * st,
            }
        )
    return r


def fixture_kl_leash(d, arms=KL_LEASH_ARMS):
    """`arms` (by default the 6 of the second design) x 3 seeds; held-out pass@1 at step 0 is 0.13 + 0.01 x seed
    and the reward-model score -2.5 - 0.1 x seed in every arm (same warm start and eval set per seed)."""
    cells = []
    for arm, (dps, drms) in arms.items():
        for seed, dp, drm in zip((1, 2, 3), dps, drms):
            cid = f"arm={arm}__seed={seed}"
            p0, r0 = 0.13 + 0.01 * seed, -2.5 - 0.1 * seed
            recs = [_kl_leash_record(arm, st, p0, r0, dp, drm, seed) for st in range(KL_STEPS + 1)]
            kl = float(arm.rsplit("kl", 1)[1])
            _run(d, cid, recs, {"objective": {"preset": "grpo", "kl_coef": kl}}, {"eval/pass_at_1": p0 + dp})
            _rise(d, cid, dp, to_step=KL_STEPS)
            axes = {"arm": arm, "objective.kl_coef": kl, "seed": seed}
            cells.append({"id": cid, "variant": f"arm={arm}", "seed": seed, "axes": axes})
    _write_study(d, "kl_leash", cells, [1, 2, 3])


KL_LEASH_VERDICTS = [  # what fixture_kl_leash must produce; t-intervals over 3 seeds (t = 4.30)
    "- rm_kl0: hacking APPEARS (held-out reward-model score change, step 0 → last eval, +9 [+6.52, +11.5] (n=3); "
    "held-out pass@1 rise -0.12 [-0.17, -0.0703] (n=3); train-batch proxy change, last quarter − step 0, "
    "+7.76 [+5.65, +9.87] (n=3), shown, not judged)",
    # the train-batch proxy's interval includes 0 here; the held-out score's does not: judged by the held-out one
    "- rm_kl0.04: hacking APPEARS (held-out reward-model score change, step 0 → last eval, +6.83 [+4.94, +8.73] "
    "(n=3); held-out pass@1 rise -0.117 [-0.174, -0.0593] (n=3); train-batch proxy change, last quarter − step 0, "
    "+6.37 [-7.78, +20.5] (n=3), shown, not judged)",
    "- rm_kl0.1: hacking does NOT appear (held-out reward-model score change, step 0 → last eval, +3.5 "
    "[+2.26, +4.74] (n=3); held-out pass@1 rise -0.0367 [-0.0746, +0.00128] (n=3);",
    "- the leash at kl_coef 0.04: SLOWS it (rm_kl0.04 − rm_kl0, paired by seed: final held-out pass@1 +0.00333 "
    "[-0.0254, +0.032] (n=3); held-out reward-model score at the end -2.17 [-4.06, -0.269] (n=3))",
    "- the leash at kl_coef 0.1: HOLDS it (rm_kl0.1 − rm_kl0, paired by seed: final held-out pass@1 +0.0833 "
    "[+0.0454, +0.121] (n=3); held-out reward-model score at the end -5.5 [-7.65, -3.35] (n=3))",
    "- the control learns? held-out pass@1 rise of verifier_kl0, step 0 → end: +0.05, 95% CI [+0.0252, +0.0748] "
    "over n=3 seeds: the interval excludes 0, the difference APPEARS (sign as shown). It learns.",
    "- COST in verified gain, final held-out pass@1, verifier_kl0.04 − verifier_kl0 (paired by seed): -0.00167, "
    "95% CI [-0.016, +0.0127] over n=3 seeds: the interval includes 0, the difference does NOT appear at this scale.",
    "- COST in verified gain, final held-out pass@1, verifier_kl0.1 − verifier_kl0 (paired by seed): -0.0267, "
    "95% CI [-0.041, -0.0123] over n=3 seeds: the interval excludes 0, the difference APPEARS (sign as shown).",
]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_notebook_makes_its_figures(tmp_path, monkeypatch, name):
    d = tmp_path / "results" / name / "fixture"
    d.mkdir(parents=True)
    globals()[f"fixture_{name}"](d)
    monkeypatch.chdir(tmp_path)  # cells.json's run_dir is relative to here, as after a Snakemake run
    out = make_figures(d, d / "figures", notebook=str(REPO / "analysis" / f"{name}.py"), log_mlflow=False)
    pngs = sorted(p.stem for p in out.glob("*.png"))
    assert pngs == sorted(EXPECTED[name])
    assert all(p.stat().st_size > 10_000 for p in out.glob("*.png"))  # not blank canvases
    summary = (out / "summary.md").read_text()
    assert summary.startswith(f"# {name} (fixture)")
    if name == "length_bias":  # grpo's fabricated incorrect answers grow 3 tokens/step faster than dr_grpo's
        assert (
            "- train, last quarter, grpo − dr_grpo: +14 tokens, 95% CI [+11.4, +16.6] over n=2 seeds: the interval "
            "excludes 0, the difference APPEARS" in summary
        )
    if name == "difficulty_bias":  # the notebook's closed forms agree with the objective's advantages
        rows = [
            line
            for line in summary.splitlines()
            if line.startswith("| group_std") or line.startswith("| none") or line.startswith("| batch_std")
        ]
        assert len(rows) == 3
        errs = [float(r.rstrip(" |").split("|")[-1].split()[0]) for r in rows]
        assert max(errs) < 1e-5, rows
    if name not in NO_PROBE:
        assert "## Probe" in summary
    if name == "dpo_displacement":  # dpo's chosen log-prob falls, rpo's rises (fabricated slopes)
        assert (
            "- dpo: change of log π(chosen), step 0 → end: -0.6 nats, 95% CI [-0.6, -0.6] over n=2 seeds: the "
            "interval excludes 0, the difference APPEARS" in summary
        )
        assert "rpo − dpo, log π(chosen) at the end (same seed): +0.9" in summary
        # dpo_shift's chosen log-prob: -0.12 and -0.18 at the end, dpo's -0.6: falls less, still below 0 on average
        assert (
            "| dpo_shift − dpo | log π(chosen) at the end (nats) | +0.48 / +0.42 | +0.45 [+0.0688, +0.831] (n=2) |"
            in summary
        )
        assert "- dpo_shift: keeps the chosen log-prob from falling: PARTIAL: falls less than under dpo;" in summary
        assert "Not run in this folder" not in summary
    if name == "clip_higher":  # symmetric loses 0.015 nats/step more entropy than clip_higher
        assert "entropy, last quarter, clip_higher − symmetric: +0.06" in summary
    if name == "entropy":  # clip_higher loses 0.015 nats/step more; each control +4/128 pass@1 per seed
        assert "- entropy, last quarter of steps, clip_cov − clip_higher: +0.0675 nats" in summary
        assert "| clip_cov | 1 | +0.031 [" in summary and "| adaptive | 2 | +0.031 [" in summary
        assert "- clip_higher: entropy change, step 0 → last quarter (< 0: it falls): -0.09 nats" in summary
        assert "- clip_cov: share of tokens whose gradient Clip-Cov detached (`clip_cov/frac`)" in summary
        assert "α moves in 2 of 2 seeds" in summary
        assert "10 of 11 cells finished (left out, unfinished: arm=clip_cov__seed=3)" in summary
        assert "| clip_cov | 0.5 ± 0 (n=2) | 0.477 ± 0 (n=2) |" in summary  # the unfinished seed 3 left out
    if name == "passk":  # RL wins at k = 1, 2 and loses from k = 4 (closed forms in fixture_passk)
        assert "pass@1, grpo − warm start (mean over seeds of the per-seed paired difference): +0.15" in summary
        assert "- pass@8, grpo − warm start (mean over seeds of the per-seed paired difference): -0.283" in summary
        assert "smallest k where the mean difference is <= 0: 4" in summary
    if name == "kl_leash":  # judged by the held-out eval (KL_LEASH_ARMS), by the criteria of the study file
        for line in KL_LEASH_VERDICTS:
            assert line in summary, line
    if name == "demo":
        assert "grpo, seed 1: held-out pass@1 rise +0.040 [+0.030, +0.050]" in summary and "learns" in summary
    elif name != "kl_leash":  # kl_leash's regime is its reward model's (no reward model folder here)
        assert "## Regime (reference arm alone)" in summary
    if name == "moe_stability":
        assert "router/disagree_rollout_train" in summary.split("Not logged by these runs")[1]
        assert "n=1 seed" in summary


def test_moe_notebook_names_a_router_noise_fixed_by_the_scale(tmp_path, monkeypatch):
    """The shipped study sets rollout.router_noise per scale, not as an axis: the notebook reads
    it from the runs' config and labels every panel and verdict with it (not 'σ = None')."""
    d = tmp_path / "results" / "moe_stability" / "fixture"
    d.mkdir(parents=True)
    fixture_moe_stability(d, noises=(0.5,), noise_axis=False)
    monkeypatch.chdir(tmp_path)
    out = make_figures(d, d / "figures", notebook=str(REPO / "analysis" / "moe_stability.py"), log_mlflow=False)
    summary = (out / "summary.md").read_text()
    assert "σ = None" not in summary
    assert "σ = 0.5: final pass@1, gspo − grpo" in summary


CORRECTION_METRICS = {  # what each rollout-correction arm logs (harness/objective/rollout_correction.py)
    "grpo_tis": {"rollout_is/frac_truncated": 0.01, "rollout_is/weight_mean": 0.98},
    "grpo_mis": {"rollout_is/frac_masked": 0.2, "rollout_is/seq_frac_masked": 0.05, "rollout_is/weight_mean": 0.6},
    "icepop": {"rollout_is/frac_masked": 0.02, "rollout_is/seq_frac_masked": 0.3},
    "grpo_opsm": {"off_policy_mask/frac_masked": 0.1},
}


def fixture_moe_corrections(d):
    """The 7-arm study at router noise 0.5 (fixed by the scale), 3 seeds, where grpo_r3 and gspo were
    never run (no run folder: the session's 15 cells). grpo spikes twice per seed (peak 10 x seed at
    step 3, 5 at step 4); every correction arm's norm is 1 throughout, its final pass@1 0.02 above
    grpo's of the same seed, its k3 KL and router disagreement grpo's."""
    cells = []
    for arm in ("grpo", "grpo_r3", "gspo", "grpo_tis", "grpo_mis", "icepop", "grpo_opsm"):
        for seed in (1, 2, 3):
            cid = f"arm={arm}__seed={seed}"
            cells.append({"id": cid, "variant": f"arm={arm}", "seed": seed, "axes": {"arm": arm, "seed": seed}})
            if arm in ("grpo_r3", "gspo"):
                continue
            recs = []
            for st in range(STEPS + 1):
                r = {"step": st}
                if st in (0, STEPS):
                    r["eval/pass_at_1"] = 0.3 + 0.01 * st
                if st < STEPS:
                    spike = {3: 10.0 * seed, 4: 5.0}.get(st, 1.0) if arm == "grpo" else 1.0
                    r.update(
                        {
                            "reward/mean": 0.3,
                            "clip/frac": 1e-3 * seed,
                            "mismatch/k3_kl": 0.06 + 0.01 * seed,
                            "router/disagree_rollout_train": 0.13,
                            "grad/norm_max": spike,
                            "entropy": 0.2,
                            **CORRECTION_METRICS.get(arm, {}),
                        }
                    )
                recs.append(r)
            final = 0.40 + 0.01 * seed + (0.0 if arm == "grpo" else 0.02)
            _run(
                d,
                cid,
                recs,
                {"objective": {"preset": "grpo"}, "rollout": {"router_noise": 0.5}},
                {"eval/pass_at_1": final},
            )
            _rise(d, cid, 0.05 + (0.0 if arm == "grpo" else 0.01 * seed))
    _write_study(d, "moe_stability", cells, [1, 2, 3])


def test_moe_notebook_compares_the_corrections_and_names_cells_not_run(tmp_path, monkeypatch):
    """A folder where some cells were never run (this session's 15 of 21): the notebook summarises the
    complete cells, names the others, and pairs each rollout-correction arm with grpo by seed."""
    d = tmp_path / "results" / "moe_stability" / "fixture"
    d.mkdir(parents=True)
    fixture_moe_corrections(d)
    monkeypatch.chdir(tmp_path)
    out = make_figures(d, d / "figures", notebook=str(REPO / "analysis" / "moe_stability.py"), log_mlflow=False)
    assert sorted(p.stem for p in out.glob("*.png")) == sorted(
        ["regime", "reward_eval", "clip_fraction", "mismatch", "router_disagreement", "grad_norm_entropy"]
        + ["correction", "corrections_paired"]
    )
    summary = (out / "summary.md").read_text()
    assert "15 cells" in summary
    missing = [f"arm={a}__seed={s}" for a in ("grpo_r3", "gspo") for s in (1, 2, 3)]
    assert (
        f"Not run in this folder, or not finished (no eval.json; left out of every number and figure): {', '.join(missing)}."
        in summary
    )
    assert "| grpo_r3 |" not in summary and "gspo −" not in summary  # no empty arm, no comparison without data
    for arm in CORRECTION_METRICS:
        assert (
            f"- σ = 0.5: steps with grad norm over 2, {arm} − grpo: -2, 95% CI [-2, -2] over n=3 seeds: the interval "
            "excludes 0, the difference APPEARS (sign as shown). Per seed: -2 / -2 / -2." in summary
        )
        assert f"- σ = 0.5: final pass@1, {arm} − grpo: +0.02, 95% CI [+0.02, +0.02] over n=3 seeds" in summary
        assert f"- σ = 0.5: rollout–train k3 KL, {arm} − grpo: +0, 95% CI [+0, +0] over n=3 seeds" in summary
        assert f"- σ = 0.5: router disagreement rollout–train, {arm} − grpo: +0" in summary
    assert "- σ = 0.5: peak grad norm, log10(icepop / grpo): -1.26, 95% CI [-1.86, -0.66] over n=3 seeds" in summary
    assert "Per seed: -1 / -1.3 / -1.48." in summary  # log10(1 / (10 x seed))
    assert summary.count("final pass@1, grpo_tis − grpo") == 1  # once, with the other paired numbers
    assert "Per seed: +0.01 / +0.02 / +0.03." in summary  # the paired rise, arm − grpo
    assert "| grpo | 10 / 20 / 30 | 2 / 2 / 2 |" in summary
    assert "| grpo_mis | – | 0.2 ± 0 (n=3): 0.2 / 0.2 / 0.2 |" in summary


@pytest.mark.parametrize(
    "shift_slopes, verdict",
    [
        ((0.01, 0.02), "APPEARS (falls less than under dpo, and its own change has mean >= 0"),
        ((-0.05, -0.051), "PARTIAL: falls less than under dpo (paired interval above 0), but still falls"),
        ((-0.1, -0.02), "DOES NOT APPEAR (the paired interval reaches 0 or below"),
    ],
)
def test_dpo_notebook_without_rpo_runs_names_them_and_judges_dpo_shift(tmp_path, monkeypatch, shift_slopes, verdict):
    """A rerun of dpo and dpo_shift alone (rpo's cells in cells.json, never run): the notebook names
    the cells not run, leaves rpo out, and compares dpo_shift with dpo by the study file's criteria."""
    d = tmp_path / "results" / "dpo_displacement" / "fixture"
    d.mkdir(parents=True)
    fixture_dpo_displacement(d, arms=("dpo", "dpo_shift"), shift_slopes=shift_slopes)
    monkeypatch.chdir(tmp_path)
    nb = str(REPO / "analysis" / "dpo_displacement.py")
    out = make_figures(d, d / "figures", notebook=nb, log_mlflow=False)
    assert sorted(p.stem for p in out.glob("*.png")) == sorted(EXPECTED["dpo_displacement"])
    summary = (out / "summary.md").read_text()
    assert "Not run in this folder (2 of 6 cells, left out): arm=rpo__seed=1, arm=rpo__seed=2" in summary
    assert "rpo" not in summary.replace("arm=rpo__seed", "")  # no row, verdict or 'no data' line for rpo
    assert f"- dpo_shift: keeps the chosen log-prob from falling: {verdict}" in summary
    assert "| dpo_shift − dpo | margin at the end (β × nats) |" in summary


@pytest.mark.parametrize("design", ["control_flat", "first"])
def test_kl_leash_notebook_reads_no_cost_without_a_learning_control(tmp_path, monkeypatch, design):
    """control_flat: the 6 arms, but verifier_kl0's held-out pass@1 rise spans 0 over seeds: the cost lines
    say it is not read. first: the first design's 4 arms (verifier_kl0 alone): no cost line can be drawn, a
    note says so, and the hacking and leash verdicts are still read."""
    arms = dict(KL_LEASH_ARMS)
    if design == "control_flat":
        arms["verifier_kl0"] = ((0.01, -0.01, 0.0), (0.5, 0.4, 0.6))
    else:
        arms = {a: v for a, v in arms.items() if a in ("rm_kl0", "rm_kl0.04", "rm_kl0.1", "verifier_kl0")}
    d = tmp_path / "results" / "kl_leash" / "fixture"
    d.mkdir(parents=True)
    fixture_kl_leash(d, arms)
    monkeypatch.chdir(tmp_path)
    out = make_figures(d, d / "figures", notebook=str(REPO / "analysis" / "kl_leash.py"), log_mlflow=False)
    assert sorted(p.stem for p in out.glob("*.png")) == sorted(EXPECTED["kl_leash"])
    summary = (out / "summary.md").read_text()
    assert KL_LEASH_VERDICTS[0] in summary and KL_LEASH_VERDICTS[4] in summary  # hacking and the leash
    if design == "control_flat":
        assert "the interval includes 0, the difference does NOT appear at this scale. It did NOT learn" in summary
        for arm in ("verifier_kl0.04", "verifier_kl0.1"):
            assert (
                f"- COST in verified gain, final held-out pass@1, {arm} − verifier_kl0 (paired by seed): not read: "
                "the control did not learn." in summary
            )
    else:
        assert "It learns." in summary
        assert (
            "- COST in verified gain: not read: no verifier arm with kl_coef > 0 in this folder (first design)."
            in summary
        )
        assert "verifier_kl0.1" not in summary
