"""PPO's adaptive KL controller (harness/objective/kl_control.py): the rule by hand, verl's own code on the same
batches (fixture from benchmarks/reference/kl_control.py), and the config's refusals."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from harness.config import ConfigError, load_config
from harness.objective.kl_control import AdaptiveKL, adaptive_kl, reward_kl_mean

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "kl_control.json").read_text())
CFG = SimpleNamespace(kl_coef=0.1, kl_target=0.05, kl_horizon=40)
ON = ["objective.kl_placement=reward", "objective.kl_estimator=k1", "objective.kl_target=0.05"]


@pytest.mark.parametrize(
    "kl, beta_after",
    [
        (0.06, 0.1 * (1 + 0.2 * 6 / 40)),  # e = 0.06 / 0.05 - 1 = 0.2, the bound: 0.103
        (0.055, 0.1 * (1 + 0.1 * 6 / 40)),  # e = 0.1: 0.1015
        (0.05, 0.1),  # on target: beta stays
        (0.0, 0.1 * (1 - 0.2 * 6 / 40)),  # e = -1 clipped to -0.2: 0.097
        (1.0, 0.1 * (1 + 0.2 * 6 / 40)),  # e = 19 clipped to 0.2
    ],
)
def test_one_update_by_hand(kl, beta_after):
    ctl = AdaptiveKL(0.1)
    ctl.update(CFG, kl, n_steps=6)
    assert ctl.value == pytest.approx(beta_after, abs=1e-15)


def test_the_step_is_scaled_by_the_sequences_over_the_horizon():
    ctl = AdaptiveKL(0.1)
    ctl.update(CFG, 0.06, n_steps=40)  # a whole horizon of sequences: the full 20%
    assert ctl.value == pytest.approx(0.12, abs=1e-15)


def test_reward_kl_mean_by_hand():
    # log pi - log pi_ref per token; row 0 keeps 2 tokens (0.3, 0.1: mean 0.2), row 1 one (0.4), row 2 none (0)
    logp = torch.tensor([[-1.0, -2.0, -3.0], [-0.5, -0.5, -0.5], [-1.0, -1.0, -1.0]])
    ref = torch.tensor([[-1.3, -2.1, -9.0], [-0.9, -7.0, -7.0], [-5.0, -5.0, -5.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    assert float(reward_kl_mean(logp, ref, mask)) == pytest.approx((0.2 + 0.4 + 0.0) / 3, abs=1e-6)


def test_equals_verl_over_a_trajectory():
    """Each step: our KL_t equals verl's apply_kl_penalty measurement, and beta before and after equal its
    AdaptiveKLController's, on batches whose errors are clipped below, inside and clipped above."""
    cfg = SimpleNamespace(**FIXTURE["config"])
    ctl = adaptive_kl(cfg)
    errors = []
    for s in FIXTURE["steps"]:
        t = {k: torch.tensor(s[k], dtype=torch.float64) for k in ("logp", "ref_logp", "mask")}
        kl = float(reward_kl_mean(t["logp"], t["ref_logp"], t["mask"]))
        assert kl == pytest.approx(s["current_kl"], rel=1e-6, abs=1e-9)  # verl divides by count + 1e-8
        assert ctl.value == pytest.approx(s["beta"], rel=1e-12)
        ctl.update(cfg, s["current_kl"], n_steps=len(s["mask"]))
        assert ctl.value == pytest.approx(s["beta_after"], rel=1e-12)
        errors.append(s["current_kl"] / cfg.kl_target - 1)
    assert min(errors) < -0.2 and max(errors) > 0.2 and any(abs(e) < 0.2 for e in errors)  # every branch


def test_state_round_trip():
    a = AdaptiveKL(0.1)
    a.update(CFG, 0.07, 6)
    b = AdaptiveKL(0.5)
    b.load_state_dict(json.loads(json.dumps(a.state_dict())))
    assert b.value == a.value


def test_off_by_default_and_on_with_a_target():
    assert adaptive_kl(load_config("experiments/runs/smoke.yaml", []).objective) is None
    obj = load_config("experiments/runs/smoke.yaml", ON).objective
    ctl = adaptive_kl(obj)
    assert ctl is not None and ctl.value == obj.kl_coef and obj.kl_horizon == 10000  # verl's default horizon


@pytest.mark.parametrize(
    "overrides, named",
    [
        (["objective.kl_target=0.05"], "kl_placement"),  # the loss placement: nothing for the controller to steer
        ([*ON, "objective.kl_coef=0"], "kl_coef"),  # no starting beta (and no reference model)
        ([*ON[:2], "objective.kl_target=0"], "objective.kl_target"),
        ([*ON[:2], "objective.kl_target=-0.1"], "objective.kl_target"),
        ([*ON, "objective.kl_horizon=0"], "objective.kl_horizon"),
        ([*ON[:2], "objective.kl_horizon=100"], "objective.kl_horizon"),  # a horizon without a target is unread
        ([*ON[:2], "objective.kl_target=fast"], "objective.kl_target"),
    ],
)
def test_bad_settings_are_refused_naming_the_key(overrides, named):
    with pytest.raises(ConfigError, match=named):
        load_config("experiments/runs/smoke.yaml", overrides)


def test_the_ppo_adaptive_kl_preset_is_ppo_with_verls_adaptive_controller():
    """ppo_adaptive_kl = ppo + verl's kl_ctrl (type adaptive, target_kl 0.1, horizon 10000), the start ppo's beta."""
    from harness.objective.config import ObjectiveConfig
    from harness.objective.modes import all_knobs

    def knobs(cfg):  # every knob's value, the declared ones included, the preset's name aside
        names = [*ObjectiveConfig.model_fields, *all_knobs()]
        return {n: getattr(cfg, n) for n in names if n != "algorithm"}

    adaptive = ObjectiveConfig.preset("ppo_adaptive_kl")
    assert knobs(adaptive) == knobs(ObjectiveConfig.preset("ppo", kl_target=0.1, kl_horizon=10000))
    assert knobs(adaptive) != knobs(ObjectiveConfig.preset("ppo"))
    obj = load_config("experiments/runs/smoke.yaml", ["objective.preset=ppo_adaptive_kl"]).objective
    assert adaptive_kl(obj).value == 0.05 and (obj.kl_target, obj.kl_horizon) == (0.1, 10000)
    fixed = load_config("experiments/runs/smoke.yaml", ["objective.preset=ppo_adaptive_kl", "objective.kl_target=null"])
    assert adaptive_kl(fixed.objective) is None  # the preset's target switched off leaves ppo's fixed beta
