"""The benchmark's GRPO workload through TRL's GRPOTrainer (transformers generate, no vLLM; on the
GPU when torch sees one, as our trainer, else on the CPU).

    .venv/bin/python benchmarks/trl_grpo.py CONFIG_JSON OUT_JSON [OPTIONS_JSON]

CONFIG_JSON is a resolved harness run config (what `harness bench` writes for our trainer);
OPTIONS_JSON (optional): {"engine": "hf" | "vllm", "levers": {GRPOConfig kwargs}, "profile_step": k}
(harness/bench/levers.py, harness/bench/profiling.py). The same workload is rebuilt for TRL:
- model: the run's initial policy (harness.train.run.warmstart), saved as an HF folder that
  TRL loads by path (policy and reference);
- prompts: per step the N train-split problems our trainer draws at that step (same task,
  seed and step_seed), rendered through the same chat template (checked token for token),
  in order (shuffle_dataset=False);
- N*G rows per optimizer step: per_device_train_batch_size = micro-batch, gradient
  accumulation = steps_per_generation = rows / micro-batch, num_generations = G;
  max_completion_length = T, temperature, top_p, top_k = 0;
- objective: loss_type from objective.agg (seq_mean_token_mean -> grpo, token_mean -> dapo,
  seq_mean_token_sum_norm -> dr_grpo), scale_rewards from objective.scale, epsilon /
  epsilon_high from eps_low / eps_high, beta = kl_coef (k3 in the loss, as TRL computes it);
  knobs TRL has no equivalent for raise an error;
- optimizer: AdamW (adamw_torch) with the run's lr, betas, weight decay, grad clip; constant
  lr, no warm-up; no checkpoints (save_strategy="no"), logging every step, report_to="none";
- the fair protocol (harness/bench/levers.py): gradient checkpointing as ours (train.gradient_checkpointing;
  TRL 1.16 turns it on by default), bf16 as ours (train.autocast; TRL turns it on by default), our model's
  attention implementation, the engine of our case (hf, or TRL's colocated vLLM on a GPU), and
  rollout.min_new_tokens (`harness bench --fixed-length`) as generate's min_new_tokens;
- reward: the task's verifier (task.score(problem, completion, truncated).total), as ours.

Timings per optimizer step (same keys as our trainer's, harness/bench/figures.py), taken by a
GRPOTrainer subclass and a callback: rollout_s = `_generate`, score_s = the rest of
`_generate_and_score_completions` (rewards, reference log-probs, advantages), update_s = the
rest of the step (forward/backward, clip, optimizer), log_s = `log`; on a GPU each edge waits for the
device (torch.cuda.synchronize), as ours does. The model's precision and attention implementation and
whether gradient checkpointing is on are read back from the trainer and recorded. TRL is a
benchmark-only dependency (requirements-bench.txt); the harness package never imports it.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

AGG_TO_LOSS = {"seq_mean_token_mean": "grpo", "token_mean": "dapo", "seq_mean_token_sum_norm": "dr_grpo"}
SCALE_TO_TRL = {"group_std": "group", "batch_std": "batch", "none": "none"}


def trl_args(
    cfg, out_dir: str, use_cpu: bool = True, engine: str = "hf", attn: str | None = None, levers: dict | None = None
) -> dict:
    """GRPOConfig keyword arguments matching run config `cfg` (a RunConfig); raises ValueError
    naming the objective knob that TRL cannot reproduce. use_cpu: False where a GPU is at hand
    (our trainer takes it too: harness/train/run/setup.py). The fair protocol's matched settings:
    gradient checkpointing as ours (TRL 1.16 turns it on by default), bf16 as ours (TRL turns it on by
    default), the attention implementation `attn` of our model, the engine (hf: transformers' generate;
    vllm: TRL's colocated vLLM), rollout.min_new_tokens as generate's min_new_tokens (vLLM's min_tokens).
    `levers`: TRL's lever set (harness/bench/levers.py), on top."""
    obj, tr, ro = cfg.objective, cfg.train, cfg.rollout
    unsupported = {
        "objective.baseline": (obj.baseline, "group_mean"),
        "objective.clip": (obj.clip, "ppo"),
        "objective.std": (obj.std, "sample"),
        "objective.dynamic_sampling": (obj.dynamic_sampling, False),
        "objective.overlong_buffer": (obj.overlong_buffer, 0),
        "objective.tis_cap": (obj.tis_cap, None),
        "objective.rollout_is": (obj.rollout_is, "none"),  # TRL applies its IS modes with vLLM only
        "objective.off_policy_mask_threshold": (obj.off_policy_mask_threshold, None),
        "objective.m2_threshold": (obj.m2_threshold, None),
        "objective.entropy_coef": (obj.entropy_coef, 0.0),
        "train.mini_batches": (tr.mini_batches, 1),
    }
    for key, (value, wanted) in unsupported.items():
        if value != wanted:
            raise ValueError(f"{key}={value!r} has no TRL GRPOTrainer equivalent here (need {wanted!r})")
    if obj.agg not in AGG_TO_LOSS:
        raise ValueError(f"objective.agg={obj.agg!r} has no TRL loss_type here; allowed: {sorted(AGG_TO_LOSS)}")
    if obj.ratio not in ("token", "sequence"):
        raise ValueError(f"objective.ratio={obj.ratio!r}: TRL has importance_sampling_level token | sequence")
    if obj.kl_coef and (obj.kl_estimator != "k3" or obj.kl_placement != "loss"):
        raise ValueError(
            f"objective.kl_estimator={obj.kl_estimator!r} / kl_placement={obj.kl_placement!r}: "
            "TRL's beta is the k3 estimator in the loss"
        )
    if engine not in ("hf", "vllm"):
        raise ValueError(f"engine={engine!r} is unknown; allowed: ['hf', 'vllm']")
    rows = tr.prompts_per_step * tr.group_size
    micro = tr.micro_batch_size or rows
    accum = rows // micro
    return dict(
        output_dir=out_dir,
        use_cpu=use_cpu,
        **_engine_args(cfg, engine),
        gradient_checkpointing=bool(tr.gradient_checkpointing),  # the memory policy: ours (TRL's default is on)
        seed=cfg.seed,
        bf16=bool(cfg.train.autocast),  # train.autocast=bf16: bf16 compute over fp32 weights, as ours
        fp16=False,
        model_init_kwargs={"dtype": cfg.model.dtype, **({"attn_implementation": attn} if attn else {})},
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=accum,
        steps_per_generation=accum,
        num_generations=tr.group_size,
        max_completion_length=ro.max_new_tokens,
        temperature=ro.temperature,
        top_p=ro.top_p,
        top_k=0,
        learning_rate=tr.lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=tr.weight_decay,
        adam_beta1=tr.betas[0],
        adam_beta2=tr.betas[1],
        max_grad_norm=tr.grad_clip or 0.0,
        optim="adamw_torch",
        beta=obj.kl_coef,
        epsilon=obj.eps_low,
        epsilon_high=obj.eps_high,
        loss_type=AGG_TO_LOSS[obj.agg],
        scale_rewards=SCALE_TO_TRL[obj.scale],
        importance_sampling_level=obj.ratio,
        num_iterations=tr.inner_epochs,
        mask_truncated_completions=obj.mask_truncated,
        max_steps=tr.steps,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        shuffle_dataset=False,
        dataloader_num_workers=0,
        log_completions=False,
        remove_unused_columns=False,
        **(levers or {}),
    )


def _engine_args(cfg, engine: str) -> dict:
    """use_vllm and its settings, and rollout.min_new_tokens in the engine's own words (fixed length)."""
    low = cfg.rollout.min_new_tokens
    if engine == "hf":
        return {"use_vllm": False, "generation_kwargs": {"min_new_tokens": low} if low else None}
    return {  # GPU-only: TRL's vLLM colocated with the trainer (never run on this project's CPU machines)
        "use_vllm": True,
        "vllm_mode": "colocate",
        "vllm_gpu_memory_utilization": cfg.rollout.gpu_memory_utilization,
        "generation_kwargs": {"min_tokens": low} if low else None,
    }


def run_trl(cfg_dict: dict, options: dict | None = None) -> dict:
    """The TRL case's timings (see the module doc), run in a temporary folder (the policy TRL loads, its
    output_dir: ~0.5 GB for SmolLM2) that is removed afterwards, whatever the outcome. options: engine
    ("hf" | "vllm"), levers (GRPOConfig kwargs: harness/bench/levers.py), profile_step (a step to profile)."""
    work = tempfile.mkdtemp(prefix="trl-grpo-")
    try:
        return _run_trl_in(cfg_dict, work, options or {})
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _sync() -> None:
    """torch.cuda.synchronize() at a phase edge where a GPU runs the case (as our trainer does); nothing on a CPU."""
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _run_trl_in(cfg_dict: dict, work: str, options: dict) -> dict:
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from harness.bench.profiling import profiled
    from harness.config import build_config
    from harness.models import save_model
    from harness.models.registry import problem_messages
    from harness.train.core.collect import step_seed
    from harness.train.run.task_setup import build_task
    from harness.train.run.warmstart import initial_policy

    cfg = build_config(cfg_dict)
    tr, T = cfg.train, cfg.rollout.max_new_tokens
    if tr.threads:
        torch.set_num_threads(tr.threads)
    task = build_task(cfg)  # a generated task, or a dataset's rows (harness/tasks)
    problems = [
        p
        for step in range(tr.steps)
        for p in task.problems(tr.prompts_per_step, seed=step_seed(cfg.seed, step, 0), split="train")
    ]
    by_uid = {p.uid: p for p in problems}
    suffix = cfg.model.prompt_suffix
    data = Dataset.from_list([{"prompt": problem_messages(p, suffix), "uid": p.uid} for p in problems])

    use_cpu = not torch.cuda.is_available()
    model, tok, render = initial_policy(cfg, torch.device("cpu"))
    attn = getattr(model.config, "_attn_implementation", None)  # ours: TRL loads the policy with the same
    folder = str(save_model(model, tok, Path(work) / "policy"))
    del model
    tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    trl_ids = tok.apply_chat_template(
        [problem_messages(problems[0], suffix)],
        add_generation_prompt=True,
        tokenize=True,
        return_dict=True,
    )["input_ids"][0]
    if list(trl_ids) != render(problems[0]):
        raise RuntimeError(f"TRL's prompt tokens differ from ours: {list(trl_ids)[:20]} vs {render(problems[0])[:20]}")
    eos_ids = {tok.eos_token_id}

    recs: dict[int, dict] = defaultdict(lambda: defaultdict(float))
    cur = {"step": 0, "t0": 0.0}

    def verifier_reward(prompts, completions, completion_ids, uid, **_):
        """The task's verifier: reward = task.score(problem, text, truncated).total per completion."""
        out = []
        for completion, ids, u in zip(completions, completion_ids, uid, strict=True):
            text = completion[0]["content"] if isinstance(completion, list) else completion
            truncated = len(ids) >= T and ids[-1] not in eos_ids
            out.append(task.score(by_uid[u], text, truncated).total)
        recs[cur["step"]]["tokens"] += sum(len(ids) for ids in completion_ids)
        return out

    def clock() -> float:
        _sync()
        return time.perf_counter()

    class TimedGRPOTrainer(GRPOTrainer):
        def _generate(self, prompts):
            t0 = clock()
            out = super()._generate(prompts)
            recs[cur["step"]]["rollout_s"] += clock() - t0
            return out

        def _generate_and_score_completions(self, inputs):
            t0 = clock()
            out = super()._generate_and_score_completions(inputs)
            recs[cur["step"]]["gen_score_s"] += clock() - t0
            return out

        def log(self, logs, start_time=None):
            t0 = clock()
            super().log(logs, start_time)  # merges TRL's step metrics into `logs`
            recs[cur["step"]]["log_s"] += clock() - t0
            if logs.get("reward") is not None:
                recs[cur["step"]]["reward"] = logs["reward"]

    extra: dict = {}
    profile_step = options.get("profile_step")

    class StepTimer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            if state.global_step == profile_step:  # profiling.py: this step under torch.profiler
                extra["profile"] = {"step": profile_step}
                cur["prof"] = profiled(extra["profile"])
                cur["prof"].__enter__()
            cur["step"], cur["t0"] = state.global_step, clock()

        def on_step_end(self, args, state, control, **kw):
            recs[cur["step"]]["inner_s"] += clock() - cur["t0"]
            prof = cur.pop("prof", None)
            if prof is not None:
                prof.__exit__(None, None, None)

    engine = options.get("engine", "hf")
    args = trl_args(cfg, work, use_cpu, engine=engine, attn=attn, levers=options.get("levers"))
    t0 = time.perf_counter()
    trainer = TimedGRPOTrainer(
        model=folder,
        reward_funcs=verifier_reward,
        args=GRPOConfig(**args),
        train_dataset=data,
        processing_class=tok,
        callbacks=[StepTimer()],
    )
    setup = time.perf_counter() - t0
    trainer.train()
    per_step = []
    for step in sorted(recs):
        r = recs[step]
        update = r["inner_s"] - r["gen_score_s"]
        per_step.append(
            {
                "step": step,
                "rollout_s": r["rollout_s"],
                "score_s": r["gen_score_s"] - r["rollout_s"],
                "update_s": update,
                "log_s": r["log_s"],
                "eval_s": 0.0,
                "ckpt_s": None,
                "step_s": r["inner_s"] + r["log_s"],
                "tokens": r["tokens"],
                "reward": r.get("reward"),
            }
        )
    import trl

    model = trainer.model
    return {
        "per_step": per_step,
        "setup_s": setup,
        "trl_version": trl.__version__,
        "trl_args": {k: v for k, v in args.items() if k != "output_dir"},
        "precision": f"bf16 autocast over {cfg.model.dtype}" if args["bf16"] else str(model.dtype).split(".")[-1],
        # TRL generates with the model accelerate prepared: under its bf16 autocast when bf16=True
        "rollout_precision": f"bf16 autocast over {cfg.model.dtype}" if args["bf16"] else f"{cfg.model.dtype} weights",
        "attn_implementation": getattr(model.config, "_attn_implementation", None),
        "gradient_checkpointing": bool(getattr(model, "is_gradient_checkpointing", False)),
        **extra,
    }


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        import trl  # noqa: F401
    except ImportError:
        print(
            "trl is not installed: `make bench` (or .venv/bin/pip install -c requirements.txt "
            "-r requirements-bench.txt)",
            file=sys.stderr,
        )
        return 3
    options = json.loads(Path(argv[2]).read_text()) if len(argv) == 3 else {}
    res = run_trl(json.loads(Path(argv[0]).read_text()), options)
    Path(argv[1]).write_text(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
