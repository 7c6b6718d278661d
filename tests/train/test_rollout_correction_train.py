"""The rollout correction on the tiny model (docs/objective.md, "Rollout correction against the sampler"): one step of
the RL loop with each mode, the hf sampler's own log-probs weighing the loss; it trains and logs the mode's metrics. And
the run config's refusals, before any model loads."""

import json
import math
from types import SimpleNamespace

import pytest

from harness.config import load_config
from harness.experiment import parse_study
from harness.experiment.expand import expand
from harness.objective import ObjectiveConfig
from harness.train import train
from harness.train.rl.update import per_sequence

MODES = {
    "token_truncate": (["objective.rollout_is=token_truncate", "objective.rollout_is_clip_max=1.0001"],
                       ("rollout_is/frac_truncated", "rollout_is/seq_frac_truncated", "rollout_is/weight_mean")),
    "token_mask": (["objective.rollout_is=token_mask", "objective.rollout_is_clip_min=0.5"],
                   ("rollout_is/frac_masked", "rollout_is/seq_frac_masked", "rollout_is/weight_mean")),
    "sequence_truncate": (["objective.rollout_is=sequence_truncate"],
                          ("rollout_is/frac_truncated", "rollout_is/seq_frac_truncated", "rollout_is/weight_mean")),
    "sequence_mask": (["objective.rollout_is=sequence_mask", "objective.rollout_is_clip_max=1.0001"],
                      ("rollout_is/frac_masked", "rollout_is/seq_frac_masked", "rollout_is/weight_mean")),
    "off_policy_mask": (["objective.off_policy_mask_threshold=0.0"], ("off_policy_mask/frac_masked",)),
    "m2po": (["objective.m2_threshold=1e-9"], ("m2po/frac_masked", "m2po/m2")),
}  # fmt: skip


@pytest.mark.parametrize("mode", list(MODES))
def test_each_correction_trains_and_logs_its_metrics(mode, fast_config, tmp_path):
    overrides, keys = MODES[mode]
    cfg = fast_config(*overrides, "train.steps=1")
    train(cfg, tmp_path / "run")
    step0 = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0])
    for key in (*keys, "loss/policy", "grad/norm"):
        assert key in step0 and math.isfinite(step0[key]), (mode, key, step0.get(key))
    for key in keys:
        if "frac" in key:
            assert 0.0 <= step0[key] <= 1.0, (key, step0[key])
    if mode == "m2po":  # a budget of ~0: the tokens whose log-prob differs from the hf sampler's at all are masked
        assert 0.0 < step0["m2po/frac_masked"] < 1.0 and step0["m2po/m2"] > 0


@pytest.mark.parametrize(
    "override, named",
    [
        (["objective.rollout_is=token_trunc"], "objective.rollout_is"),
        (["objective.rollout_is_clip_max=2.0"], "objective.rollout_is_clip_max"),  # read by no mode: none selected
        (["objective.rollout_is=token_mask", "objective.rollout_is_clip_min=-1"], "rollout_is_clip_min"),
        (["objective.off_policy_mask_threshold=-0.5"], "off_policy_mask_threshold"),
        (["objective.m2_threshold=0"], "m2_threshold"),
        (["objective.rollout_is=sequence_mask", "train.old_logp=rollout"], "objective.rollout_is"),
    ],
)
def test_bad_values_are_refused_before_a_model_loads(override, named):
    with pytest.raises(ValueError, match=named) as err:
        load_config("experiments/runs/smoke.yaml", override)
    assert "\n" not in str(err.value).strip() or named in str(err.value).splitlines()[0]


def test_a_study_grid_selects_them_like_any_knob():
    base = {"task": {"name": "arithmetic"}, "objective": {"preset": "grpo"}}
    grid = {"objective.rollout_is": ["none", "token_truncate", "sequence_mask"], "objective.m2_threshold": [None, 0.04]}
    cells = expand(parse_study({"base": base, "grid": grid, "seeds": [1]}, name="t"))
    got = {(c.config.objective.rollout_is, c.config.objective.m2_threshold) for c in cells}
    assert len(cells) == 6 and got == {
        (r, m) for r in grid["objective.rollout_is"] for m in grid["objective.m2_threshold"]
    }


def test_the_dpo_trainer_refuses_them():
    with pytest.raises(ValueError, match="ignores objective.rollout_is='token_mask'"):
        load_config("experiments/runs/dpo.yaml", ["objective.rollout_is=token_mask"])


def test_the_shares_of_rows_are_merged_by_rows():
    """A micro-batch's off_policy_mask/frac_masked weighs its rows with a token, not its tokens."""
    part = SimpleNamespace(mask_lens=[5, 0, 3])
    metrics = {"off_policy_mask/frac_masked": 0.5, "rollout_is/seq_frac_masked": 0.0, "m2po/frac_masked": 0.1}
    got = per_sequence(ObjectiveConfig(), part, metrics)
    assert got == {"off_policy_mask/frac_masked": 2.0, "rollout_is/seq_frac_masked": 2.0}
