"""`model.teacher` (on-policy distillation, objective.distill_coef > 0) and the rules that constrain it, checked
before any model loads: set exactly when the objective distils, under the RL trainer, a model that can load, and a
tokenizer equal to the policy's (read from the tokenizer files: harness/models/vocab.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.models import MODEL_NAMES
from harness.models.folder import folder_problem
from harness.models.hub import hub_id_problem, looks_like_hub_id, model_path, section_model
from harness.models.vocab import token_ids, vocab_difference
from harness.objective import inputs_needed

ALLOWED = f"one of {list(MODEL_NAMES)}, a saved model folder or a Hugging Face Hub id (org/name)"


def _teacher_folder(name: str) -> str:
    """What loads for model.teacher (a Hub id's snapshot, any other name unchanged); ValueError naming the key
    when it names no model."""
    if name in MODEL_NAMES:
        return name
    if problem := hub_id_problem(name):
        raise ValueError(f"model.teacher={name!r} {problem}")
    if not looks_like_hub_id(name) and not Path(name).is_dir():
        raise ValueError(f"model.teacher={name!r} is not an existing folder; allowed: {ALLOWED}")
    local = model_path(name, key="model.teacher")
    if problem := folder_problem(Path(local)):
        raise ValueError(f"model.teacher={name!r} is not a Hugging Face model: {problem}")
    return local


def check_teacher(run: Any) -> None:
    """model.teacher is set when, and only when, the objective distils (objective.distill_coef > 0) under the RL
    trainer; it names a model whose tokenizer is the policy's (where both tokenizers' files say)."""
    o, name = run.objective, run.model.teacher
    distils = inputs_needed(o).teacher_logp
    if run.trainer == "dpo" and (distils or name is not None):
        raise ValueError(
            f"model.teacher={name!r} with objective.distill_coef={getattr(o, 'distill_coef', 0.0)}: on-policy "
            "distillation scores the policy's own samples, and the DPO trainer (objective.preset=dpo) trains on "
            "fixed pairs; allowed with trainer dpo: objective.distill_coef=0 and no model.teacher"
        )
    if distils and name is None:
        raise ValueError(
            f"objective.distill_coef={o.distill_coef} (objective.preset={o.algorithm}) distils from model.teacher, "
            f"which is not set; allowed model.teacher: {ALLOWED}"
        )
    if name is None:
        return
    if not distils:
        raise ValueError(
            f"model.teacher={name!r} is read only by on-policy distillation, and objective.distill_coef="
            f"{getattr(o, 'distill_coef', 0.0)} (objective.preset={o.algorithm}); allowed: objective.distill_coef > 0 "
            "(the opd preset), or drop model.teacher"
        )
    ours, theirs = token_ids(section_model(run.model)), token_ids(_teacher_folder(name))
    if ours is not None and theirs is not None and (diff := vocab_difference(ours, theirs)):
        raise ValueError(
            f"model.teacher={name!r} has another tokenizer than the policy model.name={run.model.name!r} ({diff}): "
            "the teacher scores the student's token ids, so it must share the policy's tokenizer"
        )
