"""The knobs that select a mode -> their registries (`MODE_KNOBS`), and the check of a preset's knob values
(`check_knob_values`). Above the rooms that declare the built-in modes (it imports them, so their registries
are filled before any preset is checked) and below presets.py and config.py, which read it."""

from __future__ import annotations

from typing import Annotated

from pydantic import TypeAdapter

from harness.objective.advantages import BASELINE, BATCH_STD_OF, SCALE, STD
from harness.objective.aggregation import AGG
from harness.objective.config_fields import ObjectiveKnobs
from harness.objective.dpo_losses import DPO_LOSS
from harness.objective.entropy_control import ENTROPY_AGG
from harness.objective.kl import KL_ESTIMATOR, KL_PLACEMENT
from harness.objective.modes import KnobError, Modes, all_knobs
from harness.objective.ratios import RATIO
from harness.objective.rollout_correction import ROLLOUT_IS
from harness.objective.surrogates import CLIP

# Every knob that takes a named mode -> its registry (harness/objective/modes.py): the one place a
# mode name is defined; validation, dispatch and docs/objective.md's table follow it.
MODE_KNOBS: dict[str, Modes] = {
    m.knob: m for m in (BASELINE, SCALE, STD, BATCH_STD_OF, RATIO, CLIP, KL_ESTIMATOR, KL_PLACEMENT, AGG, DPO_LOSS)
}
MODE_KNOBS[ENTROPY_AGG.knob] = ENTROPY_AGG  # entropy_control.py: the entropy bonus's aggregation
MODE_KNOBS[ROLLOUT_IS.knob] = ROLLOUT_IS  # rollout_correction.py: the rollout correction against the sampler


def check_knob_values(knobs: dict, where: str) -> None:
    """Each key a knob and each value allowed (a preset's knobs); ValueError naming `where` and the knob."""
    declared = {k: kn for k, (kn, _) in all_knobs().items()}
    fields = ObjectiveKnobs.model_fields
    for k, v in knobs.items():
        try:
            if k in declared:
                declared[k].validate(v)
            elif k in MODE_KNOBS:
                MODE_KNOBS[k].check(v)
            elif k in fields and k not in ("algorithm", "plugins"):
                f = fields[k]
                annotation = Annotated[f.annotation, *f.metadata] if f.metadata else f.annotation
                TypeAdapter(annotation).validate_python(v)
            else:
                raise ValueError(f"{k!r} is not a knob")
        except (ValueError, KnobError) as err:
            raise ValueError(f"{where}: {' '.join(str(err).split())}") from None


__all__ = ["MODE_KNOBS", "check_knob_values"]
