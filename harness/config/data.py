"""Section `task.data`: the rows of a dataset task (harness/tasks/dataset/, docs/tasks.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from harness.config.base import _Section
from harness.tasks.dataset.read import stat_key


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
        "save_to_disk folder (several paths: one table), or a Hugging Face Hub dataset id org/name (read by "
        "datasets.load_dataset from huggingface_hub's cache; an existing path of that name wins). verl: "
        "data.train_files",
    )
    eval: str | list[str] | None = Field(
        None,
        description="held-out rows (verl: data.val_files); null: split train by "
        "a stable hash of each prompt, eval_fraction held out",
    )
    config: str | None = Field(
        None,
        description="a Hub dataset's config (load_dataset's name, e.g. main of openai/gsm8k); null: its only "
        "(or default) config",
    )
    revision: str = Field(
        "main",
        min_length=1,
        description="a Hub dataset's branch, tag or commit (the commit it resolves to is the data's "
        "fingerprint, recorded in run.json and MLflow)",
    )
    format: Literal["auto", "json", "parquet", "csv", "arrow"] = Field(
        "auto", description="file format; auto: from the name (.jsonl .json .parquet .csv .tsv, a folder)"
    )
    train_split: str = Field("train", description="the split of train when it is a DatasetDict folder or a Hub id")
    eval_split: str = Field("test", description="the split of eval when it is a DatasetDict folder or a Hub id")
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


def data_stats(d: DataSection) -> tuple:
    """(path, size, mtime) of every data file: a checked dataset is checked again when a file changes."""
    paths = [d.train] if isinstance(d.train, str) else list(d.train)
    if d.eval:
        paths += [d.eval] if isinstance(d.eval, str) else list(d.eval)
    try:
        return stat_key([Path(p) for p in paths])
    except OSError:
        return ()
