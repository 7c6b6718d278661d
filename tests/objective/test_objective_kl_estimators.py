"""The KL estimators abs and low_var_kl, the straight-through KL and the bias-corrected KL (harness/objective/kl.py):
by hand, against verl 0.9.1's `kl_penalty` and TRL 1.16's `_compute_loss` (fixture from
benchmarks/reference/kl_estimators.py), and their refusals."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from harness.config import ConfigError, load_config
from harness.objective import ObjectiveConfig
from harness.objective.kl import kl_penalty, loss_kl_term
from harness.objective.policy import policy_loss

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "kl_estimators.json").read_text())
X = {k: torch.tensor(v, dtype=torch.float64) for k, v in FIXTURE["inputs"].items()}
D = torch.float64

# verl's names -> ours: (kl_estimator, kl_straight_through)
VERL_AS_OURS = {
    "kl": ("k1", False),
    "k1": ("k1", False),
    "abs": ("abs", False),
    "mse": ("k2", False),
    "k2": ("k2", False),
    "low_var_kl": ("low_var_kl", False),
    "k3": ("low_var_kl", False),  # verl's k3 is clamped; ours (TRL's, GRPO's) is not
    "kl+": ("k1", True),
    "k1+": ("k1", True),
    "abs+": ("abs", True),
    "k3+": ("low_var_kl", True),
    "low_var_kl+": ("low_var_kl", True),
}


def _t(rows) -> torch.Tensor:
    return torch.tensor(rows, dtype=D)


def test_abs_and_low_var_kl_by_hand():
    lp, ref = _t([[-1.0, -2.0, -1.0, -30.0]]), _t([[-1.5, -1.0, 2.0, -5.0]])  # d = -0.5, 1, 3, 25
    assert kl_penalty(lp, ref, "abs")[0].tolist() == pytest.approx([0.5, 1.0, 3.0, 25.0])
    # d = 3: e^3 - 4 = 16.09 clamped to 10; d = 25 clamped to 20 first, then the estimate to 10
    expect = [math.exp(-0.5) - 0.5, math.e - 2, 10.0, 10.0]
    assert kl_penalty(lp, ref, "low_var_kl")[0].tolist() == pytest.approx(expect)
    assert kl_penalty(lp, ref, "k3")[0, 2].item() == pytest.approx(math.exp(3) - 4)  # k3 keeps its value


def test_straight_through_keeps_the_value_and_takes_k2s_gradient_by_hand():
    cfg = ObjectiveConfig(kl_coef=0.5, kl_straight_through=True)
    lp = _t([[-1.0, -2.0]]).requires_grad_(True)
    ref = _t([[-1.5, -1.0]])  # d = ref - lp = -0.5, 1
    k = loss_kl_term(cfg, lp, ref, torch.ones_like(lp))
    assert k[0].tolist() == pytest.approx([0.5 * (math.exp(-0.5) + 0.5 - 1), 0.5 * (math.e - 2)])  # k3's value
    (g,) = torch.autograd.grad(k.sum(), lp)
    assert g[0].tolist() == pytest.approx([0.5 * 0.5, 0.5 * -1.0])  # d k2 / d logp = logp - ref = -d


def test_bias_correction_weighs_by_rho_with_its_gradient_by_hand():
    cfg = ObjectiveConfig(kl_coef=1.0, kl_estimator="k1", kl_bias_correction=True)
    lp = _t([[-1.0]]).requires_grad_(True)
    ref, old = _t([[-1.5]]), _t([[-1.2]])
    rho = torch.exp(lp - old)  # e^0.2
    k = loss_kl_term(cfg, lp, ref, rho)
    assert k.item() == pytest.approx(0.5 * math.exp(0.2))  # k1 = 0.5, times rho
    (g,) = torch.autograd.grad(k.sum(), lp)
    assert g.item() == pytest.approx(math.exp(0.2) * (1 + 0.5))  # d(rho k1) = rho (dk1 + k1)


@pytest.mark.parametrize("name", sorted(VERL_AS_OURS))
def test_estimator_equals_verl(name):
    estimator, st = VERL_AS_OURS[name]
    cfg = ObjectiveConfig(kl_coef=1.0, kl_estimator=estimator, kl_straight_through=st)
    lp = X["logp"].clone().requires_grad_(True)
    k = loss_kl_term(cfg, lp, X["ref_logp"], torch.ones_like(lp))
    (g,) = torch.autograd.grad((k * X["mask"]).sum(), lp)
    ref = FIXTURE["verl"][name]
    assert torch.allclose(k.detach(), _t(ref["value"]), atol=1e-6, rtol=0)
    assert torch.allclose(g, _t(ref["grad"]), atol=1e-6, rtol=0)


def test_the_fixture_reaches_verls_clamps():
    """Without the clamped tokens, low_var_kl = k3 and the test above could not tell them apart."""
    unclamped = kl_penalty(X["logp"], X["ref_logp"], "k3")
    assert (unclamped * X["mask"]).max() > 10 and not torch.allclose(unclamped, _t(FIXTURE["verl"]["k3"]["value"]))


@pytest.mark.parametrize("key", sorted(FIXTURE["trl"]))
def test_grpo_loss_equals_trl_with_and_without_the_bias_correction(key):
    level, bias = key.split("/")
    c = FIXTURE["trl_config"]
    cfg = ObjectiveConfig(
        kl_coef=c["beta"],
        eps_low=c["epsilon_low"],
        eps_high=c["epsilon_high"],
        ratio=level,
        kl_bias_correction=bias == "bias=true",
    )
    lp = X["logp"].clone().requires_grad_(True)
    # TRL's .mean() over rows counts the row without a response token; batch_denominators counts only rows
    # with one, so TRL's count is passed: the comparison is of the KL and the surrogate, not of that choice.
    rows = X["mask"].shape[0]
    loss, _ = policy_loss(cfg, lp, X["old_logp"], X["adv"], X["mask"], X["trl_ref_logp"], num_seqs=rows)
    (g,) = torch.autograd.grad(loss, lp)
    ref = FIXTURE["trl"][key]
    assert loss.item() == pytest.approx(ref["loss"], abs=1e-6)
    assert torch.allclose(g, _t(ref["grad"]), atol=1e-6, rtol=0)


def test_the_bias_correction_changes_the_gradient():
    """On the fixture, TRL's two settings differ by far more than the tolerance: the test above can fail."""
    on, off = (_t(FIXTURE["trl"][f"token/bias={b}"]["grad"]) for b in ("true", "false"))
    assert (on - off).abs().max() > 1e-3


SMOKE = "experiments/runs/smoke.yaml"


@pytest.mark.parametrize(
    "overrides, named",
    [
        (["objective.kl_bias_correction=true", "objective.kl_coef=0"], "kl_coef"),
        (["objective.kl_straight_through=true", "objective.kl_coef=0"], "kl_coef"),
        (
            [
                "objective.kl_straight_through=true",
                "objective.kl_coef=0.04",
                "objective.kl_placement=reward",
                "objective.kl_estimator=k1",
            ],
            "kl_placement",
        ),
        (['objective.kl_bias_correction="yes"', "objective.kl_coef=0.04"], "objective.kl_bias_correction"),
        (["objective.kl_straight_through=1", "objective.kl_coef=0.04"], "objective.kl_straight_through"),
        (["objective.kl_estimator=k3+", "objective.kl_coef=0.04"], "objective.kl_estimator"),
    ],
)
def test_bad_settings_are_refused_naming_the_key(overrides, named):
    with pytest.raises(ConfigError, match=named):
        load_config(SMOKE, overrides)


def test_off_by_default_and_on_when_set():
    obj = load_config(SMOKE, []).objective
    assert obj.kl_bias_correction is False and obj.kl_straight_through is False
    on = ["objective.kl_coef=0.04", "objective.kl_bias_correction=true", "objective.kl_straight_through=true"]
    obj = load_config(SMOKE, [*on, "objective.kl_estimator=low_var_kl"]).objective
    assert obj.kl_bias_correction and obj.kl_straight_through and obj.kl_estimator == "low_var_kl"


@pytest.mark.parametrize(
    "verl_name, hint", [("k3+", "low_var_kl with kl_straight_through: true"), ("mse", "kl_estimator: k2")]
)
def test_a_verl_spelling_is_refused_with_ours(verl_name, hint):
    with pytest.raises(ConfigError) as e:
        load_config(SMOKE, [f"objective.kl_estimator={verl_name}"])
    assert hint in str(e.value) and "allowed kl_estimator values" in str(e.value)
