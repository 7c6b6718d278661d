"""Rules that depend on an objective mode live in the mode's declaration: `Mode.run_rule` says what
the mode makes of the whole run (ratio none's two warnings: stale samples without an importance ratio), the
run config calls the rule of every selected mode and names none itself, and the component warm-up's message
lists the modes that declare a trained component (a plugin's included)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from harness.config import ConfigError, ConfigWarning, load_config
from harness.objective.extensions import Hooks
from harness.objective.modes import KINDS, Mode, register
from harness.objective.ratios import RATIO

SMOKE = "experiments/runs/smoke.yaml"
ON_POLICY = ["train.mini_batches=1", "train.inner_epochs=1"]


def _loads(overrides: list[str]) -> list[str]:
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        load_config(SMOKE, overrides)
    return [str(w.message) for w in got if issubclass(w.category, ConfigWarning)]


def test_ratio_none_declares_its_run_rule():
    assert RATIO.mode("none").run_rule is not None
    assert all(RATIO.mode(n).run_rule is None for n in RATIO if n != "none")


def test_ratio_none_warns_on_stale_samples_and_is_silent_on_policy():
    said = _loads(["objective.preset=gpg", "train.mini_batches=4", "rollout.staleness=2"])
    assert said == [
        "objective.ratio=none (e.g. gpg) with train.mini_batches=4, inner_epochs=1: every optimizer step after "
        "the first of a batch uses stale samples with no importance correction; set both to 1 for on-policy "
        "REINFORCE",
        "rollout.staleness=2 with objective.ratio=none: the samples come from the weights of 2 updates ago and no "
        "importance ratio corrects for it",
    ]
    assert _loads(["objective.preset=gpg", *ON_POLICY]) == []
    assert _loads(["objective.preset=grpo", "train.mini_batches=4", "rollout.staleness=2"]) == []


def test_the_config_names_no_ratio_mode():
    files = sorted((Path(__file__).resolve().parents[2] / "harness" / "config").glob("*.py"))
    assert len(files) > 10  # the package, one module per section
    for path in files:
        assert "ratio ==" not in path.read_text(), f"{path} branches on a ratio mode; declare it in the mode"


@pytest.fixture
def plugin_ratio():
    """A ratio mode (token's implementation) whose run rule warns, or refuses a run with 3 inner epochs."""

    def rule(run):
        if run.train.inner_epochs == 3:
            raise ValueError("objective.ratio=ruled with train.inner_epochs=3: refused by its declaration")
        return [f"objective.ratio=ruled sees train.steps={run.train.steps}"]

    token = RATIO.mode("token")
    RATIO.register("ruled", Mode(token.impl, "token, with a run rule", run_rule=rule, origin="tests"))
    yield
    RATIO.unregister("ruled")


def test_a_selected_mode_s_rule_is_called_and_others_are_not(plugin_ratio):
    assert _loads(["objective.ratio=ruled", "train.steps=3"]) == ["objective.ratio=ruled sees train.steps=3"]
    assert _loads(["objective.ratio=token", "train.steps=3"]) == []
    with pytest.raises(ConfigError, match="invalid run config: objective.ratio=ruled with train.inner_epochs=3"):
        load_config(SMOKE, ["objective.ratio=ruled", "train.inner_epochs=3"])


def test_the_warmup_message_lists_the_modes_that_train_a_component():
    with pytest.raises(ConfigError) as err:
        load_config(SMOKE, ["objective.preset=grpo", "train.component_warmup_steps=2"])
    assert "objective.baseline=critic (trains values) or prime (trains prm_logp), or agg=lambda_length" in str(
        err.value
    )

    def median(rewards, cfg):
        return rewards - rewards.median(-1, keepdim=True).values

    register("baseline", "learned_median", doc="a learned baseline", hooks=Hooks(component="median_net"))(median)
    try:
        with pytest.raises(ConfigError, match=r"learned_median \(trains median_net\)"):
            load_config(SMOKE, ["objective.preset=grpo", "train.component_warmup_steps=2"])
    finally:
        KINDS["baseline"].unregister("learned_median")
