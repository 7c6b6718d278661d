"""A plugin's declarations are checked when they are registered, so a config naming the plugin fails in one line
before any model loads: a knob whose default breaks its own range (-1 with gt=0), and a function
whose signature cannot take the call its kind makes (else a TypeError mid-run: docs/extending.md's table)."""

from __future__ import annotations

import pytest

from harness.config import ConfigError, load_config
from harness.objective import Knob, register_baseline, register_clip, register_extension
from harness.objective.extensions import EXTENSIONS, Hooks
from harness.objective.modes import KINDS, register


def neg(rewards, cfg):
    return rewards


def test_a_knob_default_outside_its_own_range_is_refused():
    with pytest.raises(ValueError) as e:
        register_baseline("neg_default", doc="x", knobs=[Knob("neg_width", -1.0, "a width", gt=0)])(neg)

    assert str(e.value) == (
        "baseline 'neg_default' declares knob 'neg_width' with default -1.0, outside its own range (Input should "
        "be greater than 0); allowed: a default that is a float > 0"
    )
    with pytest.raises(ValueError, match="declares knob 'neg_n' with default None"):
        register_baseline("none_default", doc="x", knobs=[Knob("neg_n", None, "n", type=int, ge=1)])(neg)
    with pytest.raises(ValueError, match="declares knob 'flag_k' with default 2"):
        register_baseline("bool_default", doc="x", knobs=[Knob("flag_k", 2, "k", type=bool)])(neg)
    assert "neg_default" not in KINDS["baseline"] and "none_default" not in KINDS["baseline"]


@pytest.mark.parametrize(
    "declare, needle",
    [
        (
            lambda: register_baseline("one_arg", doc="x")(lambda rewards: rewards),
            "baseline 'one_arg': <lambda>(rewards) cannot be called as fn(rewards, cfg)",
        ),
        (
            lambda: register("scale", "two_arg", doc="x")(lambda u, cfg: u),
            "scale 'two_arg': <lambda>(u, cfg) cannot be called as fn(centred, rewards, cfg)",
        ),
        (
            lambda: register_clip("bad_masks", doc="x", masks=lambda ratio, adv: (ratio, ratio))(
                lambda ratio, adv, logp, old_logp, cfg: ratio
            ),
            "clip 'bad_masks' masks=: <lambda>(ratio, adv) cannot be called as fn(ratio, adv, logp, old_logp, cfg)",
        ),
        (
            lambda: register_extension("bad_hook", doc="x", switch="kl_coef", hooks=Hooks(row_weights=lambda cfg: cfg))(
                lambda cfg: False
            ),
            "extension 'bad_hook' hooks.row_weights: <lambda>(cfg) cannot be called as fn(cfg, extras)",
        ),
        (
            lambda: register_extension("not_callable", doc="x", switch="kl_coef")(3),
            "extension 'not_callable': 3 is not a function; it is called as fn(cfg)",
        ),
    ],
)
def test_a_function_whose_signature_cannot_take_its_call_is_refused(declare, needle):
    with pytest.raises(ValueError) as e:
        declare()
    assert str(e.value).startswith(needle), str(e.value)


def test_signatures_that_take_the_call_register():
    @register_baseline("defaults_ok", doc="x")
    def ok(rewards, cfg, scale=1.0):  # extra arguments with defaults, *args: fine
        return rewards * scale

    register_extension("star_ok", doc="x", switch="kl_coef", hooks=Hooks(loss_term=lambda *a: (None, {})))(
        lambda cfg: False
    )
    try:
        assert KINDS["baseline"]["defaults_ok"] is ok
    finally:
        KINDS["baseline"].unregister("defaults_ok")
        EXTENSIONS.unregister("star_ok")


def test_a_plugin_module_with_a_bad_declaration_fails_its_config_in_one_line(tmp_path, monkeypatch):
    (tmp_path / "bad_knob_plugin.py").write_text(
        "from harness.objective import Knob, register_baseline\n\n"
        "@register_baseline('shifted', doc='r - shift', knobs=[Knob('shift_by', -1.0, 'shift', gt=0)])\n"
        "def shifted(rewards, cfg):\n    return rewards - cfg.shift_by\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError) as e:
        load_config("experiments/runs/smoke.yaml", ["objective.plugins=[bad_knob_plugin]"])
    msg = str(e.value)
    assert "\n" not in msg and "objective.plugins: module 'bad_knob_plugin' does not import" in msg
    assert "baseline 'shifted' declares knob 'shift_by' with default -1.0, outside its own range" in msg


# ----------------------------------------------------------------------------- the keywords the built-ins use too
def test_per_token_makes_the_function_a_baselines_advantages_hook():
    """`per_token=True` (critic, PRIME, ReMax): no group baseline, the function is the advantages hook."""

    @register_baseline("per_token_probe", doc="x", hooks=Hooks(component="values"), per_token=True)
    def scored(cfg, rewards, mask, group_size, inputs):
        return None

    try:
        mode = KINDS["baseline"].mode("per_token_probe")
        assert mode.impl is None and mode.hooks.advantages is scored and mode.hooks.component == "values"
    finally:
        KINDS["baseline"].unregister("per_token_probe")
    with pytest.raises(ValueError, match=r"cannot be called as fn\(cfg, rewards, mask, group_size, inputs\)"):
        register_baseline("per_token_two", doc="x", hooks=Hooks(), per_token=True)(neg)
    with pytest.raises(ValueError, match="per_token=True is for a baseline with hooks="):
        register_baseline("per_token_bare", doc="x", per_token=True)(lambda cfg, rewards, mask, g, inputs: None)


def test_a_masked_clip_takes_the_mask_and_declares_its_metrics():
    def loss(ratio, adv, logp, old_logp, cfg, mask):
        return -ratio * adv * mask

    def metrics(ratio, adv, logp, old_logp, cfg, mask):
        return {}

    register_clip("masked_probe", doc="x", masked=True, metrics=metrics)(loss)
    try:
        surrogate = KINDS["clip"]["masked_probe"]
        assert surrogate.masked and surrogate.loss is loss and surrogate.metrics is metrics
    finally:
        KINDS["clip"].unregister("masked_probe")
    with pytest.raises(ValueError, match=r"cannot be called as fn\(ratio, adv, logp, old_logp, cfg, mask\)"):
        register_clip("masked_bad", doc="x", masked=True)(lambda ratio, adv, logp, old_logp, cfg: ratio)


def test_a_group_rule_is_declared_with_the_decorator():
    def rule(cfg, group_size):
        return None if group_size >= 3 else "needs 3"

    register_baseline("group_rule_probe", doc="x", group_rule=rule)(neg)
    try:
        assert KINDS["baseline"].mode("group_rule_probe").group_rule is rule
    finally:
        KINDS["baseline"].unregister("group_rule_probe")


def test_a_preset_declares_its_trainer_and_run_keys():
    from harness.objective import register_preset
    from harness.objective.presets import PRESET_DECLARED, PRESET_ORIGINS, PRESET_RUN_KEYS, PRESET_TRAINERS, PRESETS

    register_preset("run_keys_probe", run_keys={"model.lm_head_fp32": True}, kl_coef=0.0)
    try:
        assert PRESET_RUN_KEYS["run_keys_probe"] == {"model.lm_head_fp32": True}
        assert "run_keys_probe" not in PRESET_TRAINERS
    finally:
        for table in (PRESETS, PRESET_RUN_KEYS, PRESET_ORIGINS, PRESET_DECLARED):
            del table["run_keys_probe"]
    with pytest.raises(ValueError, match="run_keys key 'objective.kl_coef'; allowed: a run-config key outside"):
        register_preset("run_keys_bad", run_keys={"objective.kl_coef": 0.0})
    with pytest.raises(ValueError, match="preset 'grpo' is built in; pick another name"):
        register_preset("grpo", kl_coef=0.0)
