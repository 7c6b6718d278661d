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
float (`.nan`, `.inf`). A boolean key takes only true or false: `mlflow: "no"` or `tf32: 1` is an error
(pydantic's StrictBool; its lax mode would read "no" as false).

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
never carries a setting that silently does nothing (objective.py `ignored_knobs` lists the
rules): a changed `dpo:` section or `dpo_*` knob with an RL preset; RL objective knobs with
`objective.preset=dpo`; value-model knobs (`train.critic_lr`, `objective.vf_coef`,
`value_clip`, `gamma`, `lam`) without `baseline=critic`; `norm_constant` with an `agg` other
than seq_mean_token_sum_norm; `train.max_refill_rounds` without dynamic sampling;
`overlong_penalty` without an overlong buffer; clip bounds with `clip=none`; KL knobs with
`kl_coef=0`. The RL-only `train` knobs (steps, prompts_per_step, group_size, ...) under
`objective.preset=dpo` are a one-line warning instead: a shared RL base config (smoke.yaml)
legitimately carries them. A resolved config (a run directory's config.yaml) has every knob
at a default or a used value, so it loads again silently.

The package, one module per section (each with the rules that constrain it; a rule across sections lives
with the section it constrains, and a module's docstring says which it holds):

    base.py        ConfigError, ConfigWarning, the strict section base (_Section), bool_as_number
    model.py       model, model.lora; the model's rules (folder, head, positions, critic_init, MoE)
    overrides.py   model.overrides checked against the model's config class
    task.py        task, task.rewards[i]; a generated task's rules, task.reward_combine's
    data.py        task.data, task.data.difficulty_by_pass_rate
    dataset.py     a dataset task's checks (files, fields, rewards, reference answers, reward models)
    warm_start.py  warm_start; whether a run has one
    rollout.py     rollout; whether the sampler's log-probs are the policy's; staleness, overlong_prompts
    train.py       train; the batch's shape, train.old_logp, the component warm-up
    scale.py       the scale knobs' rules (LoRA, checkpointing, processes, FSDP, autocast)
    eval.py        eval; the log-spaced schedule's rule
    tracking.py    tracking
    dpo.py         dpo; what the DPO trainer ignores, and a dpo section under an RL preset
    objective.py   the objective's glue: presets, the trainer key, the modes' run rules, ignored knobs
    run.py         RunConfig: the sections, the `auto` levers, the order of the rules
    strict_yaml.py read_yaml, yaml_loads (shared with study files)
    load.py        load_config, build_config, dump_config, the dotted overrides, the error messages
    explain.py     explain_config (`harness config --explain`)

A rule that depends on an objective mode is the mode's (harness/objective/modes.py `Mode.run_rule`): the
config calls the rule of every selected mode (objective.py `mode_warnings`) and names no mode itself.
"""

from harness.config.base import ConfigError, ConfigWarning, _Section, bool_as_number
from harness.config.data import DataSection, PassRateDifficulty
from harness.config.dpo import DPO_OBJECTIVE_KNOBS, DpoSection
from harness.config.eval import EvalSection
from harness.config.explain import explain_config
from harness.config.load import allowed_keys, build_config, dump_config, load_config, parse_override, set_dotted
from harness.config.model import LoraSection, ModelSection
from harness.config.objective import TRAINERS, with_preset_run_keys
from harness.config.overrides import LOAD_OPTIONS
from harness.config.rollout import RolloutSection
from harness.config.run import RunConfig
from harness.config.strict_yaml import DuplicateKeyError, StrictLoader, read_yaml, yaml_loads
from harness.config.task import RewardSection, TaskSection
from harness.config.tracking import TrackingSection
from harness.config.train import RL_TRAIN_KNOBS, TrainSection
from harness.config.warm_start import WarmStartSection

__all__ = [
    "DPO_OBJECTIVE_KNOBS",
    "LOAD_OPTIONS",
    "RL_TRAIN_KNOBS",
    "TRAINERS",
    "ConfigError",
    "ConfigWarning",
    "DataSection",
    "DpoSection",
    "DuplicateKeyError",
    "EvalSection",
    "LoraSection",
    "ModelSection",
    "PassRateDifficulty",
    "RewardSection",
    "RolloutSection",
    "RunConfig",
    "StrictLoader",
    "TaskSection",
    "TrackingSection",
    "TrainSection",
    "WarmStartSection",
    "_Section",
    "allowed_keys",
    "bool_as_number",
    "build_config",
    "dump_config",
    "explain_config",
    "load_config",
    "parse_override",
    "read_yaml",
    "set_dotted",
    "with_preset_run_keys",
    "yaml_loads",
]
