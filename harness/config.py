"""Run configuration: the one documented place for every option of a training run.

A run config is YAML whose keys are the fields below (sections `model`, `task`,
`warm_start`, `rollout`, `train`, `eval`, `tracking`, `objective`, `dpo`). The `objective`
section holds the knobs of `harness.objective.ObjectiveConfig`; `objective.preset`
starts from a named algorithm and the other keys override it one by one.
`objective.preset=dpo` runs the offline DPO trainer (harness/train/dpo.py, section `dpo`)
instead of the RL loop.

`load_config(path, overrides)` applies dotted CLI overrides (`objective.eps_high=0.28`),
validates everything before any model is loaded, and raises `ConfigError` whose message
names the offending dotted key and what is allowed.
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from harness.objective import PRESETS, ObjectiveConfig


class ConfigError(ValueError):
    """A config key or value is wrong; the message names the dotted key."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ModelSection(_Section):
    name: str = Field("tiny-dense", description="tiny-dense | tiny-moe | smollm2-135m | a local Hugging Face folder")
    overrides: dict[str, Any] = Field(default_factory=dict, description="config overrides for tiny-* models (e.g. num_hidden_layers)")
    dtype: Literal["float32", "bfloat16"] = Field("float32", description="training precision of the policy")
    prompt_suffix: str = Field("", description="appended to every task prompt (an answer-format instruction for chat models)")


class TaskSection(_Section):
    name: str = Field("arithmetic", description="a task in harness.tasks.TASKS (arithmetic | countdown)")
    difficulty_mix: dict[str, float] | None = Field(None, description="weight per difficulty bucket, e.g. {easy: 1, hard: 1}")
    options: dict[str, Any] = Field(default_factory=dict, description="other constructor arguments of the task")


class WarmStartSection(_Section):
    enabled: bool = Field(True, description="SFT the freshly built model on task demonstrations before RL (cached)")
    steps: int = Field(300, ge=0, description="SFT optimizer steps")
    batch_size: int = Field(64, ge=1)
    lr: float = Field(3e-3, gt=0)
    cache_dir: str = Field("results/warmstart", description="checkpoints are cached here, keyed by model+task+SFT settings")


class RolloutSection(_Section):
    backend: Literal["hf", "vllm"] = Field("hf", description="generation engine: hf (transformers generate) or vllm")
    temperature: float = Field(1.0, gt=0)
    top_p: float = Field(1.0, gt=0, le=1)
    max_new_tokens: int = Field(64, ge=1, description="response length cap; a response hitting it is truncated")
    gpu_memory_utilization: float = Field(0.3, gt=0, le=1, description="vllm only (on CPU it is a share of RAM)")
    dtype: Literal["float32", "bfloat16"] = Field("float32", description="precision of the rollout engine (bf16 vs fp32 training = mismatch)")
    router_noise: float = Field(0.0, ge=0, description="MoE: std of Gaussian noise added to router logits at rollout only")


class TrainSection(_Section):
    steps: int = Field(30, ge=1, description="policy iterations (rollout + update)")
    prompts_per_step: int = Field(16, ge=1, description="N prompts per iteration")
    group_size: int = Field(8, ge=1, description="G responses per prompt")
    lr: float = Field(1e-4, gt=0)
    critic_lr: float = Field(1e-3, gt=0, description="PPO value model learning rate (objective.baseline=critic)")
    weight_decay: float = Field(0.0, ge=0)
    betas: tuple[float, float] = (0.9, 0.999)
    inner_epochs: int = Field(1, ge=1, description="K passes over each rollout batch")
    mini_batches: int = Field(1, ge=1, description="optimizer steps per epoch (>1 makes later steps off-policy)")
    micro_batch_size: int | None = Field(None, ge=1, description="rows per forward/backward; None = whole mini-batch")
    old_logp: Literal["recompute", "rollout", "auto"] = Field(
        "recompute", description="pi_old's log-probs for the ratio when mini_batches/inner_epochs > 1: 'recompute' "
        "them with a no-grad forward of the policy; 'rollout' reuses the sampler's (exact only for an hf rollout in "
        "the policy's dtype, top_p 1, no router noise, no TIS; saves one forward per step); 'auto' = rollout where "
        "that is exact, else recompute")
    grad_clip: float | None = Field(1.0, gt=0)
    max_refill_rounds: int = Field(4, ge=0, description="dynamic sampling: extra sampling rounds to refill dropped groups")
    checkpoint_every: int = Field(5, ge=1, description="checkpoint (and flush metrics) every N steps")
    samples_to_log: int = Field(8, ge=0, description="completions written to samples.jsonl per step")
    threads: int | None = Field(None, ge=1, description="torch CPU threads (None = torch default)")
    grad_share_every: int = Field(0, ge=0, description="every N steps, measure the gradient-norm share of the extreme "
                                  "groups (p < 0.2 or p > 0.8) with one extra forward/backward (grad/share_extreme, "
                                  "harness/train/group_stats.py); 0 = off")


class EvalSection(_Section):
    every: int = Field(10, ge=0, description="eval every N steps (0 = only at start and end)")
    num_prompts: int = Field(64, ge=1)
    n_samples: int = Field(8, ge=1, description="samples per prompt for pass@k")
    ks: list[int] = Field(default_factory=lambda: [1, 8])
    temperature: float = Field(1.0, gt=0)
    seed: int = Field(0, description="seed of the held-out prompt set: the same prompts for every run seed and "
                      "every cell, so runs are compared (and paired across seeds) on one set")

    @model_validator(mode="after")
    def _ks_fit(self) -> "EvalSection":
        bad = [k for k in self.ks if k < 1 or k > self.n_samples]
        if bad:
            raise ValueError(f"eval.ks {bad} must lie in [1, eval.n_samples={self.n_samples}]")
        return self


class TrackingSection(_Section):
    mlflow: bool = Field(True, description="log to MLflow (MLFLOW_TRACKING_URI, else sqlite under results/)")
    experiment: str = Field("harness", description="MLflow experiment name")
    run_name: str | None = None
    tags: dict[str, str] = Field(default_factory=dict, description="MLflow tags, e.g. the grid axes of a cell")


class DpoSection(_Section):
    """Offline preference training, used only with objective.preset=dpo (harness/train/dpo.py).
    The optimizer settings come from `train` (lr, betas, weight_decay, grad_clip,
    checkpoint_every, threads); train.steps, prompts_per_step and group_size are unused."""

    pairs: str = Field("generate", min_length=1, description="'generate': sample the warm-started policy on train-split "
                       "prompts, correct answer = chosen, wrong = rejected, once (saved to DIR/pairs.jsonl); or the path "
                       "of a JSONL file with one {prompt, chosen, rejected, difficulty} object per line")
    num_prompts: int = Field(128, ge=1, description="pairs=generate: train-split prompts to sample (those with no correct "
                             "or no wrong answer give no pair)")
    samples_per_prompt: int = Field(8, ge=2, description="pairs=generate: samples per prompt, to find one correct and "
                                    "one wrong answer")
    batch_size: int = Field(16, ge=1, description="preference pairs per optimizer step")
    epochs: int = Field(2, ge=1, description="passes over the pairs, reshuffled each epoch; steps = epochs * "
                        "ceil(pairs / batch_size)")
    max_steps: int | None = Field(None, ge=1, description="stop after this many optimizer steps in all (None = all "
                                  "epochs of all rounds)")
    pairs_per_prompt: int = Field(1, ge=1, description="pairs=generate: up to this many (correct, wrong) pairs per "
                                  "prompt, each sample used once (<= samples_per_prompt // 2)")
    rounds: int = Field(1, ge=1, description="iterative DPO/RPO (2404.19733): round r rebuilds the pairs from the "
                        "policy at its start on fresh prompts, with that policy as the reference; pairs=generate only")

    @model_validator(mode="after")
    def _pairs_knobs(self) -> "DpoSection":
        if self.pairs_per_prompt > self.samples_per_prompt // 2:
            raise ValueError(f"dpo.pairs_per_prompt={self.pairs_per_prompt} cannot exceed dpo.samples_per_prompt // 2 "
                             f"= {self.samples_per_prompt // 2} (a pair uses one correct and one wrong sample)")
        if self.rounds > 1 and self.pairs != "generate":
            raise ValueError(f"dpo.rounds={self.rounds} needs dpo.pairs=generate (each round samples new pairs from "
                             f"the current policy); a pairs file ({self.pairs!r}) allows rounds=1 only")
        return self


class RunConfig(_Section):
    seed: int = 0
    model: ModelSection = Field(default_factory=ModelSection)
    task: TaskSection = Field(default_factory=TaskSection)
    warm_start: WarmStartSection = Field(default_factory=WarmStartSection)
    rollout: RolloutSection = Field(default_factory=RolloutSection)
    train: TrainSection = Field(default_factory=TrainSection)
    eval: EvalSection = Field(default_factory=EvalSection)
    tracking: TrackingSection = Field(default_factory=TrackingSection)
    objective: ObjectiveConfig = Field(default_factory=lambda: ObjectiveConfig.preset("grpo"))
    dpo: DpoSection = Field(default_factory=DpoSection)

    @model_validator(mode="before")
    @classmethod
    def _build_objective(cls, data: Any) -> Any:
        """`objective: {preset: NAME, knob: value}` -> ObjectiveConfig.preset(NAME, knob=value);
        the Dr.GRPO constant defaults to rollout.max_new_tokens."""
        if not isinstance(data, dict) or not isinstance(data.get("objective", {}), dict):
            return data
        obj = dict(data.get("objective") or {})
        preset = obj.pop("preset", None)
        if preset is not None:
            if preset not in PRESETS:
                raise ValueError(f"objective.preset={preset!r} is unknown; allowed: {sorted(PRESETS)}")
            obj["algorithm"] = preset
        max_new = (data.get("rollout") or {}).get("max_new_tokens", RolloutSection().max_new_tokens)
        agg = obj.get("agg", PRESETS.get(obj.get("algorithm"), {}).get("agg", ObjectiveConfig().agg))
        if agg == "seq_mean_token_sum_norm" and obj.get("norm_constant") is None:
            obj["norm_constant"] = float(max_new)  # Dr.GRPO's constant: the max generation length
        merged = obj
        return {**data, "objective": merged}

    @model_validator(mode="after")
    def _combinations(self) -> "RunConfig":
        o, t = self.objective, self.train
        if o.baseline == "leave_one_out" and t.group_size < 2:
            raise ValueError(f"train.group_size={t.group_size} is impossible with objective.baseline=leave_one_out (RLOO needs G >= 2)")
        rows = t.prompts_per_step * t.group_size
        if rows % t.mini_batches:
            raise ValueError(f"train.mini_batches={t.mini_batches} must divide prompts_per_step*group_size={rows}")
        mb = rows // t.mini_batches
        if t.micro_batch_size is not None and mb % t.micro_batch_size:
            raise ValueError(f"train.micro_batch_size={t.micro_batch_size} must divide the mini-batch size {mb}")
        if o.ratio == "none" and (t.mini_batches > 1 or t.inner_epochs > 1):
            warnings.warn(f"objective.ratio=none (e.g. gpg) with train.mini_batches={t.mini_batches}, "
                          f"inner_epochs={t.inner_epochs}: every optimizer step after the first of a batch uses "
                          "stale samples with no importance correction; set both to 1 for on-policy REINFORCE",
                          stacklevel=2)
        if t.old_logp == "rollout" and (why := self.rollout_logp_inexact()):
            raise ValueError(f"train.old_logp='rollout' needs the sampler's log-probs to be the policy's, but {why}; "
                             "use train.old_logp=recompute (or auto)")
        if o.overlong_buffer and o.overlong_buffer >= self.rollout.max_new_tokens:
            raise ValueError(f"objective.overlong_buffer={o.overlong_buffer} must be < rollout.max_new_tokens={self.rollout.max_new_tokens}")
        if self.task.name not in _task_names():
            raise ValueError(f"task.name={self.task.name!r} is unknown; allowed: {sorted(_task_names())}")
        self._moe_knobs()
        return self

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
            raise ValueError("objective.routing_replay=true is impossible with rollout.backend=vllm (the vLLM engine "
                             "does not return its expert choices); use rollout.backend=hf or routing_replay=false")
        moe = _declared_moe(self.model.name)
        if moe is False and o.routing_replay:
            raise ValueError(f"objective.routing_replay=true needs an MoE model; model.name={self.model.name!r} is dense "
                             "(use tiny-moe or an MoE folder)")
        if moe is False and r.router_noise > 0:
            raise ValueError(f"rollout.router_noise={r.router_noise} needs an MoE model; model.name={self.model.name!r} "
                             "is dense (use tiny-moe or an MoE folder, or router_noise=0)")

    @field_validator("model")
    @classmethod
    def _model_name(cls, m: ModelSection) -> ModelSection:
        from harness.models import MODEL_NAMES

        if m.name not in MODEL_NAMES and not Path(m.name).is_dir():
            raise ValueError(f"model.name={m.name!r} is neither one of {list(MODEL_NAMES)} nor an existing folder")
        return m

    def to_dict(self) -> dict:
        """The resolved config (every knob explicit), loadable again by load_config."""
        return self.model_dump(mode="json")


def _declared_moe(name: str) -> bool | None:
    """Whether model.name is a routed MoE, from its name or its folder's config.json (None: unknown)."""
    if name in ("tiny-moe",):
        return True
    if name in ("tiny-dense", "smollm2-135m"):
        return False
    config = Path(name) / "config.json"
    if config.is_file():
        import json

        c = json.loads(config.read_text())
        return any(isinstance(c.get(k), int) and c[k] > 1 for k in ("num_local_experts", "num_experts", "n_routed_experts"))
    return None


def _task_names() -> set[str]:
    from harness.tasks import TASKS

    return set(TASKS)


# ----------------------------------------------------------------------------- loading

def parse_override(item: str) -> tuple[str, Any]:
    """'objective.eps_high=0.28' -> ('objective.eps_high', 0.28); values are YAML scalars/lists."""
    if "=" not in item:
        raise ConfigError(f"override {item!r} must look like dotted.key=value")
    key, raw = item.split("=", 1)
    return key.strip(), yaml.safe_load(raw) if raw.strip() else None


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
        if field is None or not isinstance(field.annotation, type) or not issubclass(field.annotation, BaseModel):
            return []
        model = field.annotation
    return sorted(model.model_fields)


def _format_error(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = tuple(x for x in e["loc"] if not (isinstance(x, str) and x.startswith("function-")))
        key = ".".join(str(x) for x in loc) or "<config>"
        if e["type"] == "extra_forbidden":
            allowed = allowed_keys(loc[:-1])
            lines.append(f"unknown key '{key}'; allowed keys here: {allowed}")
        else:
            got = e.get("input")
            lines.append(f"'{key}': {e['msg']} (got {got!r})" if key != "<config>" else e["msg"])
    return "invalid run config:\n  " + "\n  ".join(lines)


def build_config(data: dict) -> RunConfig:
    try:
        return RunConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_error(err)) from None
    except ValueError as err:  # raised by ObjectiveConfig.preset / validators outside pydantic's wrapper
        raise ConfigError(f"invalid run config: {err}") from None


def load_config(path: str | Path | None, overrides: list[str] | tuple[str, ...] = ()) -> RunConfig:
    """YAML file + dotted overrides -> validated RunConfig (raises ConfigError naming the key)."""
    data: dict = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file {str(p)!r} does not exist")
        data = yaml.safe_load(p.read_text()) or {}
        if not isinstance(data, dict):
            raise ConfigError(f"{p}: top level must be a mapping of sections")
    for item in overrides:
        key, value = parse_override(item)
        set_dotted(data, key, value)
    return build_config(data)


def dump_config(cfg: RunConfig) -> str:
    return yaml.safe_dump(cfg.to_dict(), sort_keys=False)
