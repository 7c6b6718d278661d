"""Run configuration: the one documented place for every option of a training run.

A run config is YAML whose keys are the fields below (sections `model`, `task`,
`warm_start`, `rollout`, `train`, `eval`, `tracking`, `objective`, `dpo`). The `objective`
section holds the knobs of `harness.objective.ObjectiveConfig`; `objective.preset`
starts from a named algorithm and the other keys override it one by one.
The top-level key `trainer` (rl | dpo) picks the run shell's step (harness/train/run/shell.py);
the preset sets it (`objective.preset=dpo` -> dpo, with section `dpo`; every other preset ->
rl), and a trainer that cannot run the chosen objective is an error.

`load_config(path, overrides)` applies dotted CLI overrides (`objective.eps_high=0.28`),
validates everything before any model is loaded, and raises `ConfigError` whose message
names the file (and overrides), the offending dotted key, its value and what is allowed.
The `harness` CLI prints that message as one paragraph and exits with status 2 (a traceback
only with `harness --debug`).

Reading. YAML is read strictly (`read_yaml`, shared with study files, harness/experiment/load.py): a key
given twice in one mapping, an empty file, bytes that are not UTF-8 and YAML syntax errors are
errors naming the file and line; an override's value is parsed the same way. A boolean is
never a number: `steps: true` or `lr: false` (anywhere an int or float is expected, including
list, tuple and mapping values and the `objective` knobs) is an error, as is a non-finite
float (`.nan`, `.inf`).

Checked before any model loads (each once read late, after seconds of work): the task's
`difficulty_mix` and `options` (the task is constructed); `train.betas` in [0, 1);
`model.overrides` (keys must be fields of the model's config class or, for a folder and
smollm2-135m, `from_pretrained` options; values are tried on that class, for tiny-* with a
weightless build); a `model.name` folder must hold a Hugging Face model (config.json, weights,
tokenizer); a group statistic (baseline group_mean / leave_one_out, scale group_std) needs
`train.group_size >= 2`; a clip distance (`eps_low`, `eps_high`) of 0 with a clipping surrogate;
for `task.name: dataset`, its files, fields, rewards (functions imported, signatures checked) and
its first reference answers scored as completions (harness/tasks/dataset/, docs/tasks.md).

Ignored knobs. A knob that the chosen trainer or objective would not read is an error when its
value differs from its default (for objective knobs: from the preset's value), so a config
never carries a setting that silently does nothing (`RunConfig._ignored_knobs` lists the
rules): a changed `dpo:` section or `dpo_*` knob with an RL preset; RL objective knobs with
`objective.preset=dpo`; value-model knobs (`train.critic_lr`, `objective.vf_coef`,
`value_clip`, `gamma`, `lam`) without `baseline=critic`; `norm_constant` with an `agg` other
than seq_mean_token_sum_norm; `train.max_refill_rounds` without dynamic sampling;
`overlong_penalty` without an overlong buffer; clip bounds with `clip=none`; KL knobs with
`kl_coef=0`. The RL-only `train` knobs (steps, prompts_per_step, group_size, ...) under
`objective.preset=dpo` are a one-line warning instead: a shared RL base config (smoke.yaml)
legitimately carries them. A resolved config (a run directory's config.yaml) has every knob
at a default or a used value, so it loads again silently.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
import types
import typing
import warnings
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from harness import device_defaults
from harness.machine import bf16_slow_reason
from harness.models import MODEL_NAMES, is_moe
from harness.models.folder import classifier_problem, folder_problem
from harness.models.lora import check_lora_targets, meta_model
from harness.models.random_llama import RANDOM_SHAPES, random_config
from harness.models.registry import model_positions, policy_vocab
from harness.models.tiny import VOCAB_SIZE, tiny_dense_config, tiny_moe_config
from harness.objective import PRESETS, ObjectiveConfig, inputs_needed
from harness.objective import knobs as knob_rules
from harness.objective.config import knob_default
from harness.objective.explain import explain_objective
from harness.objective.modes import KnobError
from harness.objective.plugins import import_plugins
from harness.objective.presets import PRESET_RUN_KEYS, preset_trainer
from harness.tasks import TASK_NAMES, make_task, task_from_config
from harness.tasks.dataset import check_reference_answers
from harness.tasks.dataset.read import stat_key
from harness.tasks.rewards import reward_model_problem


class ConfigError(ValueError):
    """A config key or value is wrong; the message names the dotted key."""


class ConfigWarning(UserWarning):
    """A config that runs, but likely not as meant (the CLI prints it as one line)."""


class _Section(BaseModel):
    """Unknown keys are errors, floats must be finite, and a boolean is never read as a number."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        if info.field_name and bool_as_number(cls.model_fields[info.field_name].annotation, value):
            raise ValueError("a boolean where a number is expected; write a number")
        return value


class LoraSection(_Section):
    """model.lora: train LoRA adapters instead of every weight (peft; harness/models/lora.py, docs/scale.md).
    The reference policy is the base with the adapters disabled; checkpoints hold the adapters."""

    r: int = Field(16, ge=1, description="rank of each adapter (B A, A: r x in, B: out x r)")
    alpha: float = Field(32.0, gt=0, description="scale: the update is (alpha / r) B A; with alpha = 2r the scale is 2")
    dropout: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="dropout on each adapter's input in training forwards; above 0 "
        "pi_old's and pi_theta's forwards differ by the dropout mask (ratio != 1 on-policy)",
    )
    target_modules: str | list[Annotated[str, Field(min_length=1)]] = Field(
        "all-linear",
        description="module names the adapters go on (last parts of dotted names, e.g. [q_proj, v_proj]), "
        "or all-linear (every linear layer but the output head); checked against the model before it loads",
    )


class ModelSection(_Section):
    name: str = Field(
        "tiny-dense",
        description="tiny-dense | tiny-moe | smollm2-135m | smollm2-135m-random | llama-1b-random (random weights, "
        "SmolLM2's tokenizer: harness/models/random_llama.py) | a local Hugging Face folder",
    )
    overrides: dict[str, Any] = Field(
        default_factory=dict, description="config overrides for tiny-* models (e.g. num_hidden_layers)"
    )
    dtype: Literal["float32", "bfloat16"] = Field("float32", description="training precision of the policy")
    attn_implementation: Literal["auto", "sdpa", "eager", "flash_attention_2"] | None = Field(
        "auto",
        description="transformers' attention kernel for the policy (and its copies); null = transformers' own "
        "choice; auto = null on a CPU, sdpa on CUDA (torch's fused attention: flash or memory-efficient kernels). "
        "model.overrides.attn_implementation, where set, wins",
    )
    prompt_suffix: str = Field(
        "", description="appended to every task prompt (an answer-format instruction for chat models)"
    )
    lora: LoraSection | None = Field(
        None,
        description="LoRA adapters (r, alpha, dropout, target_modules) instead of full "
        "fine-tuning; null = every weight trains",
    )
    lm_head_fp32: bool = Field(
        False,
        description="the LM head's logits in fp32 (hidden states and head weight upcast, autocast off) in the "
        "trainer and the hf sampler, whatever model.dtype / train.autocast (ScaleRL 2510.13786 §3.2, MiniMax-M1 "
        "2506.13585); a no-op for an fp32 model without autocast. The scalerl preset turns it on",
    )
    critic_init: str | None = Field(
        None,
        description="objective.baseline=critic: a reward model folder (a sequence classifier, num_labels 1) the "
        "critic starts from, its transformer and its score head (the PPO paper's setup), instead of a copy of "
        "the policy with a zero head; it reads the policy's tokens, so it must share the policy's tokenizer",
    )


class PassRateDifficulty(_Section):
    """task.data.difficulty_by_pass_rate: difficulty buckets from the initial policy's pass rate on each
    prompt (harness/train/run/pass_rates.py), measured once and cached beside the warm start's eval."""

    samples: int = Field(8, ge=1, description="samples per prompt (rollout.temperature, rollout.max_new_tokens)")
    edges: list[Annotated[float, Field(gt=0, lt=1)]] = Field(
        default_factory=lambda: [0.25, 0.75],
        min_length=1,
        description="pass-rate edges between buckets, increasing; "
        "two edges give hard (p < first), medium, easy (p >= second); other counts give buckets named p0.00-0.25, ...",
    )

    @field_validator("edges")
    @classmethod
    def _increasing(cls, edges: list[float]) -> list[float]:
        if any(a >= b for a, b in zip(edges, edges[1:])):
            raise ValueError(f"edges must increase (got {edges})")
        return edges


class DataSection(_Section):
    """task.data: the rows of a dataset task (task.name: dataset; harness/tasks/dataset/, docs/tasks.md)."""

    train: str | list[str] = Field(
        ...,
        description="file or folder of rows: JSONL/JSON, Parquet, CSV, or a "
        "save_to_disk folder (several paths: one table). verl: data.train_files",
    )
    eval: str | list[str] | None = Field(
        None,
        description="held-out rows (verl: data.val_files); null: split train by "
        "a stable hash of each prompt, eval_fraction held out",
    )
    format: Literal["auto", "json", "parquet", "csv", "arrow"] = Field(
        "auto", description="file format; auto: from the name (.jsonl .json .parquet .csv .tsv, a folder)"
    )
    train_split: str = Field("train", description="the split of train when it is a DatasetDict folder")
    eval_split: str = Field("test", description="the split of eval when it is a DatasetDict folder")
    eval_fraction: float = Field(
        0.1,
        gt=0,
        lt=1,
        description="share of the train file's prompts held out when eval "
        "is null (by a sha256 of the prompt: the same prompt always on the same side)",
    )
    prompt_key: str = Field(
        "prompt",
        description="the prompt field (dotted path); text, or a list of chat messages "
        "{role, content} (verl's parquet, TRL's conversational JSONL). verl: data.prompt_key",
    )
    prompt_template: str | None = Field(
        None,
        description="instead of prompt_key: a template over fields, e.g. "
        "'{question}\n{choices}' ({dotted.path} placeholders; lists one item a line)",
    )
    answer_key: str = Field(
        "answer",
        description="the reference answer field (dotted path, e.g. "
        "reward_model.ground_truth); verifiers compare completions with it",
    )
    difficulty_key: str | None = Field(
        None,
        description="a field whose value labels each row's difficulty bucket "
        "(eval/pass_at_k/<bucket>, the difficulty-bias study); null: 'all'",
    )
    difficulty_by_pass_rate: PassRateDifficulty | None = Field(
        None, description="instead of difficulty_key: buckets from the initial policy's pass rate per prompt"
    )
    solution_key: str | None = Field(
        None,
        description="a worked-solution field: the SFT target of a warm start "
        "(warm_start.pretrained for a pretrained model)",
    )
    id_key: str | None = Field(
        None,
        description="a field holding each row's id: the problem uid is '<train|eval>:<id>' "
        "(null: the row's index in its file)",
    )
    system_prompt: str | None = Field(
        None,
        description="system message of every prompt (through the model's chat "
        "template; an error if a row's messages already hold one)",
    )
    where: dict[str, Any] = Field(
        default_factory=dict,
        description="keep only rows whose field (dotted) equals the "
        "value, or one of a list of values, e.g. {difficulty: [easy, medium]}",
    )
    max_train_rows: int | None = Field(
        None, ge=1, description="at most this many train rows (a random subset, fixed by shuffle_seed)"
    )
    max_eval_rows: int | None = Field(None, ge=1, description="at most this many eval rows (a random subset)")
    shuffle_seed: int = Field(0, description="order of the rows of each split (and so which rows the limits keep)")
    overlap: Literal["error", "drop", "allow"] = Field(
        "error",
        description="train and eval files sharing prompts: error (say how many), drop them from train, or allow",
    )
    check_answers: int = Field(
        8,
        ge=0,
        description="before training, score the first N train rows' reference answers "
        "as completions with the reward that defines correct; each must come out correct (0 = off)",
    )


class RewardSection(_Section):
    """task.rewards[i]: one reward, a built-in verifier or a function; the total is the weighted sum.
    A string is short for one: 'gsm8k' = {verifier: gsm8k}, 'my_rewards:fn' = {function: my_rewards:fn}."""

    verifier: Literal["math", "gsm8k", "number", "exact", "regex", "choice"] | None = Field(
        None,
        description="a built-in verifier: reward 1 if the completion's final answer equals the reference, else 0 "
        "(harness/tasks/rewards/verifiers.py)",
    )
    function: str | None = Field(
        None,
        description="module.path:function taking (prompt, completion, answer, row) -> "
        "float or {reward, correct} (TRL: reward_funcs; verl: custom_reward_function.path/name)",
    )
    name: str | None = Field(
        None, description="logged as reward/<name>; default: the verifier's or the function's name"
    )
    weight: float = Field(1.0, description="weight in the total reward (TRL: reward_weights)")
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="verifier options: regex {pattern, group, ignore_case}, choice {choices}, exact {case_sensitive}",
    )
    model: str | None = Field(
        None,
        description="a reward model: a local Hugging Face sequence-classification folder (num_labels 1, with its "
        "tokenizer), scoring the prompt's chat and the completion re-rendered with its own chat template; its "
        "score is the reward (TRL: a model in reward_funcs; verl: reward_model.model.path)",
    )
    micro_batch_size: int | None = Field(
        None, ge=1, description="a reward model's rows per forward (null: 8); a score does not depend on it"
    )
    normalize: Literal["none", "batch", "running"] = Field(
        "none",
        description="this reward's values before the weighted sum: none; batch: whitened over the training batch "
        "(x - mean) / std; running: by the mean and std of every training batch so far (kept in the checkpoint)",
    )

    def identity(self) -> dict:
        """The entry as cache keys read it: the reward-model keys left out where they are at their defaults
        (a verifier's or a function's key is what it was before they existed)."""
        out = self.model_dump(mode="json")
        for key in ("model", "micro_batch_size", "normalize"):
            if out[key] == _field_default(RewardSection, key):
                del out[key]
        return out

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"function": data} if ":" in data else {"verifier": data}
        return data


class TaskSection(_Section):
    name: str = Field(
        "arithmetic",
        description="arithmetic | countdown (generated, harness.tasks.TASKS) | dataset (the rows of task.data)",
    )
    difficulty_mix: dict[str, float] | None = Field(
        None, description="weight per difficulty bucket, e.g. {easy: 1, hard: 1}"
    )
    options: dict[str, Any] = Field(default_factory=dict, description="other constructor arguments of the task")
    data: DataSection | None = Field(None, description="task.name=dataset: the data files and which fields to read")
    rewards: list[RewardSection] = Field(
        default_factory=list,
        description="task.name=dataset: verifiers and reward "
        "functions, each logged as reward/<name>; the total is their weighted sum",
    )
    correct: str | None = Field(
        None,
        description="the reward (by name) whose verdict is 'correct' for pass@k, "
        "reward/accuracy and length/correct; default: the first verifier, else the first reward",
    )
    reward_timeout: float = Field(
        5.0,
        gt=0,
        description="seconds each reward may take on one completion; over it: "
        "reward 0, not correct, counted in reward/timeouts",
    )
    reward_workers: int | None = Field(
        None,
        ge=0,
        description="worker processes that score completions (0: the "
        "trainer's process); null: 2 when a reward is math, regex or a function, else 0",
    )
    reward_combine: Literal["sum_then_normalize", "normalize_then_sum"] = Field(
        "sum_then_normalize",
        description="how the rewards make the one reward the objective sees (TRL: multi_objective_aggregation). "
        "sum_then_normalize: their weighted sum (the objective's baseline/scale normalise it); "
        "normalize_then_sum: each reward normalised within its group (objective.std, objective.adv_eps), then "
        "weighted and summed (GDPO 2601.05242, verl gdpo); a dataset task's task.rewards, a generated task's "
        "correct + format_weight * format",
    )
    hacking_window: int = Field(
        10,
        ge=2,
        description="the reward-hacking probe (a reward model and a verifier both scoring): steps over which "
        "hacking/gap_trend is fitted, and the window in which a rising proxy with a falling verified accuracy "
        "warns once",
    )


class WarmStartSection(_Section):
    enabled: bool = Field(True, description="SFT the freshly built model on task demonstrations before RL (cached)")
    steps: int = Field(300, ge=0, description="SFT optimizer steps")
    batch_size: int = Field(64, ge=1, description="demonstrations per SFT optimizer step")
    lr: float = Field(3e-3, gt=0, description="SFT learning rate (AdamW, no weight decay)")
    threads: int = Field(
        2,
        ge=1,
        description="torch CPU threads of the SFT, held fixed whatever the load (the thread governor does "
        "not act) and part of the cache key: the thread count changes a long SFT's weights, so the same "
        "warm start is rebuilt from the same config on the same CPU (docs/reproducibility.md)",
    )
    cache_dir: str = Field(
        "results/warmstart", description="checkpoints are cached here, keyed by model+task+SFT settings"
    )
    pretrained: bool = Field(
        False,
        description="also SFT a pretrained model (smollm2-135m or a folder) before RL, on "
        "the task's demonstrations (a dataset's task.data.solution_key); off: a pretrained model "
        "starts from its own weights",
    )


class RolloutSection(_Section):
    backend: Literal["hf", "vllm"] = Field("hf", description="generation engine: hf (transformers generate) or vllm")
    temperature: float = Field(1.0, gt=0, description="sampling temperature of the training rollouts")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus sampling of the training rollouts (1 = all tokens)")
    max_new_tokens: int = Field(64, ge=1, description="response length cap; a response hitting it is truncated")
    gpu_memory_utilization: float = Field(0.3, gt=0, le=1, description="vllm only (on CPU it is a share of RAM)")
    dtype: Literal["float32", "bfloat16"] = Field(
        "float32", description="precision of the rollout engine (bf16 vs fp32 training = mismatch)"
    )
    router_noise: float = Field(
        0.0, ge=0, description="MoE: std of Gaussian noise added to router logits at rollout only"
    )
    seeding: Literal["batch", "prompt"] = Field(
        "batch",
        description="hf: how sampling is seeded. batch: one seed per generate call (a prompt's samples depend on "
        "the other prompts of the batch); prompt: each row from its own seed (run seed, step, the prompt's index "
        "in the batch, its sample number), so a prompt samples the same on any number of processes "
        "(needed by train.nproc > 1; docs/scale.md). vllm always seeds per prompt",
    )
    share_prefix: bool | Literal["auto"] = Field(
        "auto",
        description="hf: prefill each prompt once and copy its KV cache to its group_size rows (G x fewer "
        "prefill rows; the prefill rounds as a batch of other width, so a sampled token may differ at a "
        "near-tie: off by default, so runs and reports keep their numbers). vllm shares prefixes always. "
        "Not with an MoE (its routing record reads generate's own prefill). auto = false on a CPU and on CUDA "
        "(a CPU lever: its 4-D masks keep SDPA off the flash kernel on a GPU)",
    )
    compile: bool | Literal["auto"] = Field(
        "auto",
        description="hf: generate with a static KV cache and the decoding forward under torch.compile (CUDA "
        "graphs); not with an MoE, rollout.share_prefix or router noise. auto = true on CUDA, false on a CPU "
        "(measured not to pay there: docs/speed.md)",
    )
    vllm_sleep: bool | Literal["auto"] = Field(
        "auto",
        description="vllm on CUDA: the engine sleeps (its KV cache freed, weights released) between rollouts, "
        "so the update has the GPU's memory; woken before the next generate. auto = true on CUDA, false on a CPU "
        "(vLLM's CPU engine has no sleep mode)",
    )
    sync_bucket_mb: Annotated[int, Field(ge=0)] | Literal["auto"] = Field(
        "auto",
        description="vllm: the weight sync loads the weights in buckets of this many MB (model.load_weights per "
        "bucket); 0 = one layerwise in-place reload of every weight (the CPU's: its packed GEMM layout needs it). "
        "auto = 0 on a CPU, 512 on CUDA",
    )
    min_new_tokens: int = Field(
        0,
        ge=0,
        description="hf and vllm: EOS cannot end a response before this many tokens (transformers' min_new_tokens, "
        "vLLM's min_tokens); 0 = off. `harness bench --fixed-length` sets it to max_new_tokens, so that every "
        "response is exactly max_new_tokens long and two trainers generate the same tokens. Stop strings still end "
        "a response",
    )
    stop: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list,
        description="stop strings: a response ends after the first one it writes (kept in its "
        "text; the response counts as finished, not truncated), as at EOS; hf and vllm",
    )
    max_prompt_tokens: int | None = Field(
        None,
        ge=1,
        description="dataset tasks: prompts longer than this many tokens "
        "(chat template included) are dropped or refused (overlong_prompts); "
        "verl: data.max_prompt_length",
    )
    overlong_prompts: Literal["drop", "error"] = Field(
        "drop",
        description="a prompt over max_prompt_tokens, or over the model's positions less max_new_tokens: drop it "
        "(the count per split is printed and logged) or stop with an error naming the longest "
        "(verl: data.filter_overlong_prompts)",
    )
    staleness: int = Field(
        0,
        ge=0,
        description="the batch of step t is generated by the weights of step t - k (PipelineRL 2509.19128, "
        "ScaleRL 2510.13786: the engine syncs k updates late; the first k steps sample with the initial "
        "weights); pi_old is that sampler's policy, so the importance ratio carries the staleness (the sampler's "
        "log-probs where train.old_logp may reuse them, else a forward with the stale weights). Logged as "
        "staleness/steps; the mismatch metrics compare the sampler with the current policy. 0 = on-policy "
        "(docs/scale.md)",
    )

    @model_validator(mode="after")
    def _min_fits_max(self) -> RolloutSection:
        if self.min_new_tokens > self.max_new_tokens:
            raise ValueError(
                f"rollout.min_new_tokens={self.min_new_tokens} exceeds rollout.max_new_tokens={self.max_new_tokens}; "
                "allowed: 0 to max_new_tokens"
            )
        return self


class TrainSection(_Section):
    steps: int = Field(30, ge=1, description="policy iterations (rollout + update)")
    prompts_per_step: int = Field(16, ge=1, description="N prompts per iteration")
    group_size: int = Field(8, ge=1, description="G responses per prompt")
    lr: float = Field(1e-4, gt=0, description="policy learning rate (AdamW)")
    critic_lr: float = Field(1e-3, gt=0, description="PPO value model learning rate (objective.baseline=critic)")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay of the policy")
    betas: tuple[Annotated[float, Field(ge=0, lt=1)], Annotated[float, Field(ge=0, lt=1)]] = Field(
        (0.9, 0.999), description="AdamW (beta1, beta2), each in [0, 1) (policy and critic optimizers)"
    )
    inner_epochs: int = Field(1, ge=1, description="K passes over each rollout batch")
    mini_batches: int = Field(1, ge=1, description="optimizer steps per epoch (>1 makes later steps off-policy)")
    micro_batch_size: Annotated[int, Field(ge=1)] | None | Literal["auto"] = Field(
        "auto",
        description="rows per forward/backward; None = whole mini-batch; auto = None on a CPU, on CUDA the largest "
        "divisor of the mini-batch whose rows x (rollout.max_prompt_tokens or 256 + rollout.max_new_tokens) fit "
        "32768 tokens (micro-batches sized by tokens)",
    )
    old_logp: Literal["recompute", "rollout", "auto"] = Field(
        "recompute",
        description="pi_old's log-probs for the ratio when mini_batches/inner_epochs > 1: 'recompute' "
        "them with a no-grad forward of the policy; 'rollout' reuses the sampler's (exact only for an hf rollout in "
        "the policy's dtype, top_p 1, no router noise, no TIS; saves one forward per step); 'auto' = rollout where "
        "that is exact, else recompute",
    )
    grad_clip: float | None = Field(
        1.0,
        gt=0,
        description="clip each trained module's gradient to this global L2 norm before its step; None = no clipping",
    )
    max_refill_rounds: int = Field(
        4, ge=0, description="dynamic sampling: extra sampling rounds to refill dropped groups"
    )
    checkpoint_every: int = Field(5, ge=1, description="checkpoint (and flush metrics) every N steps")
    checkpoint_background: bool = Field(
        False,
        description="write each checkpoint (and then flush its metrics) in a thread while the next steps run: the "
        "step waits only for a copy of the weights and optimizer state (memory for one more copy of them) and for "
        "the previous write. Still atomic and resumable; a write's error surfaces at the next checkpoint. The "
        "same run either way (docs/faults.md)",
    )
    samples_to_log: int = Field(8, ge=0, description="completions written to samples.jsonl per step")
    threads: int | None = Field(None, ge=1, description="torch CPU threads (None = torch default)")
    nan_policy: Literal["stop", "skip_step"] = Field(
        "stop",
        description="NaN or inf in a reward, loss or gradient: 'stop' the run naming the step and the tensor "
        "(checkpoints before it intact), or 'skip_step': skip that step's update and go on (docs/faults.md)",
    )
    grad_share_every: int = Field(
        0,
        ge=0,
        description="every N steps, measure the gradient-norm share of the extreme "
        "groups (p < 0.2 or p > 0.8) with one extra forward/backward (grad/share_extreme, "
        "harness/train/diagnostics/group_stats.py); 0 = off",
    )
    component_warmup_steps: int = Field(
        0,
        ge=0,
        description="the first N steps train only the trained components "
        "(PRIME's reward model, PPO's critic) on the initial policy's rollouts; the "
        "policy is not updated (verl's trainer.critic_warmup); its steps count in "
        "train.steps",
    )
    gradient_checkpointing: bool = Field(
        False,
        description="activation checkpointing of the policy (transformers' "
        "gradient_checkpointing_enable, use_reentrant=False): each layer's activations "
        "are recomputed in the backward instead of kept; same gradients, less memory, "
        "one more forward per layer",
    )
    share_prefix: bool | Literal["auto"] = Field(
        "auto",
        description="the trainer's forwards (update, pi_old, pi_ref) run a prompt once for its rows of a "
        "micro-batch (the G samples of a group, contiguous) and the responses on its KV cache, the gradient "
        "flowing back through it (harness/models/prefix_groups.py): (G - 1) x the prompt's tokens less work a "
        "group. The same log-probs and gradients up to rounding (~1e-5: docs/speed.md), so off by default. Not "
        "with an MoE, train.gradient_checkpointing or train.parallel=fsdp. auto = false on a CPU and on CUDA (on "
        "an H200 it doubled the update: its 4-D masks keep SDPA off the flash kernel)",
    )
    autocast: Literal["bf16", "auto"] | None = Field(
        "auto",
        description="mixed precision: the trainer's forwards (update, "
        "pi_old, pi_ref) under torch.autocast in bf16, weights and optimizer state "
        "in fp32 (model.dtype=float32); null = off. The rollout keeps rollout.dtype: "
        "mismatch/* shows the cost. CPUs without avx512_bf16/amx_bf16 run bf16 "
        "matmuls far slower than fp32 (a warning says so). auto = null on a CPU, bf16 on CUDA (null there "
        "when model.dtype is bfloat16)",
    )
    tf32: bool | Literal["auto"] = Field(
        "auto",
        description="CUDA: fp32 matrix products on TF32 tensor cores (torch.backends.cuda.matmul.allow_tf32, "
        "set_float32_matmul_precision('high')); no effect on a CPU. auto = false on a CPU, true on CUDA",
    )
    ref_compute_dtype: bool | Literal["auto"] = Field(
        "auto",
        description="the frozen reference pi_ref stored in the compute dtype (bf16 under train.autocast=bf16) "
        "instead of fp32 weights re-cast by autocast in every forward; not with model.lora (pi_ref is the "
        "base). auto = false on a CPU, true on CUDA under bf16 autocast",
    )

    nproc: int = Field(
        1,
        ge=1,
        description="processes of one run (data parallel, torch.distributed: gloo on CPU, nccl on "
        "CUDA); `harness train CONFIG --nproc N` sets it and launches torchrun. Not part of what the "
        "run computes: a run may resume with another count (docs/scale.md). Needs rollout.seeding=prompt",
    )
    parallel: Literal["ddp", "fsdp"] = Field(
        "ddp",
        description="how the processes of train.nproc > 1 hold the models: 'ddp' (each holds them whole; "
        "gradients summed) or 'fsdp' (torch's FSDP2 fully_shard: each holds 1/N of every parameter, gradient "
        "and AdamW moment; the whole weights are gathered for generation and the no-grad forwards). The "
        "same update either way (docs/scale.md); checkpoints hold whole tensors under both. One process: no "
        "difference",
    )

    @field_validator("autocast", mode="before")
    @classmethod
    def _autocast_off(cls, value: Any) -> Any:
        if value is False:  # YAML reads `off`, `no`, `false` as False: off
            return None
        if value is True:
            raise ValueError("name the precision (bf16), or null / false for off")
        return value


class EvalSection(_Section):
    every: int = Field(10, ge=0, description="eval every N steps (0 = only at start and end)")
    spacing: Literal["every", "log"] = Field(
        "every",
        description="every: an eval every `every` steps; log: `points` evals after step 0, evenly spaced in "
        "log compute (docs/fit.md), the last at train.steps (`every` is then not read)",
    )
    points: int | None = Field(None, description="with spacing log: evals after step 0, 4 to train.steps")
    num_prompts: int = Field(64, ge=1, description="held-out prompts per eval (drawn once by eval.seed)")
    n_samples: int = Field(8, ge=1, description="samples per prompt for pass@k")
    ks: list[int] = Field(default_factory=lambda: [1, 8], description="the k of every pass@k logged (eval/pass_at_{k})")
    temperature: float = Field(1.0, gt=0, description="sampling temperature of the held-out eval")
    seed: int = Field(
        0,
        description="seed of the held-out prompt set: the same prompts for every run seed and "
        "every cell, so runs are compared (and paired across seeds) on one set",
    )

    @model_validator(mode="after")
    def _ks_fit(self) -> EvalSection:
        bad = [k for k in self.ks if k < 1 or k > self.n_samples]
        if bad:
            raise ValueError(f"eval.ks {bad} must lie in [1, eval.n_samples={self.n_samples}]")
        if self.spacing == "log" and (self.points is None or self.points < 4):
            raise ValueError(
                f"eval.points={self.points} with eval.spacing=log: allowed 4 to train.steps (a fit of "
                "R(C) needs at least 4 evals after the first)"
            )
        if self.spacing == "every" and self.points is not None:
            raise ValueError(f"eval.points={self.points} is read only with eval.spacing=log; set both, or neither")
        return self

    def log_steps(self, steps: int) -> list[int]:
        """The steps whose record carries an eval under spacing log: `points` of them, the last `steps` (the
        final record), as even as integers allow in log(step) (compute grows about linearly with steps)."""
        n = self.points or 0
        out: list[int] = []
        for i in range(n):
            target = round(steps ** (i / (n - 1)))
            out.append(max(target, out[-1] + 1 if out else 1))
        for i in range(n - 1, -1, -1):  # from the top: leave room for the ones above
            out[i] = min(out[i], steps - (n - 1 - i))
        return out


class TrackingSection(_Section):
    mlflow: bool = Field(True, description="log to MLflow (MLFLOW_TRACKING_URI, else sqlite under results/)")
    experiment: str = Field("harness", description="MLflow experiment name")
    run_name: str | None = Field(None, description="MLflow run name; None = the run directory's name")
    tags: dict[str, str] = Field(default_factory=dict, description="MLflow tags, e.g. the grid axes of a cell")


class DpoSection(_Section):
    """Offline preference training, used only with objective.preset=dpo (harness/train/dpo/step.py).
    The optimizer settings come from `train` (lr, betas, weight_decay, grad_clip,
    checkpoint_every, threads); train.steps, prompts_per_step and group_size are unused."""

    pairs: str = Field(
        "generate",
        min_length=1,
        description="'generate': sample the warm-started policy on train-split "
        "prompts, correct answer = chosen, wrong = rejected, once (saved to DIR/pairs.jsonl); or the path "
        "of a JSONL file with one {prompt, chosen, rejected, difficulty} object per line",
    )
    num_prompts: int = Field(
        128,
        ge=1,
        description="pairs=generate: train-split prompts to sample (those with no correct "
        "or no wrong answer give no pair)",
    )
    samples_per_prompt: int = Field(
        8, ge=2, description="pairs=generate: samples per prompt, to find one correct and one wrong answer"
    )
    batch_size: int = Field(16, ge=1, description="preference pairs per optimizer step")
    epochs: int = Field(
        2, ge=1, description="passes over the pairs, reshuffled each epoch; steps = epochs * ceil(pairs / batch_size)"
    )
    max_steps: int | None = Field(
        None, ge=1, description="stop after this many optimizer steps in all (None = all epochs of all rounds)"
    )
    pairs_per_prompt: int = Field(
        1,
        ge=1,
        description="pairs=generate: up to this many (correct, wrong) pairs per "
        "prompt, each sample used once (<= samples_per_prompt // 2)",
    )
    rounds: int = Field(
        1,
        ge=1,
        description="iterative DPO/RPO (2404.19733): round r rebuilds the pairs from the "
        "policy at its start on fresh prompts, with that policy as the reference; pairs=generate only",
    )

    @model_validator(mode="after")
    def _pairs_knobs(self) -> DpoSection:
        if self.pairs_per_prompt > self.samples_per_prompt // 2:
            raise ValueError(
                f"dpo.pairs_per_prompt={self.pairs_per_prompt} cannot exceed dpo.samples_per_prompt // 2 "
                f"= {self.samples_per_prompt // 2} (a pair uses one correct and one wrong sample)"
            )
        if self.rounds > 1 and self.pairs != "generate":
            raise ValueError(
                f"dpo.rounds={self.rounds} needs dpo.pairs=generate (each round samples new pairs from "
                f"the current policy); a pairs file ({self.pairs!r}) allows rounds=1 only"
            )
        return self


TRAINERS = ("rl", "dpo")  # harness/train/run/shell.py make_trainer


class RunConfig(_Section):
    seed: int = Field(0, description="seed of the run: its prompts, samples, mini-batch order and weight init")
    trainer: Literal["rl", "dpo"] = Field(
        "rl",
        description="rl: the RL loop (rollouts, advantages, policy loss); dpo: the preference-pair trainer. "
        "Set by objective.preset (dpo -> dpo, every other preset -> rl); naming it is optional",
    )
    model: ModelSection = Field(default_factory=ModelSection)
    task: TaskSection = Field(default_factory=TaskSection)
    warm_start: WarmStartSection = Field(default_factory=WarmStartSection)
    rollout: RolloutSection = Field(default_factory=RolloutSection)
    train: TrainSection = Field(default_factory=TrainSection)
    eval: EvalSection = Field(default_factory=EvalSection)
    tracking: TrackingSection = Field(default_factory=TrackingSection)
    objective: ObjectiveConfig = Field(default_factory=lambda: ObjectiveConfig.preset("grpo"))
    dpo: DpoSection = Field(default_factory=DpoSection)
    # the levers left `auto` -> what they became on `_device` (harness/device_defaults.py; _resolve_auto)
    _auto: dict[str, Any] = PrivateAttr(default_factory=dict)
    _device: str = PrivateAttr("cpu")

    @model_validator(mode="before")
    @classmethod
    def _build_objective(cls, data: Any) -> Any:
        """`objective: {preset: NAME, knob: value}` -> ObjectiveConfig.preset(NAME, knob=value);
        the Dr.GRPO constant defaults to rollout.max_new_tokens."""
        if not isinstance(data, dict) or not isinstance(data.get("objective", {}), dict):
            return data
        obj = dict(data.get("objective") or {})
        import_plugins(obj.get("plugins"))  # their presets, modes and knobs exist from here on
        for k, v in obj.items():
            fld = ObjectiveConfig.model_fields.get(k)
            if fld is not None and bool_as_number(fld.annotation, v):
                raise ValueError(f"objective.{k}={v!r}: a boolean where a number is expected; write a number")
        preset = obj.pop("preset", None)
        if preset is not None:
            obj["algorithm"] = preset  # ObjectiveConfig checks the name (presets.preset_knobs)
        max_new = (data.get("rollout") or {}).get("max_new_tokens", RolloutSection().max_new_tokens)
        agg = obj.get("agg", PRESETS.get(obj.get("algorithm"), {}).get("agg", knob_default("agg")))
        if agg == "seq_mean_token_sum_norm" and obj.get("norm_constant") is None:
            obj["norm_constant"] = float(max_new)  # Dr.GRPO's constant: the max generation length
        data = with_preset_run_keys(data, obj.get("algorithm", "custom"))  # e.g. scalerl: model.lm_head_fp32
        if "trainer" not in data:  # the preset sets it
            return {**data, "objective": obj, "trainer": preset_trainer(obj.get("algorithm", "custom"))}
        return {**data, "objective": obj}

    @model_validator(mode="after")
    def _combinations(self) -> RunConfig:
        self._resolve_auto(device_defaults.run_device())
        o, t = self.objective, self.train
        want = preset_trainer(o.algorithm)
        if self.trainer != want:
            raise ValueError(
                f"trainer={self.trainer!r} cannot run objective.preset={o.algorithm!r}, which runs under "
                f"trainer={want!r}; allowed trainer values: {list(TRAINERS)} (drop the key: the preset "
                "sets it)"
            )
        rl = self.trainer == "rl"  # the DPO trainer reads no group, clip or batch-shape knob
        if rl:
            self._objective_run_knobs()
            self._warmup_knobs()
        rows = t.prompts_per_step * t.group_size
        if rows % t.mini_batches:
            raise ValueError(f"train.mini_batches={t.mini_batches} must divide prompts_per_step*group_size={rows}")
        mb = rows // t.mini_batches
        if t.micro_batch_size is not None and mb % t.micro_batch_size:
            raise ValueError(f"train.micro_batch_size={t.micro_batch_size} must divide the mini-batch size {mb}")
        if o.ratio == "none" and (t.mini_batches > 1 or t.inner_epochs > 1):
            warnings.warn(
                f"objective.ratio=none (e.g. gpg) with train.mini_batches={t.mini_batches}, "
                f"inner_epochs={t.inner_epochs}: every optimizer step after the first of a batch uses "
                "stale samples with no importance correction; set both to 1 for on-policy REINFORCE",
                ConfigWarning,
                stacklevel=2,
            )
        if t.old_logp == "rollout" and (why := self.rollout_logp_inexact()):
            raise ValueError(
                f"train.old_logp='rollout' needs the sampler's log-probs to be the policy's, but {why}; "
                "use train.old_logp=recompute (or auto)"
            )
        if o.overlong_buffer and o.overlong_buffer >= self.rollout.max_new_tokens:
            raise ValueError(
                f"objective.overlong_buffer={o.overlong_buffer} must be < rollout.max_new_tokens={self.rollout.max_new_tokens}"
            )
        if self.task.name not in _task_names():
            raise ValueError(f"task.name={self.task.name!r} is unknown; allowed: {sorted(_task_names())}")
        self._task_knobs()
        self._model_knobs()
        self._critic_init_knobs()
        self._scale_knobs()
        self._moe_knobs()
        self._eval_knobs()
        self._staleness_knobs()
        errors, notes = self._ignored_knobs()
        if errors:
            raise ValueError("; ".join(errors))
        for note in notes:
            warnings.warn(note, ConfigWarning, stacklevel=2)
        return self

    def _resolve_auto(self, device: str) -> None:
        """Every lever left `auto` (harness/device_defaults.py) set to its value on `device`, before any check
        reads it; the levers and what they became are kept (auto_levers) and written back as `auto` by
        to_dict(keep_auto=True). A lever already resolved (a copy of a resolved config) is not again."""
        sections = {"model": self.model, "train": self.train, "rollout": self.rollout}
        resolved = device_defaults.resolve(self._lever_values(), device)
        for key, value in resolved.items():
            section, name = key.split(".", 1)
            setattr(sections[section], name, value)
        self._auto, self._device = {**self._auto, **resolved}, device if resolved else self._device

    def __eq__(self, other: object) -> bool:
        """Equal when every knob is: a lever left auto equals its resolved value named explicitly (a run's
        config.yaml loaded again), whatever the private record of which levers were auto."""
        return isinstance(other, RunConfig) and self.__dict__ == other.__dict__

    __hash__ = None  # mutable, as pydantic's models

    def _lever_values(self) -> dict[str, Any]:
        """The dotted keys of the model, train and rollout sections -> their values (what a lever's auto reads)."""
        sections = {"model": self.model, "train": self.train, "rollout": self.rollout}
        values = {f"{n}.{k}": getattr(sec, k) for n, sec in sections.items() for k in type(sec).model_fields}
        values["model.lora"] = self.model.lora
        return values

    def _at_default(self, key: str, value: Any) -> bool:
        """Whether `value` of the dotted `key` is its default: the field's, or, for a lever whose default is auto,
        what auto becomes on this device (a resolved config loaded again names it explicitly)."""
        section, name = key.split(".", 1)
        default = _field_default(type(getattr(self, section)), name)
        if value == default or key in self._auto:
            return True
        if default != device_defaults.AUTO:
            return False
        values = {**self._lever_values(), key: device_defaults.AUTO}
        return device_defaults.resolve(values, device_defaults.run_device()).get(key) == value

    @property
    def auto_levers(self) -> dict[str, Any]:
        """{dotted key: value} of the levers this config left `auto`, as resolved for `auto_device`."""
        return dict(self._auto)

    @property
    def auto_device(self) -> str:
        return self._device

    def _eval_knobs(self) -> None:
        """eval.spacing=log: its points fit in train.steps, and the trainer's step count is known up front."""
        ev = self.eval
        if ev.spacing != "log":
            return
        if self.trainer == "dpo":
            raise ValueError(
                "eval.spacing=log: the DPO trainer's step count is known only once its pairs are built; "
                "allowed: eval.spacing=every"
            )
        if ev.points > self.train.steps:
            raise ValueError(
                f"eval.points={ev.points} with eval.spacing=log: allowed 4 to train.steps={self.train.steps} "
                "(one eval per step at most)"
            )

    def _objective_run_knobs(self) -> None:
        """What the selected modes need of the run (from their declarations, objective/knobs.py):
        train.group_size (a group statistic needs 2; pass@k needs k < G), and a clip distance
        eps_low / eps_high of 0 read by a clipping mode."""
        o = self.objective
        problems = knob_rules.group_size_problems(o, self.train.group_size)
        if problems:
            raise ValueError(problems[0])
        self._reward_combine_knobs()
        for k in ("eps_low", "eps_high"):
            v = getattr(o, k)
            if v is not None and v == 0 and knob_rules.reads(o, k):
                raise ValueError(
                    f"objective.{k}={v}: a clip distance of 0 pins the ratio's bound at 1, so every "
                    "token whose ratio moves past it gets no gradient; allowed: a value > 0"
                    f"{' (or null: no lower bound)' if k == 'eps_low' else ''}, or objective.clip=none"
                )

    def _reward_combine_knobs(self) -> None:
        """task.reward_combine=normalize_then_sum (GDPO) normalises each reward within its group: a group of
        two or more, and no greedy baseline (ReMax's single greedy response has no group)."""
        if self.task.reward_combine == "sum_then_normalize":
            return
        if self.train.group_size < 2:
            raise ValueError(
                f"task.reward_combine='normalize_then_sum' with train.group_size={self.train.group_size}: each "
                "reward is normalised within its group; allowed: train.group_size >= 2, or "
                "task.reward_combine='sum_then_normalize'"
            )
        if inputs_needed(self.objective).greedy_rewards:
            raise ValueError(
                f"task.reward_combine='normalize_then_sum' with objective.baseline={self.objective.baseline!r}: "
                "the greedy response the baseline scores has no group to be normalised in; allowed with it: "
                "task.reward_combine='sum_then_normalize'"
            )

    def _warmup_knobs(self) -> None:
        """train.component_warmup_steps: a trained component to warm up, and policy steps left after it."""
        n, steps = self.train.component_warmup_steps, self.train.steps
        if not n:
            return
        components = inputs_needed(self.objective).components
        if not components:
            raise ValueError(
                f"train.component_warmup_steps={n}: this objective trains no component to warm up; "
                "allowed: 0, or a positive number with objective.baseline=prime (its reward model) or "
                "critic (its value model), or agg=lambda_length"
            )
        if n >= steps:
            raise ValueError(
                f"train.component_warmup_steps={n} leaves no policy update in train.steps={steps}; "
                f"allowed: 0 to {steps - 1} (raise train.steps by the warm-up to keep the policy's steps)"
            )

    def _task_knobs(self) -> None:
        """Construct the task (cheap, no model) so that difficulty_mix and options fail here; a dataset
        task reads its files and checks its fields, rewards and reference answers (harness/tasks/dataset/)."""
        t = self.task
        if t.name == "dataset":
            self._dataset_knobs()
            return
        dataset_only = [
            f"task.{k}"
            for k in ("data", "rewards", "correct", "reward_timeout", "reward_workers", "hacking_window")
            if getattr(t, k) != _field_default(TaskSection, k)
        ]
        dataset_only += [f"rollout.{k}" for k in ("max_prompt_tokens",) if getattr(self.rollout, k) is not None]
        if dataset_only:
            raise ValueError(
                f"{', '.join(dataset_only)} configure a dataset task (task.name=dataset); task.name="
                f"{t.name!r} generates its problems and scores them itself: drop them, or set "
                "task.name=dataset"
            )
        if "difficulty_mix" in t.options:
            raise ValueError("task.options.difficulty_mix: set the mix as task.difficulty_mix (its own key)")
        try:
            make_task(t.name, difficulty_mix=t.difficulty_mix)
        except (ValueError, TypeError) as err:
            raise ValueError(f"task.difficulty_mix={t.difficulty_mix!r}: {err}") from None
        try:
            make_task(t.name, difficulty_mix=t.difficulty_mix, **t.options)
        except (ValueError, TypeError) as err:
            raise ValueError(f"task.options={t.options!r}: {err}") from None

    def _dataset_knobs(self) -> None:
        """task.name=dataset: its own keys set, the generated tasks' keys not; the files read, the fields,
        rewards and reference answers checked (memoised per process on the task section and the files)."""
        t = self.task
        if t.data is None:
            raise ValueError(
                "task.data: task.name=dataset needs task.data.train (a file or folder of rows) and the "
                "fields to read (prompt_key, answer_key); see docs/tasks.md"
            )
        for key in ("difficulty_mix", "options"):
            if getattr(t, key) != _field_default(TaskSection, key):
                raise ValueError(
                    f"task.{key}={getattr(t, key)!r} configures a generated task; a dataset task reads its "
                    "rows (filter them with task.data.where, limit them with task.data.max_train_rows)"
                )
        d = t.data
        if d.prompt_template is not None and d.prompt_key != _field_default(DataSection, "prompt_key"):
            raise ValueError(
                f"task.data.prompt_key={d.prompt_key!r} and task.data.prompt_template are both set; the "
                "template names its fields itself: drop one"
            )
        if d.difficulty_key is not None and d.difficulty_by_pass_rate is not None:
            raise ValueError(
                "task.data.difficulty_key and task.data.difficulty_by_pass_rate are both set; buckets come "
                "from one: drop one"
            )
        if d.eval is not None and d.eval_fraction != _field_default(DataSection, "eval_fraction"):
            raise ValueError(
                f"task.data.eval_fraction={d.eval_fraction} splits the train file when task.data.eval is "
                "null; task.data.eval is set: drop eval_fraction"
            )
        if self.uses_warm_start() and d.solution_key is None:
            why = (
                "warm_start.pretrained=true"
                if self.model.name not in _TINY
                else f"model.name={self.model.name!r} is built fresh and warm_start.enabled=true"
            )
            raise ValueError(
                f"task.data.solution_key: {why} trains an SFT warm start on the dataset's worked solutions; "
                "name the solution field, or set warm_start.enabled=false (warm_start.pretrained=false for a "
                "pretrained model)"
            )
        if self.trainer == "rl" and t.rewards and all(r.weight == 0 for r in t.rewards):
            raise ValueError(
                f"task.rewards: every weight is 0 ({[r.weight for r in t.rewards]}), so every completion's reward "
                "is 0 and the policy has nothing to learn; give at least one reward a weight other than 0"
            )
        self._reward_model_knobs()
        memo = json.dumps([t.model_dump(mode="json"), self.model.name], sort_keys=True, default=str)
        stats = _data_stats(d)
        if _CHECKED_DATA.get(memo) == stats:
            return
        task = task_from_config(t)
        check_reference_answers(task, d.check_answers)
        _CHECKED_DATA[memo] = stats

    def _reward_model_knobs(self) -> None:
        """task.rewards[i].model: a sequence classifier with one label whose tokenizer loads and whose score of a
        sample is finite (loaded once per process and folder state, on the CPU, before the policy loads);
        task.hacking_window only where the probe runs (a reward model and a verifier or function)."""
        t = self.task
        models = [
            (i, r.model) for i, r in enumerate(t.rewards) if r.model is not None and not (r.verifier or r.function)
        ]
        for i, path in models:
            folder = Path(path)
            if str(path) in PENDING_REWARD_MODELS and not (folder.is_dir() and any(folder.iterdir())):
                continue  # a study's reward model, not yet written (train-rm writes its folder whole, at the end)
            problem = classifier_problem(Path(path))
            if problem is None:
                memo = (str(Path(path).resolve()), _folder_stats(Path(path)))
                problem = _CHECKED_RM.get(memo) or reward_model_problem(path)
                _CHECKED_RM[memo] = problem or ""
            if problem:
                raise ValueError(f"task.rewards[{i}].model={path!r} is not a reward model: {problem}")
        rules = [r for r in t.rewards if r.model is None]
        if t.hacking_window != _field_default(TaskSection, "hacking_window") and not (models and rules):
            raise ValueError(
                f"task.hacking_window={t.hacking_window} sets the reward-hacking probe's window, which runs only "
                "where a reward model (task.rewards[i].model) and a verifier or function both score: drop it"
            )

    def uses_warm_start(self) -> bool:
        """Whether the run starts from an SFT warm start: a freshly built tiny model with
        warm_start.enabled, or a pretrained one with warm_start.enabled and warm_start.pretrained."""
        ws = self.warm_start
        return ws.enabled and (self.model.name in _TINY or ws.pretrained)

    def _model_knobs(self) -> None:
        """A model.name folder must hold a model; model.overrides keys and values must fit its config class."""
        m = self.model
        if m.name not in MODEL_NAMES:
            problem = folder_problem(Path(m.name))
            if problem:
                raise ValueError(
                    f"model.name={m.name!r} is a folder but not a Hugging Face model: {problem}; "
                    f"allowed: one of {list(MODEL_NAMES)} or a saved model folder"
                )
        if m.overrides:
            _check_model_overrides(m.name, m.overrides)
        n = m.overrides.get("max_position_embeddings", 1)
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"model.overrides.max_position_embeddings={n!r}: allowed: an integer >= 1")
        if m.lm_head_fp32 and self.rollout.backend == "vllm" and self.rollout.dtype != "float32":
            raise ValueError(
                f"model.lm_head_fp32=true with rollout.backend='vllm' and rollout.dtype={self.rollout.dtype!r}: the "
                "vLLM engine computes its head in rollout.dtype, so the sampler's logits would not be fp32; allowed: "
                "rollout.dtype=float32 (or rollout.backend=hf)"
            )
        positions = model_positions(m.name, m.overrides)
        if positions is not None and self.rollout.max_new_tokens >= positions:
            raise ValueError(
                f"rollout.max_new_tokens={self.rollout.max_new_tokens} leaves no room for a prompt in the {positions} "
                f"positions (max_position_embeddings) of model.name={m.name!r}; allowed: below {positions}, less "
                "the longest prompt"
            )

    def _critic_init_knobs(self) -> None:
        """model.critic_init: a critic to initialise (objective.baseline=critic), a sequence classifier with one
        label, whose vocabulary is the policy's (where both configs say)."""
        path = self.model.critic_init
        if path is None:
            return
        if "values" not in inputs_needed(self.objective).components:
            raise ValueError(
                f"model.critic_init={path!r} initialises PPO's critic, and objective.preset={self.objective.algorithm} "
                f"has none (objective.baseline={self.objective.baseline!r}); set objective.baseline=critic (the ppo "
                "preset), or drop it"
            )
        problem = classifier_problem(Path(path))
        if problem:
            raise ValueError(f"model.critic_init={path!r} is not a reward model: {problem}")
        theirs = json.loads((Path(path) / "config.json").read_text()).get("vocab_size")
        ours = policy_vocab(self.model.name, self.model.overrides)
        if theirs is not None and ours is not None and theirs != ours:
            raise ValueError(
                f"model.critic_init={path!r} has vocab_size={theirs}, the policy model.name={self.model.name!r} "
                f"{ours}: the critic reads the policy's tokens, so it must share the policy's tokenizer"
            )

    def _scale_knobs(self) -> None:
        """model.lora: its target modules exist on the model (built without weights) and it is not combined with
        what needs a second copy of the policy; train.autocast: fp32 weights, and a warning on a CPU whose bf16
        matmuls are slow (docs/scale.md)."""
        m, t, o = self.model, self.train, self.objective
        if m.lora is not None:
            if o.ref_update_every:
                raise ValueError(
                    f"objective.ref_update_every={o.ref_update_every} with model.lora: the reference is the "
                    "base with the adapters disabled (no copy of the weights), so it cannot move to the "
                    "current policy; set objective.ref_update_every=0, or drop model.lora"
                )
            check_lora_targets(m.name, m.overrides, m.lora.target_modules)
        if t.gradient_checkpointing:
            if o.routing_replay:
                raise ValueError(
                    "train.gradient_checkpointing=true with objective.routing_replay=true: the replayed "
                    "expert choices are forced only during the forward, so the backward's recompute would "
                    "route by the router's own choices (torch.utils.checkpoint refuses the mismatch); set "
                    "one of them false"
                )
            arch = meta_model(m.name, m.overrides)
            if not getattr(arch, "supports_gradient_checkpointing", False):
                raise ValueError(
                    f"train.gradient_checkpointing=true: model.name={m.name!r} ({type(arch).__name__}) "
                    "does not support activation checkpointing in transformers; set it false"
                )
        if t.nproc > 1 and self.rollout.backend == "hf" and self.rollout.seeding != "prompt":
            raise ValueError(
                f"train.nproc={t.nproc} with rollout.seeding={self.rollout.seeding!r}: batch seeding draws a "
                "prompt's samples from one seed per generate call, so they would depend on which process "
                "drew the prompt; set rollout.seeding=prompt (and the same in the 1-process arm you compare with)"
            )
        if t.share_prefix and t.gradient_checkpointing:
            raise ValueError(
                "train.share_prefix=true with train.gradient_checkpointing=true: transformers turns the KV cache "
                "off under activation checkpointing, and the responses run on their prompt's cache; set one of "
                "them false"
            )
        if t.parallel == "fsdp":
            self._fsdp_knobs()
        if t.autocast is not None:
            if m.dtype != "float32":
                raise ValueError(
                    f"train.autocast={t.autocast!r} keeps fp32 master weights and computes in bf16; "
                    f"model.dtype={m.dtype!r} already stores the weights in bf16 (pure bf16): set "
                    "model.dtype=float32, or train.autocast=null"
                )
            if why := bf16_slow_reason():
                warnings.warn(f"train.autocast={t.autocast!r}: {why}", ConfigWarning, stacklevel=2)

    def _staleness_knobs(self) -> None:
        """rollout.staleness: the RL loop's (the DPO trainer samples its pairs once a round); a loss without an
        importance ratio trains on the stale samples uncorrected (a warning: how a loss tolerates it is a question)."""
        k = self.rollout.staleness
        if not k:
            return
        if self.trainer != "rl":
            raise ValueError(
                f"rollout.staleness={k} with trainer={self.trainer!r}: only the RL loop samples with stale weights; "
                "allowed: 0 here"
            )
        if self.objective.ratio == "none":
            warnings.warn(
                f"rollout.staleness={k} with objective.ratio=none: the samples come from the weights of {k} "
                "updates ago and no importance ratio corrects for it",
                ConfigWarning,
                stacklevel=2,
            )

    def _fsdp_knobs(self) -> None:
        """What train.parallel=fsdp does not combine with (docs/scale.md)."""
        if self.model.lora is not None:
            raise ValueError(
                "train.parallel='fsdp' with model.lora: sharded LoRA adapters are not built; LoRA's frozen base "
                "is what makes the model fit, so run it with train.parallel=ddp (each process holds the base, "
                "the adapters' gradients are summed), or drop model.lora"
            )
        if self.train.share_prefix:
            raise ValueError(
                "train.parallel='fsdp' with train.share_prefix=true: a micro-batch's two forwards (the prompts, "
                "then the responses on their cache) under fully_shard are not tested; set train.share_prefix=false "
                "(or train.parallel=ddp)"
            )
        if self.train.grad_share_every:
            raise ValueError(
                f"train.parallel='fsdp' with train.grad_share_every={self.train.grad_share_every}: the "
                "extreme-group gradient diagnostic back-propagates on whole groups outside the update's "
                "lockstep; set train.grad_share_every=0 (or train.parallel=ddp)"
            )

    def _ignored_knobs(self) -> tuple[list[str], list[str]]:
        """(errors, warnings): knobs set away from their default (objective knobs: from the preset's
        value) that the chosen trainer or objective would not read: the objective's knobs and the run
        keys (train.*) its modes read, from the modes' declarations (harness/objective/knobs.py)."""
        o = self.objective
        if self.trainer == "dpo":
            return self._dpo_ignores()
        errors = knob_rules.unread_problems(o, o.preset_value, o.knob_names())
        dpo = [
            f"dpo.{k}={_show(getattr(self.dpo, k))}"
            for k in DpoSection.model_fields
            if getattr(self.dpo, k) != _field_default(DpoSection, k)
        ]
        dpo += [f"objective.{k}={getattr(o, k)!r}" for k in DPO_OBJECTIVE_KNOBS if getattr(o, k) != o.preset_value(k)]
        if dpo:
            errors.append(
                f"{', '.join(dpo)} only apply with objective.preset=dpo (the offline DPO trainer); "
                f"objective.preset={o.algorithm} runs the RL loop, which ignores them: remove them"
            )
        for key in knob_rules.run_key_readers():
            section, name = key.split(".", 1)
            value = getattr(getattr(self, section), name)
            if not self._at_default(key, value):
                if msg := knob_rules.unread_message(o, key, _show(value) if isinstance(value, tuple) else value):
                    errors.append(msg)
        ws, r = self.warm_start, self.rollout
        if ws.pretrained and (not ws.enabled or self.model.name in _TINY):
            why = (
                "warm_start.enabled=false"
                if not ws.enabled
                else f"model.name={self.model.name!r} is built fresh (its "
                "warm start is governed by warm_start.enabled alone)"
            )
            errors.append(
                f"warm_start.pretrained=true asks for an SFT warm start of a pretrained model, and {why}: drop it"
            )
        if (
            r.max_prompt_tokens is None
            and self.task.name != "dataset"
            and r.overlong_prompts != _field_default(RolloutSection, "overlong_prompts")
        ):
            errors.append(
                f"rollout.overlong_prompts={r.overlong_prompts!r} says what to do with prompts over "
                "rollout.max_prompt_tokens, which is not set"
            )
        return errors, []

    def _dpo_ignores(self) -> tuple[list[str], list[str]]:
        """The DPO trainer reads only the dpo_* objective knobs and train's optimizer knobs."""
        o, t = self.objective, self.train
        errors, notes = [], []
        bad = [
            f"objective.{k}={getattr(o, k)!r}"
            for k in o.knob_names()
            if k not in DPO_OBJECTIVE_KNOBS + ("algorithm", "plugins") and getattr(o, k) != o.preset_value(k)
        ]
        if bad:
            errors.append(
                f"objective.preset=dpo (the offline DPO trainer) ignores {', '.join(bad)}: its loss reads only "
                f"{', '.join('objective.' + k for k in DPO_OBJECTIVE_KNOBS)} (the reference enters through "
                "dpo_beta, not kl_coef); remove them or use an RL preset"
            )
        for k in DPO_OBJECTIVE_KNOBS:  # a DPO knob its loss type does not read (dpo_shift_lambda with ipo)
            if getattr(o, k) != o.preset_value(k) and (
                msg := knob_rules.unread_message(o, f"objective.{k}", getattr(o, k))
            ):
                errors.append(msg)
        unused = [
            f"train.{k}={_show(getattr(t, k))}"
            for k in RL_TRAIN_KNOBS
            if not self._at_default(f"train.{k}", getattr(t, k))
        ]
        if unused:
            notes.append(
                f"the DPO trainer (objective.preset=dpo) ignores {', '.join(unused)} (RL-loop knobs; its "
                "length is set by dpo.epochs, dpo.rounds and dpo.max_steps)"
            )
        return errors, notes

    def rollout_logp_inexact(self) -> str | None:
        """Why the sampler's log-probs may differ from the policy's own (None: they are the same
        weights, dtype and distribution, so train.old_logp=rollout/auto may reuse them as pi_old)."""
        r = self.rollout
        if r.backend != "hf":
            return f"rollout.backend={r.backend!r} (another engine's kernels: its log-probs are not the policy's)"
        if r.dtype != self.model.dtype:
            return f"rollout.dtype={r.dtype!r} differs from model.dtype={self.model.dtype!r}"
        if r.top_p < 1.0:
            return f"rollout.top_p={r.top_p} (the sampler's log-probs are of the truncated distribution)"
        if r.router_noise:
            return f"rollout.router_noise={r.router_noise} (the sampler routed differently)"
        if self.objective.tis_cap:
            return f"objective.tis_cap={self.objective.tis_cap} (TIS corrects pi_old / pi_rollout, which this makes 1)"
        if self.objective.rollout_is != "none":
            return f"objective.rollout_is={self.objective.rollout_is!r} (it weighs pi_old / pi_rollout, which this makes 1)"
        if self.train.autocast:
            return f"train.autocast={self.train.autocast} (the trainer computes in bf16, the sampler in rollout.dtype)"
        if self.model.lora is not None and self.model.lora.dropout:
            return f"model.lora.dropout={self.model.lora.dropout} (the trainer's forwards drop adapter inputs, the sampler's do not)"
        return None

    def reuses_rollout_logp(self) -> bool:
        """Whether the loop takes pi_old's log-probs from the sampler (train.old_logp)."""
        mode = self.train.old_logp
        return mode == "rollout" or (mode == "auto" and self.rollout_logp_inexact() is None)

    def _moe_knobs(self) -> None:
        """Routing replay needs the rollout's expert choices (recorded by the hf backend only)
        and, like router noise, an MoE model; checked before any model loads."""
        o, r = self.objective, self.rollout
        if o.routing_replay and r.backend == "vllm":
            raise ValueError(
                "objective.routing_replay=true is impossible with rollout.backend=vllm (the vLLM engine "
                "does not return its expert choices); use rollout.backend=hf or routing_replay=false"
            )
        moe = is_moe(self.model.name)  # None: a name whose architecture is not known before loading
        if moe is False and o.routing_replay:
            raise ValueError(
                f"objective.routing_replay=true needs an MoE model; model.name={self.model.name!r} is dense "
                "(use tiny-moe or an MoE folder)"
            )
        if moe and self.train.share_prefix:
            raise ValueError(
                f"train.share_prefix=true with model.name={self.model.name!r}, an MoE: routing replay and the "
                "router metrics read the plain forward's layout of every row; set train.share_prefix=false"
            )
        if moe and r.share_prefix and r.backend == "hf":
            raise ValueError(
                f"rollout.share_prefix=true with model.name={self.model.name!r}, an MoE: the routing record "
                "reads generate's own prefill of every row; set rollout.share_prefix=false"
            )
        if moe is False and r.router_noise > 0:
            raise ValueError(
                f"rollout.router_noise={r.router_noise} needs an MoE model; model.name={self.model.name!r} "
                "is dense (use tiny-moe or an MoE folder, or router_noise=0)"
            )

    @field_validator("model")
    @classmethod
    def _model_name(cls, m: ModelSection) -> ModelSection:
        if m.name not in MODEL_NAMES and not Path(m.name).is_dir():
            raise ValueError(f"model.name={m.name!r} is neither one of {list(MODEL_NAMES)} nor an existing folder")
        return m

    def to_dict(self, keep_auto: bool = False) -> dict:
        """The resolved config (every knob explicit, the `auto` levers as resolved for this device: what a run
        computes with), loadable again by load_config. keep_auto: the levers left `auto` written as `auto`, for a
        config that runs elsewhere (a study's cell, resolved again on the device that runs it)."""
        data = self.model_dump(mode="json")
        if keep_auto:
            for key in self._auto:
                section, name = key.split(".", 1)
                data[section][name] = device_defaults.AUTO
        return data


def with_preset_run_keys(data: dict, preset: str) -> dict:
    """`data` with the run keys outside the objective that `preset` sets (presets.PRESET_RUN_KEYS), each where
    the config does not name it."""
    out = dict(data)
    for key, value in PRESET_RUN_KEYS.get(preset, {}).items():
        section, name = key.split(".", 1)
        part = dict(out.get(section) or {})
        part.setdefault(name, value)
        out[section] = part
    return out


_TINY = ("tiny-dense", "tiny-moe")  # built fresh (harness/models/registry.py): warm-started by default
_CHECKED_DATA: dict[str, tuple] = {}
_CHECKED_RM: dict[tuple, str] = {}  # (folder, its files' stats) -> why it does not score ("": it does)
# reward model folders not checked while they are absent or empty: a study's `reward_model:`, trained by its
# Snakefile rule before any cell runs (harness/experiment/expand.py adds and removes them)
PENDING_REWARD_MODELS: set[str] = set()


def _folder_stats(folder: Path) -> tuple:
    """(name, size, mtime) of a folder's files: a reward model folder re-checked once it changes."""
    return tuple(sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir() if p.is_file()))


def _data_stats(d: DataSection) -> tuple:
    """(path, size, mtime) of every data file: a checked dataset is checked again when a file changes."""
    paths = [d.train] if isinstance(d.train, str) else list(d.train)
    if d.eval:
        paths += [d.eval] if isinstance(d.eval, str) else list(d.eval)
    try:
        return stat_key([Path(p) for p in paths])
    except OSError:
        return ()


def _task_names() -> set[str]:
    return set(TASK_NAMES)


# ----------------------------------------------------------------------------- checks

DPO_OBJECTIVE_KNOBS = ("dpo_beta", "dpo_loss_type", "dpo_sft_coef", "dpo_shift_lambda")
# `train` knobs that only the RL loop reads (the DPO trainer uses lr, betas, weight_decay,
# grad_clip, checkpoint_every and threads)
RL_TRAIN_KNOBS = (
    "steps",
    "prompts_per_step",
    "group_size",
    "critic_lr",
    "inner_epochs",
    "mini_batches",
    "micro_batch_size",
    "old_logp",
    "max_refill_rounds",
    "samples_to_log",
    "grad_share_every",
    "component_warmup_steps",
    "share_prefix",
)
# from_pretrained options that model.overrides may pass for smollm2-135m or a model folder
LOAD_OPTIONS = (
    "attn_implementation",
    "device_map",
    "low_cpu_mem_usage",
    "revision",
    "subfolder",
    "trust_remote_code",
    "use_safetensors",
    "variant",
    "max_memory",
    "offload_folder",
    "offload_state_dict",
    "key_mapping",
    "gguf_file",
    "quantization_config",
    "tp_plan",
    "use_kernels",
)


def bool_as_number(annotation: Any, value: Any) -> bool:
    """Whether `value` (or an element of it) is a bool where `annotation` expects an int or float
    (pydantic's lax mode would silently read True as 1)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        return bool_as_number(args[0], value)
    if origin in (Union, types.UnionType):
        if isinstance(value, bool) and (bool in args or Any in args):
            return False
        return any(bool_as_number(a, value) for a in args if a is not type(None))
    if isinstance(value, bool):
        return annotation in (int, float)
    if origin is dict and isinstance(value, dict) and len(args) == 2:
        return any(bool_as_number(args[1], v) for v in value.values())
    if origin in (list, tuple) and isinstance(value, (list, tuple)) and args:
        if origin is tuple and args[-1] is not Ellipsis:
            return any(bool_as_number(a, v) for a, v in zip(args, value))
        return any(bool_as_number(args[0], v) for v in value)
    return False


def _field_default(model: type[BaseModel], key: str) -> Any:
    return model.model_fields[key].get_default(call_default_factory=True)


def _show(v: Any) -> str:
    return repr(list(v)) if isinstance(v, tuple) else repr(v)


def _config_keys(cls) -> set[str]:
    """The fields a transformers config class knows (dataclass fields, aliases, serialised keys)."""
    keys = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    keys |= set(getattr(cls, "attribute_map", {}) or {})
    try:
        keys |= set(cls().to_dict())
    except Exception:  # noqa: BLE001 -- a class without defaults: its fields alone
        pass
    return keys


_CHECKED_OVERRIDES: dict[str, None] = {}


def _check_model_overrides(name: str, overrides: dict) -> None:
    """model.overrides: every key a field of the model's config class (or, for pretrained
    weights, a from_pretrained option), every value accepted by that class; tiny-* models are
    also built without weights (meta device), which catches shape errors."""
    memo = json.dumps([name, overrides], sort_keys=True, default=str)
    if memo in _CHECKED_OVERRIDES:
        return
    from transformers import CONFIG_MAPPING, LlamaConfig, MixtralConfig

    tiny = {"tiny-dense": LlamaConfig, "tiny-moe": MixtralConfig, **dict.fromkeys(RANDOM_SHAPES, LlamaConfig)}
    folder = None if name in tiny or name == "smollm2-135m" else Path(name)
    if name in tiny:
        cls, options = tiny[name], ()
    elif folder is not None:
        cls, options = CONFIG_MAPPING[json.loads((folder / "config.json").read_text())["model_type"]], LOAD_OPTIONS
    else:
        cls, options = LlamaConfig, LOAD_OPTIONS  # SmolLM2 is a Llama (its folder may not be converted yet)
    known = _config_keys(cls) | set(options)
    for key in ("dtype", "torch_dtype"):
        if key in overrides:
            raise ValueError(
                f"model.overrides.{key}={overrides[key]!r}: the precision is model.dtype "
                "(float32 | bfloat16), not an override"
            )
    for key in overrides:
        if key not in known:
            near = difflib.get_close_matches(str(key), known, n=3)
            hint = f"did you mean {' or '.join(repr(n) for n in near)}? " if near else ""
            raise ValueError(
                f"model.overrides.{key}: not a field of {cls.__name__} (model.name={name!r}); {hint}allowed: "
                f"the fields of transformers.{cls.__name__}{' or from_pretrained options ' + str(list(options)) if options else ''}"
            )
    fields = {k: v for k, v in overrides.items() if k not in options}
    try:
        if name in tiny:
            import torch
            from transformers import AutoModelForCausalLM

            if name in RANDOM_SHAPES:  # random weights, SmolLM2's tokenizer: its vocabulary is the shape's
                config = random_config(name, **fields)
            else:
                config = (tiny_dense_config if name == "tiny-dense" else tiny_moe_config)(**fields)
            if name not in RANDOM_SHAPES and config.vocab_size < VOCAB_SIZE:
                raise ValueError(
                    f"vocab_size={config.vocab_size} is below the character tokenizer's {VOCAB_SIZE} tokens"
                )
            with torch.device("meta"):
                AutoModelForCausalLM.from_config(config)
        elif folder is not None:
            from transformers import AutoConfig

            AutoConfig.from_pretrained(folder, local_files_only=True, **fields)
        elif fields:
            LlamaConfig(**fields)
    except Exception as err:  # noqa: BLE001 -- transformers raises TypeError, ValueError and its own errors
        raise ValueError(
            f"model.overrides={overrides!r} do not fit {cls.__name__} (model.name={name!r}): "
            f"{' '.join(str(err).split())}"
        ) from None
    _CHECKED_OVERRIDES[memo] = None


# ----------------------------------------------------------------------------- YAML


class DuplicateKeyError(yaml.MarkedYAMLError):
    """A key given twice in one YAML mapping."""


class StrictLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a key given twice in one mapping (PyYAML keeps the last one
    silently). Merge keys (`<<: *anchor`) may still be overridden by the mapping's own keys."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node.start_mark)
                except TypeError:  # an unhashable key: SafeLoader's own error follows
                    continue
                if first is not key_node.start_mark:
                    raise DuplicateKeyError(
                        None,
                        None,
                        f"duplicate key {key!r} (first given at line {first.line + 1}; "
                        "a YAML mapping takes each key once)",
                        key_node.start_mark,
                    )
        return super().construct_mapping(node, deep)


def _yaml_problem(err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    context, cmark = getattr(err, "context", None), getattr(err, "context_mark", None)
    ctx = f" ({context}{f' at line {cmark.line + 1}' if cmark is not None else ''})" if context else ""
    return f"{where}{problem}{ctx}"


def yaml_loads(text: str, source: str, error: type[Exception] = None) -> Any:
    """Parse YAML text strictly (StrictLoader); a syntax error or duplicate key raises `error`
    (default ConfigError) naming `source` and the line."""
    error = error or ConfigError
    try:
        return yaml.load(text, Loader=StrictLoader)  # noqa: S506 -- StrictLoader is a SafeLoader
    except DuplicateKeyError as err:
        raise error(f"{source}: {_yaml_problem(err)}") from None
    except yaml.YAMLError as err:
        raise error(f"{source}: not valid YAML: {_yaml_problem(err)}") from None


def read_yaml(path: str | Path, what: str = "run config", error: type[Exception] = None) -> Any:
    """The one reader of run configs and study files: strict YAML (no duplicate keys), UTF-8,
    not empty; every problem raises `error` (default ConfigError) naming the file and line."""
    error = error or ConfigError
    p = Path(path)
    if not p.exists():
        raise error(f"{what} file {str(p)!r} does not exist")
    if not p.is_file():
        raise error(f"{what} {str(p)!r} is not a file")
    try:
        raw = p.read_bytes()
    except OSError as err:
        raise error(f"{p}: cannot read the {what}: {err.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise error(
            f"{p}: the {what} is not UTF-8 text (byte 0x{raw[err.start]:02x} on line {line}); save it as UTF-8"
        ) from None
    data = yaml_loads(text, str(p), error)
    if data is None:
        raise error(
            f"{p}: the {what} is empty; write the keys to set (a file that only restates "
            "the defaults must say so, e.g. `seed: 0`)"
        )
    return data


# ----------------------------------------------------------------------------- loading


def parse_override(item: str) -> tuple[str, Any]:
    """'objective.eps_high=0.28' -> ('objective.eps_high', 0.28); values are YAML scalars/lists/mappings,
    parsed strictly (a value that is not valid YAML raises ConfigError naming the override)."""
    if "=" not in item:
        raise ConfigError(f"override {item!r} must look like dotted.key=value")
    key, raw = item.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"override {item!r}: the key before '=' must be a dotted key such as train.steps")
    if not raw.strip():
        return key, None
    return key, yaml_loads(raw, f"override {item!r}")


def set_dotted(d: dict, key: str, value: Any) -> None:
    """Set d['a']['b'] = value for key 'a.b', creating sections as needed."""
    parts = key.split(".")
    cur = d
    for p in parts[:-1]:
        nxt = cur.setdefault(p, {})
        if not isinstance(nxt, dict):
            raise ConfigError(f"cannot set {key!r}: {p!r} is not a section")
        cur = nxt
    cur[parts[-1]] = value


def allowed_keys(section_path: tuple) -> list[str]:
    """Field names of the section at a dotted path (for error messages)."""
    model: Any = RunConfig
    for p in section_path:
        field = model.model_fields.get(str(p))
        sections = (
            [
                a
                for a in (typing.get_args(field.annotation) or (field.annotation,))
                if isinstance(a, type) and issubclass(a, BaseModel)
            ]
            if field is not None
            else []
        )  # an optional section: X | None
        if not sections:
            return []
        model = sections[0]
    return sorted(model.model_fields)


_UNION_TAG = re.compile(r"^(bool|int|float|str|none|constrained-\w+|literal\[.*\]|list\[.*\]|dict\[.*\])$")


def _merge_union_errors(errors: list[dict]) -> list[dict]:
    """pydantic's errors with a union's members folded into one per field: `tf32: bool | "auto"` given 'maybe'
    fails both members, one error each (loc ending in the member's tag); the user sees one line naming both."""
    merged: dict[tuple, dict] = {}
    out: list[dict] = []
    for e in errors:
        loc = e["loc"]
        if not (loc and isinstance(loc[-1], str) and _UNION_TAG.match(loc[-1])):
            out.append(e)
            continue
        field = loc[:-1]
        if field in merged:
            merged[field]["msg"] += "; or " + e["msg"].removeprefix("Value error, ").removeprefix("Input should be ")
            continue
        merged[field] = {**e, "loc": field, "type": "union", "msg": e["msg"]}
        out.append(merged[field])
    return out


def _format_error(err: ValidationError) -> str:
    lines = []
    for e in _merge_union_errors(err.errors()):
        loc = tuple(x for x in e["loc"] if not (isinstance(x, str) and x.startswith("function-")))
        key = ".".join(str(x) for x in loc) or "<config>"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            allowed = allowed_keys(loc[:-1])
            near = difflib.get_close_matches(str(loc[-1]), allowed, n=1) if loc else []
            lines.append(
                f"unknown key '{key}'{f' (did you mean {near[0]!r}?)' if near else ''}; allowed keys here: {allowed}"
            )
        elif isinstance(err := (e.get("ctx") or {}).get("error"), KnobError):  # a knob a mode declares
            lines.append(f"'{key}.{err.knob}': {err.reason} (got {err.value!r})")
        elif loc == ("objective",) and e["type"] == "value_error":  # a rule of the objective: its message says it all
            lines.append(msg)
        else:
            got = e.get("input")
            lines.append(f"'{key}': {msg} (got {got!r})" if key != "<config>" else msg)
    if len(lines) == 1:
        return f"invalid run config: {lines[0]}"
    return f"invalid run config ({len(lines)} errors):\n  " + "\n  ".join(lines)


def build_config(data: dict, source: str | None = None) -> RunConfig:
    """A validated RunConfig from a mapping; errors raise ConfigError (prefixed with `source`)."""
    prefix = f"{source}: " if source else ""
    if not isinstance(data, dict):
        raise ConfigError(
            f"{prefix}the top level of a run config must be a mapping of sections (got {type(data).__name__})"
        )
    try:
        return RunConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(prefix + _format_error(err)) from None
    except ValueError as err:  # raised by ObjectiveConfig.preset / validators outside pydantic's wrapper
        raise ConfigError(f"{prefix}invalid run config: {err}") from None


def load_config(path: str | Path | None, overrides: list[str] | tuple[str, ...] = ()) -> RunConfig:
    """YAML file + dotted overrides -> validated RunConfig. Every problem (the file, an override,
    a key or value) raises ConfigError naming the file, the overrides and the dotted key."""
    data: dict = {}
    source = str(path) if path is not None else "run config"
    if overrides:
        source += f" (with overrides {' '.join(overrides)})"
    if path is not None:
        data = read_yaml(path, "run config")
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: the top level must be a mapping of sections (got {type(data).__name__})")
    for item in overrides:
        key, value = parse_override(item)
        try:
            set_dotted(data, key, value)
        except ConfigError as err:
            raise ConfigError(f"{source}: {err}") from None
    return build_config(data, source)


def dump_config(cfg: RunConfig, keep_auto: bool = False) -> str:
    """The config as YAML: resolved (what a run records), or with its `auto` levers kept (keep_auto)."""
    return yaml.safe_dump(cfg.to_dict(keep_auto), sort_keys=False)


def _auto_note(cfg: RunConfig, key: str) -> str:
    """`  (auto on cpu; on cuda: 'bf16')` for a lever left auto: the value shown is this device's."""
    if key not in cfg.auto_levers:
        return ""
    other = "cpu" if cfg.auto_device == "cuda" else "cuda"
    data = {**cfg.to_dict(keep_auto=True)}
    values = {f"{s}.{k}": v for s in ("model", "train", "rollout") for k, v in data[s].items()}
    values["model.lora"] = cfg.model.lora
    there = device_defaults.resolve(values, other).get(key)
    return f"  (auto, resolved for {cfg.auto_device}; on {other}: {_show(there)})"


def explain_config(cfg: RunConfig) -> str:
    """`harness config CONFIG --explain`: every knob of the resolved config with its value and its doc;
    the objective's knobs also say which mode reads them and whether it is selected now (plugins'
    knobs included: harness/objective/explain.py)."""
    lines = [f"# {cfg.objective.algorithm} ({cfg.trainer} trainer): every knob, its value, its doc", ""]
    for name, field in RunConfig.model_fields.items():
        value = getattr(cfg, name)
        if name == "objective":
            lines += explain_objective(value)
        elif isinstance(value, BaseModel):
            for key, sub in type(value).model_fields.items():
                lines.append(f"{name}.{key}: {_show(getattr(value, key))}{_auto_note(cfg, f'{name}.{key}')}")
                lines.append(f"    {sub.description or '(no description)'}")
        else:
            lines += [f"{name}: {_show(value)}", f"    {field.description or '(no description)'}"]
    return "\n".join(lines) + "\n"
