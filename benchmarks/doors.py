"""Try every door the harness opens as a new user would: each bad input through `harness`'s own
entry point (`harness.cli.main`, in this process; the cases whose code kills its process in a child).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/doors.py [--only SUBSTRING] > doors.md

Prints one markdown row per try: the door, the input, the exit status and the line the user sees (a
traceback shows as `TRACEBACK <type>: <message>`). The expected outcome of every bad input: exit 2 with
one line naming the key, file or option, the value and what is allowed, before any model loads; or at run
time one line and an exit status other than 0. The valid controls must exit 0. docs/faults.md ("New doors,
tried") holds the table of this script's output before and after the fixes.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SMOKE = "experiments/runs/smoke.yaml"
TINY = [
    "warm_start.enabled=false",
    "train.steps=1",
    "train.prompts_per_step=2",
    "train.group_size=2",
    "rollout.max_new_tokens=4",
    "eval.num_prompts=2",
    "eval.n_samples=1",
    "eval.ks=[1]",
    "eval.every=0",
    "tracking.mlflow=false",
]


def fixtures(d: Path) -> dict:
    """The files the tries read: rows, reward-model folders good and bad, pairs files, a fit study, plugins."""
    from harness.models.registry import build_model, save_model
    from tests.experiments.fit_fixture import write_study
    from tests.tasks.conftest import gsm8k_rows, write_jsonl
    from tests.tasks.reward_models import tiny_reward_model

    f = {"rows": str(write_jsonl(d / "rows.jsonl", gsm8k_rows(20)))}
    f["rm"] = str(tiny_reward_model(d / "rm"))
    model, tok = build_model("tiny-dense", seed=0, overrides={"num_hidden_layers": 1})
    f["lm"] = str(save_model(model, tok, d / "lm"))
    garbage = tiny_reward_model(d / "garbage")
    (garbage / "model.safetensors").write_bytes(bytes(range(256)) * 16)  # its header length does not fit
    f["garbage"] = str(garbage)
    pairs = [{"prompt": f"{i}+1=?", "chosen": f"{i + 1} yes", "rejected": f"{i} no"} for i in range(16)]
    f["pairs"] = str(d / "pairs.jsonl")
    Path(f["pairs"]).write_text("".join(json.dumps(r) + "\n" for r in pairs))
    (d / "empty.jsonl").write_text("")
    (d / "latin1.jsonl").write_bytes(json.dumps(pairs[0]).replace("yes", "s\xed").encode("latin-1") + b"\n")
    (d / "wrongkeys.jsonl").write_text(json.dumps({"question": "1+1", "good": "2", "bad": "3"}) + "\n")
    (d / "afile").write_text("x")
    (d / "emptyrun").mkdir()
    (d / "emptyrun" / "samples.jsonl").write_text("")
    (d / "allright").mkdir()
    same = [{"step": 0, "prompt": f"{i}+1=?", "completion": f"{i + 1}", "correct": True} for i in range(4)]
    (d / "allright" / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in same))
    (d / "badsample").mkdir()
    (d / "badsample" / "samples.jsonl").write_text(json.dumps({"prompt": "1", "completion": 2, "correct": 1}) + "\n")
    write_study(d / "study", {"grpo": {"r0": 0.2, "a": 0.8, "b": 1.5, "c_mid": 8000.0}})
    plug = d / "plug"
    plug.mkdir()
    (plug / "exit_plugin.py").write_text("import os\nos._exit(3)\n")
    (plug / "sysexit_plugin.py").write_text("import sys\nsys.exit(0)\n")
    (plug / "exit_rewards.py").write_text("import os\nos._exit(3)\n\ndef f(completion, **kw):\n    return 1.0\n")
    f["plug"] = str(plug)
    os.mkfifo(d / "pipe.jsonl")
    (d / "zero.jsonl").symlink_to("/dev/zero")
    (d / "piperun").mkdir()
    os.mkfifo(d / "piperun" / "samples.jsonl")
    return {**f, "d": str(d)}


def data(f: dict) -> list[str]:
    return ["task.name=dataset", f"task.data={json.dumps({'train': f['rows'], 'prompt_key': 'question'})}"]


CFG = ["config", SMOKE, *TINY]


def knob_tries(f: dict) -> list[tuple[str, list[str]]]:
    """The zoo's knobs and the scale keys: bad values and bad combinations (`harness config`)."""
    cfg = CFG
    obj = [
        # zoo knobs: bad values and bad combinations
        ("rollout_is", [*cfg, "objective.rollout_is=token"]),
        ("rollout_is_clip_max", [*cfg, "objective.rollout_is=token_truncate", "objective.rollout_is_clip_max=-1"]),
        ("rollout_is_clip_min", [*cfg, "objective.rollout_is=token_mask", "objective.rollout_is_clip_min=-0.5"]),
        (
            "rollout_is_clip_min > max",
            [
                *cfg,
                "objective.rollout_is=token_mask",
                "objective.rollout_is_clip_min=5",
                "objective.rollout_is_clip_max=2",
            ],
        ),
        ("rollout_is_clip_max without rollout_is", [*cfg, "objective.rollout_is_clip_max=2"]),
        ("tis_cap", [*cfg, "objective.tis_cap=0"]),
        ("tis_cap + rollout_is", [*cfg, "objective.tis_cap=2", "objective.rollout_is=token_mask"]),
        ("rollout_is, vLLM sampler", [*cfg, "objective.rollout_is=token_mask", "rollout.backend=vllm"]),
        ("rollout_is, no sampler log-probs", [*cfg, "objective.rollout_is=token_mask", "rollout.backend=trl"]),
        ("off_policy_mask_threshold", [*cfg, "objective.off_policy_mask_threshold=-0.1"]),
        ("off_policy_mask_threshold str", [*cfg, "objective.off_policy_mask_threshold=abc"]),
        ("m2_threshold", [*cfg, "objective.m2_threshold=0"]),
        ("m2_threshold nan", [*cfg, "objective.m2_threshold=.nan"]),
        ("clip vespo knob", [*cfg, "objective.clip=vespo", "objective.vespo_lambda_pos=0"]),
        ("vespo knob without vespo", [*cfg, "objective.vespo_k_pos=1"]),
        ("clip gppo knob", [*cfg, "objective.clip=gppo", "objective.gppo_beta1=-1"]),
        ("clip dro knob", [*cfg, "objective.clip=dro", "objective.dro_beta=0"]),
        ("clip dro no beta", [*cfg, "objective.clip=dro"]),
        ("clip_cov ratio", [*cfg, "objective.clip=clip_cov", "objective.clip_cov_ratio=2"]),
        ("clip_cov lb > ub", [*cfg, "objective.clip=clip_cov", "objective.clip_cov_lb=5", "objective.clip_cov_ub=1"]),
        ("kl_cov ratio", [*cfg, "objective.clip=kl_cov", "objective.kl_cov_ratio=0"]),
        ("kl_cov + ratio sequence", [*cfg, "objective.clip=kl_cov", "objective.ratio=sequence"]),
        ("clip_cov + ratio none", [*cfg, "objective.clip=clip_cov", "objective.ratio=none"]),
        ("delta <= 1", [*cfg, "objective.delta=0.5"]),
        ("delta with clip cispo", [*cfg, "objective.clip=cispo", "objective.delta=2"]),
        ("ratio subsentence span 0", [*cfg, "objective.ratio=subsentence", "objective.sspo_span=0"]),
        ("sspo_span 2.5", [*cfg, "objective.ratio=subsentence", "objective.sspo_span=2.5"]),
        ("sspo_span without subsentence", [*cfg, "objective.sspo_span=4"]),
        ("top_entropy_quantile 1.5", [*cfg, "objective.top_entropy_quantile=1.5"]),
        ("top_entropy_quantile 0", [*cfg, "objective.top_entropy_quantile=0"]),
        ("use_adaptive_entropy str", [*cfg, "objective.use_adaptive_entropy=maybe"]),
        (
            "entropy_coef_min > max",
            [
                *cfg,
                "objective.use_adaptive_entropy=true",
                "objective.entropy_coef_min=0.5",
                "objective.entropy_coef_max=0.1",
            ],
        ),
        ("entropy_target < 0", [*cfg, "objective.use_adaptive_entropy=true", "objective.entropy_target=-1"]),
        ("entropy knob without adaptive", [*cfg, "objective.entropy_target=0.5"]),
        ("entropy_agg", [*cfg, "objective.entropy_agg=mean"]),
        ("baseline remax + dynamic_sampling", [*cfg, "objective.baseline=remax", "objective.dynamic_sampling=true"]),
        ("baseline remax + group_size 1", [*cfg, "objective.baseline=remax", "train.group_size=1"]),
        ("baseline remax, vLLM", [*cfg, "objective.preset=remax", "rollout.backend=vllm"]),
        ("baseline remax, trl backend", [*cfg, "objective.preset=remax", "rollout.backend=trl"]),
        ("dpo_shift_lambda 2", [*cfg, "objective.preset=dpo", "objective.dpo_shift_lambda=2"]),
        ("dpo_shift_lambda on grpo", [*cfg, "objective.dpo_shift_lambda=0.5"]),
        (
            "dpo_shift_lambda + ipo",
            [*cfg, "objective.preset=dpo", "objective.dpo_loss_type=ipo", "objective.dpo_shift_lambda=0.5"],
        ),
        ("reward_combine", [*cfg, "task.reward_combine=mean"]),
        (
            "reward_combine one reward",
            [*cfg, *data(f), "task.rewards=[gsm8k]", "task.reward_combine=normalize_then_sum"],
        ),
        ("preset unknown", [*cfg, "objective.preset=icepops"]),
        ("preset icepop + clip_min", [*cfg, "objective.preset=icepop", "objective.rollout_is_clip_min=9"]),
        ("preset m2po, vLLM", [*cfg, "objective.preset=m2po", "rollout.backend=vllm"]),
        ("preset vespo + clip_ratio", [*cfg, "objective.preset=vespo", "objective.eps_high=0.3"]),
        ("preset luspo", [*cfg, "objective.preset=luspo", "objective.agg=token_mean"]),
        ("preset scalerl + dpo", [*cfg, "objective.preset=scalerl", "objective.dpo_beta=0.2"]),
        ("control: preset icepop", [*cfg, "objective.preset=icepop"]),
        ("control: clip_cov + top_entropy", [*cfg, "objective.clip=clip_cov", "objective.top_entropy_quantile=0.2"]),
    ]
    scale = [
        ("rollout.staleness -1", [*cfg, "rollout.staleness=-1"]),
        ("rollout.staleness huge", [*cfg, "rollout.staleness=100000"]),
        ("rollout.staleness 1.5", [*cfg, "rollout.staleness=1.5"]),
        ("rollout.staleness str", [*cfg, "rollout.staleness=two"]),
        ("rollout.staleness + ratio none", [*cfg, "rollout.staleness=2", "objective.ratio=none", "train.steps=4"]),
        ("rollout.staleness vLLM", [*cfg, "rollout.staleness=2", "rollout.backend=vllm", "train.steps=4"]),
        ("agg prompt_mean group 1", [*cfg, "objective.agg=prompt_mean", "train.group_size=1"]),
        ("zero_variance_filter str", [*cfg, "objective.zero_variance_filter=sometimes"]),
        ("zero_variance_filter + group 1", [*cfg, "objective.zero_variance_filter=true", "train.group_size=1"]),
        ("no_positive_resampling 0", [*cfg, "objective.no_positive_resampling=0"]),
        ("no_positive_resampling 1.5", [*cfg, "objective.no_positive_resampling=1.5"]),
        ("no_positive_resampling -1", [*cfg, "objective.no_positive_resampling=-1"]),
        ("no_positive_resampling generated task", [*cfg, "objective.no_positive_resampling=0.9"]),
        ("model.lm_head_fp32 str", [*cfg, "model.lm_head_fp32=yes please"]),
        ("model.lm_head_fp32 int", [*cfg, "model.lm_head_fp32=2"]),
    ]
    return obj + scale


def reward_model_tries(f: dict) -> list[tuple[str, list[str]]]:
    """task.rewards [{model: FOLDER}], model.critic_init, task.hacking_window."""
    cfg = CFG
    rm = f"{{model: {f['rm']}}}"
    rms = [
        ("rewards model missing folder", [*cfg, *data(f), f"task.rewards=[{{model: {f['d']}/nope}}]"]),
        ("rewards model non-classifier", [*cfg, *data(f), f"task.rewards=[{{model: {f['lm']}}}]"]),
        ("rewards model garbage weights", [*cfg, *data(f), f"task.rewards=[{{model: {f['garbage']}}}]"]),
        ("rewards model a file", [*cfg, *data(f), f"task.rewards=[{{model: {f['d']}/afile}}]"]),
        ("rewards model normalize bad", [*cfg, *data(f), f"task.rewards=[{{model: {f['rm']}, normalize: zscore}}]"]),
        ("rewards model micro_batch 0", [*cfg, *data(f), f"task.rewards=[{{model: {f['rm']}, micro_batch_size: 0}}]"]),
        ("rewards model weight str", [*cfg, *data(f), f"task.rewards=[{{model: {f['rm']}, weight: high}}]"]),
        ("rewards model, generated task", [*cfg, f"task.rewards=[{rm}]"]),
        ("critic_init missing", [*cfg, "objective.preset=ppo", f"model.critic_init={f['d']}/nope"]),
        ("critic_init non-classifier", [*cfg, "objective.preset=ppo", f"model.critic_init={f['lm']}"]),
        ("critic_init garbage", [*cfg, "objective.preset=ppo", f"model.critic_init={f['garbage']}"]),
        ("critic_init on grpo", [*cfg, f"model.critic_init={f['rm']}"]),
        ("hacking_window 0", [*cfg, *data(f), f"task.rewards=[gsm8k, {rm}]", "task.hacking_window=0"]),
        ("hacking_window -3", [*cfg, *data(f), f"task.rewards=[gsm8k, {rm}]", "task.hacking_window=-3"]),
        ("hacking_window str", [*cfg, *data(f), f"task.rewards=[gsm8k, {rm}]", "task.hacking_window=ten"]),
        ("control: rm + gsm8k", [*cfg, *data(f), f"task.rewards=[gsm8k, {rm}]"]),
    ]
    return rms


def command_tries(f: dict) -> list[tuple[str, list[str]]]:
    """`harness train-rm`, `harness fit`, `harness bench`: bad arguments."""
    out = f"{f['d']}/rm_out"
    trm = [
        ("train-rm pairs missing", ["train-rm", "--pairs", f"{f['d']}/nope.jsonl", "--out", out]),
        ("train-rm pairs empty", ["train-rm", "--pairs", f"{f['d']}/empty.jsonl", "--out", out]),
        ("train-rm pairs not UTF-8", ["train-rm", "--pairs", f"{f['d']}/latin1.jsonl", "--out", out]),
        ("train-rm pairs wrong keys", ["train-rm", "--pairs", f"{f['d']}/wrongkeys.jsonl", "--out", out]),
        ("train-rm pairs a folder", ["train-rm", "--pairs", f"{f['d']}/plug", "--out", out]),
        ("train-rm --out a file", ["train-rm", "--pairs", f["pairs"], "--out", f"{f['d']}/afile"]),
        ("train-rm --out under a file", ["train-rm", "--pairs", f["pairs"], "--out", f"{f['d']}/afile/x"]),
        ("train-rm --out a data folder", ["train-rm", "--pairs", f["pairs"], "--out", f"{f['d']}/plug"]),
        ("train-rm --run no pairs", ["train-rm", "--run", f"{f['d']}/emptyrun", "--out", out]),
        ("train-rm --run missing", ["train-rm", "--run", f"{f['d']}/nope", "--out", out]),
        ("train-rm --steps 0", ["train-rm", "--pairs", f["pairs"], "--out", out, "--steps", "0"]),
        ("train-rm --lr -1", ["train-rm", "--pairs", f["pairs"], "--out", out, "--lr", "-1"]),
        ("train-rm --lr nan", ["train-rm", "--pairs", f["pairs"], "--out", out, "--lr", "nan"]),
        ("train-rm --eval-fraction 1", ["train-rm", "--pairs", f["pairs"], "--out", out, "--eval-fraction", "1"]),
        ("train-rm --batch-size 0", ["train-rm", "--pairs", f["pairs"], "--out", out, "--batch-size", "0"]),
        ("train-rm --base bogus", ["train-rm", "--pairs", f["pairs"], "--out", out, "--base", "bogus-model"]),
        ("train-rm --base garbage", ["train-rm", "--pairs", f["pairs"], "--out", out, "--base", f["garbage"]]),
        ("train-rm --max-length 0", ["train-rm", "--pairs", f["pairs"], "--out", out, "--max-length", "0"]),
        ("train-rm --calibration-bins 0", ["train-rm", "--pairs", f["pairs"], "--out", out, "--calibration-bins", "0"]),
    ]
    study = f"{f['d']}/study"
    fit = [
        ("fit unknown study", ["fit", "nosuchstudy", "--no-mlflow"]),
        ("fit missing folder", ["fit", f"{f['d']}/nope", "--no-mlflow"]),
        ("fit --metric unknown", ["fit", study, "--no-mlflow", "--metric", "eval/pass_at_99"]),
        ("fit --compute bad", ["fit", study, "--no-mlflow", "--compute", "gpu_hours"]),
        ("fit --bootstrap 5", ["fit", study, "--no-mlflow", "--bootstrap", "5"]),
        ("fit --level 2", ["fit", study, "--no-mlflow", "--level", "2"]),
        ("fit --level 0", ["fit", study, "--no-mlflow", "--level", "0"]),
        ("fit --params -1", ["fit", study, "--no-mlflow", "--compute", "flops", "--params", "-1"]),
        ("fit --compute flops no params", ["fit", study, "--no-mlflow", "--compute", "flops"]),
        ("fit --reference unknown", ["fit", study, "--no-mlflow", "--reference", "arm=nope"]),
        ("fit --out a file", ["fit", study, "--no-mlflow", "--out", f"{f['d']}/afile"]),
    ]
    bench = ["bench", "--models", "tiny-dense", "--backends", "hf", "--no-trl", "--steps", "1", "--prompts", "2"]
    bn = [
        ("bench --warmup -1", [*bench, "--warmup", "-1"]),
        ("bench --warmup x", [*bench, "--warmup", "x"]),
        ("bench --warmup-max < warmup", [*bench, "--warmup", "3", "--warmup-max", "1"]),
        ("bench --steady-tol -0.1", [*bench, "--steady-tol", "-0.1"]),
        ("bench --steady-tol nan", [*bench, "--steady-tol", "nan"]),
        ("bench --fixed-length=1", [*bench, "--fixed-length=1"]),
        ("bench --profile x", [*bench, "--profile", "x"]),
        ("bench --lever-sets bogus", [*bench, "--lever-sets", "bogus"]),
    ]
    return trm + fit + bn


def run_tries(f: dict) -> list[tuple[str, list[str]]]:
    """Run time: `harness train` of the combinations that are accepted (an empty door: the command after the
    one above, in the same try)."""
    run, out = ["train", SMOKE, *TINY], f"{f['d']}/runs"
    rt = [
        ("train: staleness resumed with another k", [*run, "train.steps=2", "--out", f"{out}/k"]),
        ("", [*run, "train.steps=2", "rollout.staleness=1", "--out", f"{out}/k"]),
        (
            "train: remax + dynamic_sampling",
            [*run, "objective.preset=remax", "objective.dynamic_sampling=true", "--out", f"{out}/remax_ds"],
        ),
        (
            "train: kl_cov + ratio sequence",
            [*run, "objective.clip=kl_cov", "objective.ratio=sequence", "--out", f"{out}/klcov_seq"],
        ),
        ("train: top_entropy_quantile 0", [*run, "objective.top_entropy_quantile=0", "--out", f"{out}/te0"]),
        ("train: lm_head_fp32", [*run, "model.lm_head_fp32=true", "--out", f"{out}/fp32"]),
        (
            "train: rm + gsm8k, running normalisation",
            [*run, *data(f), f"task.rewards=[gsm8k, {{model: {f['rm']}, normalize: running}}]", "--out", f"{out}/rm"],
        ),
        (
            "train: critic_init (ppo)",
            [*run, "objective.preset=ppo", f"model.critic_init={f['rm']}", "--out", f"{out}/critic"],
        ),
        ("train: --out a file", [*run, "--out", f"{f['d']}/afile"]),
    ]
    return rt


def more_tries(f: dict) -> list[tuple[str, list[str]]]:
    """Combinations across sections, and code of the user's that exits on import (in a child process: SUB)."""
    cfg, rm = CFG, f"{{model: {f['rm']}}}"
    more = [
        ("rollout_is with DPO", [*cfg, "objective.preset=dpo", "objective.rollout_is=token_mask"]),
        ("m2_threshold with DPO", [*cfg, "objective.preset=dpo", "objective.m2_threshold=0.04"]),
        ("staleness with DPO", [*cfg, "objective.preset=dpo", "rollout.staleness=1"]),
        ("hacking_window 1", [*cfg, *data(f), f"task.rewards=[gsm8k, {rm}]", "task.hacking_window=1"]),
        ("rewards model weight 0 alone", [*cfg, *data(f), f"task.rewards=[{{model: {f['rm']}, weight: 0}}]"]),
        (
            "critic_init, rm of another vocab",
            [*cfg, "objective.preset=ppo", "model.name=smollm2-135m-random", f"model.critic_init={f['rm']}"],
        ),
        ("train-rm --run all correct", ["train-rm", "--run", f"{f['d']}/allright", "--out", f"{f['d']}/rm_out"]),
        ("train-rm --run bad sample", ["train-rm", "--run", f"{f['d']}/badsample", "--out", f"{f['d']}/rm_out"]),
        (
            "bench --warmup-max 0",
            ["bench", "--models", "tiny-dense", "--backends", "hf", "--no-trl", "--warmup-max", "0"],
        ),
        ("rollout_is + old_logp rollout", [*cfg, "objective.rollout_is=token_mask", "train.old_logp=rollout"]),
        ("staleness k = steps", [*cfg, "rollout.staleness=4", "train.steps=4"]),
        ("control: staleness 2 of 4 steps", [*cfg, "rollout.staleness=2", "train.steps=4"]),
    ]
    sub = [
        ("plugin os._exit on import", ["SUB", *cfg, "objective.plugins=[exit_plugin]"]),
        ("plugin sys.exit on import", ["SUB", *cfg, "objective.plugins=[sysexit_plugin]"]),
        ("reward module os._exit on import", ["SUB", *cfg, *data(f), "task.rewards=[{function: 'exit_rewards:f'}]"]),
    ]
    return more + sub + fault_tries(f)


def fault_tries(f: dict) -> list[tuple[str, list[str]]]:
    """Data paths that are not regular files, a mask interval without 1, a boolean given as a string."""
    cfg, d = CFG, f["d"]
    pipe = json.dumps({"train": f"{d}/pipe.jsonl", "prompt_key": "question"})
    zero = json.dumps({"train": f["rows"], "eval": f"{d}/zero.jsonl", "prompt_key": "question"})
    return [
        ("data a named pipe", [*cfg, "task.name=dataset", "task.rewards=[gsm8k]", f"task.data={pipe}"]),
        ("data eval /dev/zero", [*cfg, "task.name=dataset", "task.rewards=[gsm8k]", f"task.data={zero}"]),
        ("train-rm pairs a named pipe", ["train-rm", "--pairs", f"{d}/pipe.jsonl", "--out", f"{d}/rm_out"]),
        ("train-rm --run samples a named pipe", ["train-rm", "--run", f"{d}/piperun", "--out", f"{d}/rm_out"]),
        ("dpo.pairs a named pipe", [*cfg, "objective.preset=dpo", f"dpo.pairs={d}/pipe.jsonl"]),
        (
            "score completions a named pipe",
            ["score", SMOKE, f"{d}/pipe.jsonl", *TINY, *data(f), "task.rewards=[gsm8k]"],
        ),
        (
            "rollout_is mask clip_max < 1",
            [*cfg, "objective.rollout_is=token_mask", "objective.rollout_is_clip_max=0.5"],
        ),
        (
            "rollout_is mask clip_min > 1",
            [*cfg, "objective.rollout_is=sequence_mask", "objective.rollout_is_clip_min=2"],
        ),
        ("use_adaptive_entropy 'yes'", [*cfg, "objective.use_adaptive_entropy='yes'"]),
        ("tracking.mlflow 'no'", [*cfg, "tracking.mlflow='no'"]),
        ("train.tf32 'on'", [*cfg, "train.tf32='on'"]),
        (
            "control: rollout_is truncate clip_max < 1",
            [*cfg, "objective.rollout_is=token_truncate", "objective.rollout_is_clip_max=0.5"],
        ),
    ]


def dpo_loss_tries(f: dict) -> list[tuple[str, list[str]]]:
    """TRL's DPO loss types and their knobs (harness/objective/dpo_losses.py): each read only where it applies."""
    dpo = ["config", "experiments/runs/dpo.yaml", *TINY]
    return [
        ("dpo_loss_type hinge with the RL trainer", [*CFG, "objective.dpo_loss_type=hinge"]),
        ("dpo_label_smoothing -0.1", [*dpo, "objective.dpo_loss_type=robust", "objective.dpo_label_smoothing=-0.1"]),
        ("dpo_label_smoothing 0.5", [*dpo, "objective.dpo_loss_type=robust", "objective.dpo_label_smoothing=0.5"]),
        ("dpo_label_smoothing with sigmoid", [*dpo, "objective.dpo_label_smoothing=0.1"]),
        ("exo_pair without label smoothing", [*dpo, "objective.dpo_loss_type=exo_pair"]),
        ("dpo_discopop_tau 0", [*dpo, "objective.dpo_loss_type=discopop", "objective.dpo_discopop_tau=0"]),
        ("dpo_loss_weights unknown type", [*dpo, "objective.dpo_loss_weights={sigmoid: 0.8, kto: 0.2}"]),
        ("dpo_loss_weights without the loss type", [*dpo, "objective.dpo_loss_weights={bco_pair: 0.2}"]),
        ("control: dpo_loss_weights mix", [*dpo, "objective.dpo_loss_weights={sigmoid: 0.8, bco_pair: 0.2}"]),
    ]


def kl_control_tries(f: dict) -> list[tuple[str, list[str]]]:
    """PPO's adaptive KL (harness/objective/kl_control.py): kl_target and kl_horizon, read only with the reward's KL."""
    ppo = [*CFG, "objective.preset=ppo"]
    return [
        ("kl_target with kl_placement loss", [*CFG, "objective.kl_target=0.1"]),
        ("kl_target 0", [*ppo, "objective.kl_target=0"]),
        ("kl_target -0.1", [*ppo, "objective.kl_target=-0.1"]),
        ("kl_target a word", [*ppo, "objective.kl_target=fast"]),
        ("kl_target with kl_coef 0", [*ppo, "objective.kl_target=0.1", "objective.kl_coef=0"]),
        ("kl_horizon 0", [*ppo, "objective.kl_target=0.1", "objective.kl_horizon=0"]),
        ("kl_horizon 2.5", [*ppo, "objective.kl_target=0.1", "objective.kl_horizon=2.5"]),
        ("kl_horizon without kl_target", [*ppo, "objective.kl_horizon=100"]),
        ("control: ppo with kl_target", [*ppo, "objective.kl_target=0.1"]),
    ]


def kl_estimator_tries(f: dict) -> list[tuple[str, list[str]]]:
    """verl's KL estimators and the two switches of the loss's KL term (harness/objective/kl.py)."""
    return [
        ("kl_estimator k4", [*CFG, "objective.kl_estimator=k4"]),
        ("kl_estimator k3+ (verl's spelling)", [*CFG, "objective.kl_estimator=k3+"]),
        (
            "kl_estimator low_var_kl with kl_placement reward",
            [*CFG, "objective.preset=ppo", "objective.kl_estimator=low_var_kl"],
        ),
        ("kl_straight_through with kl_coef 0", [*CFG, "objective.kl_straight_through=true", "objective.kl_coef=0"]),
        (
            "kl_straight_through with kl_placement reward",
            [*CFG, "objective.preset=ppo", "objective.kl_straight_through=true"],
        ),
        ("kl_straight_through a word", [*CFG, "objective.kl_straight_through=sometimes"]),
        ("kl_bias_correction with kl_coef 0", [*CFG, "objective.kl_bias_correction=true", "objective.kl_coef=0"]),
        (
            "kl_bias_correction with kl_placement reward",
            [*CFG, "objective.preset=ppo", "objective.kl_bias_correction=true"],
        ),
        (
            "control: kl_straight_through, verl k3+",
            [*CFG, "objective.kl_estimator=low_var_kl", "objective.kl_straight_through=true"],
        ),
        (
            "control: kl_bias_correction, sequence ratio",
            [*CFG, "objective.kl_bias_correction=true", "objective.ratio=sequence"],
        ),
    ]


def verdict_tries(f: dict) -> list[tuple[str, list[str]]]:
    """A study's `hypotheses:` (refused when it loads: `harness grid`) and `harness verdict`."""
    from tests.experiments.verdict_fixture import study_yaml, write_folder

    good = {"name": "h", "metric": "eval/pass_at_1", "at": "final", "contrast": "a - b", "direction": "greater"}
    good["sesoi"] = 0.05
    d = Path(f["d"]) / "hyp"
    bad = {
        "unknown arm": {"contrast": "a - c"},
        "sesoi 0": {"sesoi": 0},
        "direction bigger": {"direction": "bigger"},
        "alpha 2": {"alpha": 2},
        "metric typo": {"metric": "eval/pass_at1"},
        "eval step off the schedule": {"at": {"eval_step": 3}},
        "window past train.steps": {"at": {"steps": [0, 4]}, "metric": "length/incorrect"},
    }
    tries = [
        (f"verdict hypotheses: {door}", ["grid", str(study_yaml(d / f"{i}.yaml", [{**good, **change}]))])
        for i, (door, change) in enumerate(bad.items())
    ]
    study = str(study_yaml(d / "good.yaml", [good]))
    write_folder(d / "results" / "toy" / "smoke", {"a": [0.40, 0.42, 0.44], "b": [0.3, 0.3, 0.3]})
    (d / "empty" / "toy" / "smoke").mkdir(parents=True)
    (d / "empty" / "toy" / "smoke" / "cells.json").write_text("[]")
    return tries + [
        ("verdict unknown study", ["verdict", "nosuchstudy"]),
        ("verdict no results folder", ["verdict", study, "--results", f"{d}/nope"]),
        ("verdict a folder with no cells", ["verdict", study, "--results", f"{d}/empty"]),
        ("verdict --pilot without --plan", ["verdict", study, "--pilot", f"{d}/results/toy/smoke"]),
        ("control: verdict", ["verdict", study, "--results", f"{d}/results"]),
        ("control: verdict --plan", ["verdict", study, "--plan", "--pilot", f"{d}/results/toy/smoke"]),
    ]


def node_tries(f: dict) -> list[tuple[str, list[str]]]:
    """`harness train --nnodes N`: the rendezvous options (harness/train/run/nodes.py), outside SLURM."""
    run = ["train", SMOKE, *TINY, "rollout.seeding=prompt", "--out", f"{f['d']}/runs/nodes"]
    at = ["--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint"]
    return [
        ("train --nnodes 0", [*run, "--nnodes", "0"]),
        ("train --nnodes 2, no endpoint", [*run, "--nnodes", "2", "--node-rank", "0"]),
        ("train --rdzv-endpoint no port", [*run, *at, "node0"]),
        ("train --rdzv-endpoint port 70000", [*run, *at, "node0:70000"]),
        ("train --node-rank 2 of 2", [*run, "--nnodes", "2", "--node-rank", "2", "--rdzv-endpoint", "h:1"]),
        ("train --node-rank -1", [*run, "--nnodes", "2", "--node-rank", "-1", "--rdzv-endpoint", "h:1"]),
        ("train --nnodes 2, no node rank", [*run, "--nnodes", "2", "--rdzv-endpoint", "h:1"]),
        ("train --nnodes 2 of train.nproc 1", [*run, *at, "h:1"]),
        ("train --rdzv-backend etcd", [*run, *at, "h:1", "--nproc", "1", "--rdzv-backend", "etcd"]),
    ]


def cases(f: dict) -> list[tuple[str, list[str]]]:
    """(door, argv) of every try; argv starting with 'SUB' runs in a child process."""
    tries = knob_tries(f) + reward_model_tries(f) + command_tries(f) + more_tries(f) + run_tries(f)
    tries += verdict_tries(f) + node_tries(f) + hub_tries(f) + dpo_loss_tries(f) + kl_control_tries(f)
    tries += distill_tries(f)  # on-policy distillation's teacher
    return tries + kl_estimator_tries(f) + advantage_clip_tries(f) + observer_tries(f) + rejection_tries(f)


def rejection_tries(f: dict) -> list[tuple[str, list[str]]]:
    """verl's rejection sampling and IS batch normalisation (batch_correction.py), train.old_logp=bypass."""
    rs = "objective.rollout_rs"
    return [
        ("rejection option misspelt", [*CFG, f"{rs}=token_kl", "objective.rollout_rs_threshold=2"]),
        ("rejection seq_max_k1 (verl has none)", [*CFG, f"{rs}=seq_max_k1", "objective.rollout_rs_threshold=2"]),
        ("rejection without a threshold", [*CFG, f"{rs}=token_k1"]),
        ("rejection k1 bound below 1", [*CFG, f"{rs}=token_k1", "objective.rollout_rs_threshold=0.5"]),
        ("rejection k1 interval without 1", [*CFG, f"{rs}=token_k1", "objective.rollout_rs_threshold='1.2_3.0'"]),
        ("rejection lo_hi for k2", [*CFG, f"{rs}=token_k2", "objective.rollout_rs_threshold='0.5_2.0'"]),
        (
            "rejection 3 thresholds for 2 options",
            [*CFG, f"{rs}=token_k2,token_k3", "objective.rollout_rs_threshold='1,2,3'"],
        ),
        ("rejection threshold a bool", [*CFG, f"{rs}=token_k2", "objective.rollout_rs_threshold=true"]),
        ("rejection threshold without rollout_rs", [*CFG, "objective.rollout_rs_threshold=2"]),
        ("batch normalize without rollout_is", [*CFG, "objective.rollout_is_batch_normalize=true"]),
        (
            "batch normalize a quoted yes",
            [*CFG, "objective.rollout_is=token_truncate", 'objective.rollout_is_batch_normalize="yes"'],
        ),
        ("bypass with rollout_is", [*CFG, "train.old_logp=bypass", "objective.rollout_is=token_truncate"]),
        (
            "bypass with rollout_rs",
            [*CFG, "train.old_logp=bypass", f"{rs}=token_k1", "objective.rollout_rs_threshold=2"],
        ),
        ("old_logp misspelt", [*CFG, "train.old_logp=bypas"]),
        ("seq error threshold below 1", [*CFG, "objective.seq_logprob_error_threshold=0.5"]),
        ("seq error threshold a word", [*CFG, "objective.seq_logprob_error_threshold=two"]),
        (
            "seq error with old_logp rollout",
            [*CFG, "train.old_logp=rollout", "objective.seq_logprob_error_threshold=2"],
        ),
        ("control: seq error 2", [*CFG, "objective.seq_logprob_error_threshold=2"]),
        (
            "control: rejection chain",
            [*CFG, f"{rs}=token_k1,seq_mean_k3", "objective.rollout_rs_threshold='0.5_2.0,0.01'"],
        ),
        ("control: bypass where the sampler differs", [*CFG, "train.old_logp=bypass", "rollout.top_p=0.9"]),
    ]


def observer_tries(f: dict) -> list[tuple[str, list[str]]]:
    """train.observers (harness/train/rl/observers.py): the step's measurements on or off."""
    return [
        ("observers a quoted yes", [*CFG, 'train.observers="yes"']),
        ("observers a number", [*CFG, "train.observers=0"]),
        ("observers in a dpo run", ["config", "experiments/runs/dpo.yaml", *TINY, "train.observers=false"]),
        ("control: observers off", [*CFG, "train.observers=false"]),
    ]


def advantage_clip_tries(f: dict) -> list[tuple[str, list[str]]]:
    """NeMo-RL's and ROLL's advantage clipping (advantage_clip.py), OPO's baseline (opo.py), TOPR (topr.py)."""
    return [
        ("adv_clip_low above 0", [*CFG, "objective.adv_clip_low=0.5"]),
        ("adv_clip_high below 0", [*CFG, "objective.adv_clip_high=-1"]),
        ("adv_clip_low and adv_clip_high both 0", [*CFG, "objective.adv_clip_low=0", "objective.adv_clip_high=0"]),
        ("adv_clip_high a word", [*CFG, "objective.adv_clip_high=wide"]),
        ("control: ROLL's advantage_clip 2", [*CFG, "objective.adv_clip_low=-2", "objective.adv_clip_high=2"]),
        ("baseline opo misspelt", [*CFG, "objective.baseline=opo_len"]),
        ("topr with the sequence ratio", [*CFG, "objective.clip=topr", "objective.ratio=sequence"]),
        ("topr_negative_weight 0", [*CFG, "objective.clip=topr", "objective.topr_negative_weight=0"]),
        ("topr_positive_weight without clip topr", [*CFG, "objective.topr_positive_weight=2"]),
        ("control: preset opo", [*CFG, "objective.preset=opo"]),
        ("control: preset topr", [*CFG, "objective.preset=topr"]),
    ]


def distill_tries(f: dict) -> list[tuple[str, list[str]]]:
    """On-policy distillation (objective/distill.py, config/teacher.py): model.teacher and objective.distill_coef."""
    other = Path(f["d"]) / "teacher_other_vocab"  # f["lm"] with the ids of 'a' and 'b' swapped in its tokenizer
    if not other.exists():
        shutil.copytree(f["lm"], other)
        data = json.loads((other / "tokenizer.json").read_text())
        vocab = data["model"]["vocab"]
        vocab["a"], vocab["b"] = vocab["b"], vocab["a"]
        (other / "tokenizer.json").write_text(json.dumps(data))
    opd, teacher = "objective.preset=opd", f"model.teacher={f['lm']}"
    return [
        ("distill: opd without model.teacher", [*CFG, opd]),
        ("distill: model.teacher missing folder", [*CFG, opd, f"model.teacher={f['d']}/nope"]),
        ("distill: model.teacher not a model", [*CFG, opd, f"model.teacher={f['d']}/emptyrun"]),
        ("distill: model.teacher of another tokenizer", [*CFG, opd, f"model.teacher={other}"]),
        ("distill: model.teacher on grpo", [*CFG, teacher]),
        ("distill: distill_coef 0 with a teacher", [*CFG, opd, "objective.distill_coef=0", teacher]),
        ("distill: distill_coef -1", [*CFG, opd, "objective.distill_coef=-1", teacher]),
        ("distill: distill_coef a word", [*CFG, opd, "objective.distill_coef=much", teacher]),
        ("distill: model.teacher with dpo", ["config", "experiments/runs/dpo.yaml", *TINY, teacher]),
        ("distill: opd + baseline critic", [*CFG, opd, "objective.baseline=critic", teacher]),
        ("distill: distill_task_advantage without distill", [*CFG, "objective.distill_task_advantage=false"]),
        ("distill: control: preset opd", [*CFG, opd, teacher]),
        ("distill: control: grpo + distill_coef 0.5", [*CFG, "objective.distill_coef=0.5", "model.teacher=tiny-dense"]),
        ("distill: train: preset opd", ["train", SMOKE, *TINY, opd, teacher, "--out", f"{f['d']}/runs/opd"]),
    ]


def one_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith(("[harness]", "  "))]
    last = next((ln for ln in reversed(lines) if ln.startswith(("harness:", "usage", "harness ", "error"))), None)
    line = (last or (lines[-1] if lines else "")).strip()
    return re.sub(r" \(with overrides .*?\): ", " (with overrides ...): ", line, count=1)


def run_in_process(argv: list[str]) -> tuple[int | str, str]:
    from harness.cli import main

    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            rc: int | str = main(argv)
        except SystemExit as e:  # argparse
            rc = e.code if isinstance(e.code, int) else 1
        except BaseException as e:  # noqa: BLE001 -- what the user would see as a traceback
            tb = traceback.extract_tb(e.__traceback__)[-1]
            return "TB", f"TRACEBACK {type(e).__name__}: {' '.join(str(e).split())[:160]} ({tb.filename}:{tb.lineno})"
    text = err.getvalue()
    done = [ln for ln in (text + out.getvalue()).splitlines() if ln.startswith("[harness] done")]
    if rc == 0:
        warned = [ln.strip() for ln in text.splitlines() if ln.startswith("harness: warning")]
        line = "(accepted" + (": trained, " + done[-1][10:60] + "...)" if done else ")") + " ".join(["", *warned])
    else:
        line = one_line(text) if text.strip() else one_line(out.getvalue())
    if "Traceback (most recent call last)" in text:
        line = "TRACEBACK printed: " + line
    return rc, line


def run_child(argv: list[str], plug: str) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{plug}"}
    p = subprocess.run(
        [sys.executable, "-m", "harness.cli", *argv], capture_output=True, text=True, env=env, timeout=300, cwd=ROOT
    )
    line = one_line(p.stderr) if p.stderr.strip() else "(nothing printed)"
    if "Traceback (most recent call last)" in p.stderr:
        line = "TRACEBACK printed: " + line
    return p.returncode, line


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    os.chdir(ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        f = fixtures(Path(tmp))
        sys.path.insert(0, f["plug"])
        print("| door | input | exit | what the user sees |\n|---|---|---|---|")
        door = ""
        for label, argv in cases(f):
            door = label or door  # an empty label: the second command of the try above
            if args.only not in door:
                continue
            t = time.time()
            rc, line = run_child(argv[1:], f["plug"]) if argv[0] == "SUB" else run_in_process(argv)
            shown = " ".join(a for a in argv if a not in TINY and a != "SUB" and a != SMOKE).replace(tmp, "TMP")
            line = line.replace(tmp, "TMP").replace(str(ROOT), "REPO").replace("|", "\\|")
            print(f"| {door} | `{shown[:150]}` | {rc} | {line[:300]} |", flush=True)
            print(f"{door}: {time.time() - t:.1f}s", file=sys.stderr)


def hub_cache_fixture(d: Path) -> None:
    """A Hub cache at d/hf/hub, read offline (HF_HOME, HF_HUB_OFFLINE=1 for this process): org/tiny (a tiny
    causal LM), org/encoder (a distilbert config), org/gsm (a dataset, config main: train and test)."""
    import shutil

    from tests.models.hub_cache import hub_repo
    from tests.tasks.hub_datasets import gsm_repo

    os.environ.update({"HF_HOME": str(d / "hf"), "HF_HUB_OFFLINE": "1"})
    hub_repo(d / "hf" / "hub", "org/tiny", d / "lm")
    shutil.copytree(d / "lm", d / "encoder")
    (d / "encoder" / "config.json").write_text(json.dumps({"model_type": "distilbert"}))
    hub_repo(d / "hf" / "hub", "org/encoder", d / "encoder")
    gsm_repo(d / "hf" / "hub", d)


def hub_tries(f: dict) -> list[tuple[str, list[str]]]:
    """Models and datasets by Hugging Face Hub id, from an offline cache (harness/models/hub.py)."""
    hub_cache_fixture(Path(f["d"]))
    cfg = CFG
    rows = ["task.name=dataset", "task.rewards=[gsm8k]"]
    return [
        ("hub: model id not cached", [*cfg, "model.name=org/absent"]),
        ("hub: revision not cached", [*cfg, "model.name=org/tiny", "model.revision=v9"]),
        ("hub: not a causal LM", [*cfg, "model.name=org/encoder"]),
        ("hub: org/name/extra", [*cfg, "model.name=org/name/extra"]),
        ("hub: revision of a built-in name", [*cfg, "model.revision=v1"]),
        ("hub: dataset not cached", [*cfg, *rows, "task.data={train: org/absent, prompt_key: question}"]),
        ("hub: dataset config absent", [*cfg, *rows, "task.data={train: org/gsm, config: nope, prompt_key: question}"]),
        (
            "hub: dataset split absent",
            [*cfg, *rows, "task.data={train: org/gsm, config: main, train_split: validation, prompt_key: question}"],
        ),
        ("hub: config of a file", [*cfg, *data(f), "task.rewards=[gsm8k]", "task.data.config=main"]),
        (
            "hub: train by model and dataset ids",
            [
                "train",
                SMOKE,
                *TINY,
                *rows,
                "model.name=org/tiny",
                "task.data={train: org/gsm, eval: org/gsm, config: main, prompt_key: question}",
                "--out",
                f"{f['d']}/runs/hub",
            ],
        ),
    ]


if __name__ == "__main__":
    main()
