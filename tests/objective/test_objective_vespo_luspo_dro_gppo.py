"""VESPO, LUSPO, the two-sided clip delta, GPPO / CE-GPPO, DRO and SSPO (docs/objective.md,
"Surrogates and ratios of 2025-26"): hand-computed values of each formula, equality with TRL 1.16 / verl 0.9.1 / the CE-GPPO authors' code
on a random padded batch (fixture from benchmarks/reference/vespo_luspo_dro_gppo.py), and the refusals of
bad values before a model loads."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from harness.cli import main
from harness.objective import ObjectiveConfig, policy_loss
from harness.objective.ratios import importance_ratio, span_mean
from harness.objective.soft_clips import vespo_weight
from harness.objective.surrogates import clip_masks, surrogate_loss

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "vespo_luspo_dro_gppo.json").read_text())
SMOKE = "experiments/runs/smoke.yaml"
D = torch.float64


def _t(x) -> torch.Tensor:
    return torch.tensor(x, dtype=D)


def _fixture_inputs():
    x = {k: _t(v) for k, v in FIXTURE["inputs"].items()}
    return x["logp"], x["old_logp"], x["adv"], x["mask"]


def _ours(cfg: ObjectiveConfig, logp, old, adv, mask):
    lp = logp.clone().requires_grad_(True)
    loss, _ = policy_loss(cfg, lp, old, adv, mask)
    loss.backward()
    return loss.item(), lp.grad


# ----------------------------------------------------------------------------- equal to the references
@pytest.mark.parametrize("case", sorted(FIXTURE["cases"]))
def test_equals_the_reference_implementation(case):
    """loss and d loss / d logp equal TRL 1.16 (vespo, luspo, delta), verl 0.9.1 (dro) and the CE-GPPO
    authors' loss (gppo, ce_gppo with their dual-clip c = 3) on 6 padded responses, to 1e-6."""
    ref = FIXTURE["cases"][case]
    cfg = ObjectiveConfig.preset(ref["preset"], **ref["overrides"])
    loss, grad = _ours(cfg, *_fixture_inputs())
    assert loss == pytest.approx(ref["loss"], abs=1e-6)
    torch.testing.assert_close(grad, _t(ref["grad"]), atol=1e-6, rtol=0)


@pytest.mark.parametrize(
    "case, without",
    [
        ("trl_delta", dict(delta=None)),
        ("trl_delta_below_clip", dict(delta=None)),
        ("authors_gppo", dict(clip="ppo")),
        ("authors_ce_gppo", dict(gppo_beta1=1.0)),
        ("trl_vespo_knobs", dict(vespo_k_pos=2.0, vespo_lambda_pos=3.0, vespo_k_neg=3.0, vespo_lambda_neg=2.0)),
        ("trl_luspo", dict(agg="seq_mean_token_mean")),
        ("verl_dro_beta", dict(dro_beta=0.1)),
    ],
)
def test_the_fixture_exercises_the_knob(case, without):
    """Without the knob the same inputs give another gradient: the comparison above is not blind to it."""
    ref = FIXTURE["cases"][case]
    cfg = ObjectiveConfig.preset(ref["preset"], **{**ref["overrides"], **without})
    _, grad = _ours(cfg, *_fixture_inputs())
    assert (grad - _t(ref["grad"])).abs().max() > 1e-3


# ----------------------------------------------------------------------------- VESPO
def test_vespo_kernel_by_hand():
    """phi(w) = exp(lambda + k ln w - lambda w): 1 at w = 1; A > 0, (k, lambda) = (2, 3), w = 2: 4 e^-3;
    A < 0, (3, 2), w = 0.5: e / 8; A = 0 takes the A >= 0 pair (TRL)."""
    w, a = _t([[1.0, 2.0, 0.5, 2.0]]), _t([[1.0, 1.0, -1.0, 0.0]])
    got = vespo_weight(w, a, 2.0, 3.0, 3.0, 2.0)
    torch.testing.assert_close(got, _t([[1.0, 4 * math.exp(-3), math.e / 8, 4 * math.exp(-3)]]))


def test_vespo_loss_and_gradient_by_hand():
    """l = -sg(phi) A logp: with w = 2 (sequence product of ratios e^0.3 and e^(ln2 - 0.3)) and A = 1, every
    token's gradient is -phi(2) = -4 e^-3; token_mean over 2 tokens halves it."""
    cfg = ObjectiveConfig.preset("vespo")
    old = _t([[-1.0, -2.0]])
    logp = (old + _t([[0.3, math.log(2) - 0.3]])).requires_grad_(True)
    loss, _ = policy_loss(cfg, logp, old, _t([1.0]), torch.ones(1, 2))
    loss.backward()
    phi = 4 * math.exp(-3)
    assert loss.item() == pytest.approx(-phi * logp.detach().sum().item() / 2, abs=1e-12)
    torch.testing.assert_close(logp.grad, _t([[-phi / 2, -phi / 2]]))


def test_sequence_product_ratio_by_hand_with_padding_and_clamps():
    """w_i = exp(sum of the response's log-ratios), padding excluded; the log is clamped to [ln 1e-8, 20]."""
    old = torch.zeros(3, 3, dtype=D)
    logp = _t([[0.1, -0.3, 99.0], [15.0, 15.0, 0.0], [-15.0, -15.0, 0.0]])
    mask = _t([[1, 1, 0], [1, 1, 1], [1, 1, 1]])
    rho = importance_ratio("sequence_product", logp, old, mask)
    torch.testing.assert_close(rho[:, 0], _t([math.exp(-0.2), math.exp(20.0), 1e-8]))
    assert torch.equal(rho, rho[:, :1].expand_as(rho))


def test_vespo_clip_fraction_counts_damped_sequences():
    """phi(w) < 1/2 (A != 0): w = 2 with A > 0 (phi 0.199) is high, w = 1 is not, A = 0 never."""
    cfg = ObjectiveConfig.preset("vespo")
    w, a = _t([[2.0, 1.0, 2.0, 0.2]]), _t([[1.0, 1.0, 0.0, -1.0]])
    low, high = clip_masks(cfg, w, a)
    # A < 0, w = 0.2: phi = exp(2 + 3 ln 0.2 - 0.4) = 0.0396 -> low
    assert high.tolist() == [[True, False, False, False]] and low.tolist() == [[False, False, False, True]]


# ----------------------------------------------------------------------------- LUSPO
def test_luspo_is_gspo_times_each_length():
    """(1/B) sum_i |o_i| l_i: lengths 3 and 1, sequence ratios 1 (A = 1) and 1 (A = -2): (3*(-1) + 1*2) / 2."""
    cfg = ObjectiveConfig.preset("luspo")
    lp = torch.full((2, 3), -1.0, dtype=D)
    loss, _ = policy_loss(cfg, lp, lp.clone(), _t([1.0, -2.0]), _t([[1, 1, 1], [1, 0, 0]]))
    assert loss.item() == pytest.approx((3 * -1.0 + 1 * 2.0) / 2)


# ----------------------------------------------------------------------------- delta (INTELLECT-2)
def test_delta_caps_the_unclipped_ratio_by_hand():
    """eps 0.2: rho 2, A = -1 costs 2 without delta, 1.5 with delta 1.5; delta 1.1 < 1 + eps_high also caps
    A > 0: rho 1.15, A = 1 -> -1.1 (PPO: -1.15), and rho 2, A = -1 then costs max(1.1, 1.2) = 1.2."""
    rho, adv = _t([[2.0, 1.15]]), _t([[-1.0, 1.0]])
    plain = surrogate_loss(ObjectiveConfig(), rho, adv, None)
    torch.testing.assert_close(plain, _t([[2.0, -1.15]]))
    torch.testing.assert_close(surrogate_loss(ObjectiveConfig(delta=1.5), rho, adv, None), _t([[1.5, -1.15]]))
    torch.testing.assert_close(surrogate_loss(ObjectiveConfig(delta=1.1), rho, adv, None), _t([[1.2, -1.1]]))


def test_delta_above_the_clip_equals_dual_clip():
    """With delta >= 1 + eps_high the two-sided clip is dual-clip PPO with c = delta, value and gradient."""
    logp, old, adv, mask = _fixture_inputs()
    a = _ours(ObjectiveConfig.preset("grpo", kl_coef=0.0, delta=1.3), logp, old, adv, mask)
    b = _ours(ObjectiveConfig.preset("grpo", kl_coef=0.0, dual_clip=1.3), logp, old, adv, mask)
    assert a[0] == pytest.approx(b[0], abs=1e-12)
    torch.testing.assert_close(a[1], b[1])


# ----------------------------------------------------------------------------- GPPO / CE-GPPO
def test_gppo_values_and_gradients_by_hand():
    """eps 0.2 / 0.28, beta1 0.75, beta2 1: tokens (rho, A) = (0.5, -1) low, (1.5, +1) high, (1.1, +1),
    (0.5, +1). Values 0.75*0.8 = 0.6, -1.28, -1.1, -0.5; d l / d logp = 0.6, -1.28, -1.1, -0.5 (PPO: 0, 0 at
    the clipped two)."""
    cfg = ObjectiveConfig.preset("ce_gppo")
    old = torch.zeros(1, 4, dtype=D)
    logp = torch.log(_t([[0.5, 1.5, 1.1, 0.5]])).requires_grad_(True)
    adv = _t([[-1.0, 1.0, 1.0, 1.0]])
    rho = importance_ratio("token", logp, old, torch.ones(1, 4))
    loss = surrogate_loss(cfg, rho, adv, logp, old)
    torch.testing.assert_close(loss.detach(), _t([[0.6, -1.28, -1.1, -0.5]]))
    loss.sum().backward()
    torch.testing.assert_close(logp.grad, _t([[0.6, -1.28, -1.1, -0.5]]))
    low, high = clip_masks(cfg, rho, adv)
    assert low.tolist() == [[True, False, False, False]] and high.tolist() == [[False, True, False, False]]


def test_gppo_with_zero_betas_has_ppos_gradient():
    logp, old, adv, mask = _fixture_inputs()
    kw = dict(kl_coef=0.0, eps_low=0.2, eps_high=0.28, agg="token_mean")
    a = _ours(ObjectiveConfig.preset("grpo", clip="gppo", gppo_beta1=0.0, gppo_beta2=0.0, **kw), logp, old, adv, mask)
    b = _ours(ObjectiveConfig.preset("grpo", **kw), logp, old, adv, mask)
    torch.testing.assert_close(a[1], b[1])


# ----------------------------------------------------------------------------- DRO
def test_dro_by_hand():
    """logp -1, old -1.2, A 0.5, beta 0.1: l = -(-0.5 - 0.05*0.04) = 0.502; d l/d logp = -(0.5 - 0.1*0.2)."""
    cfg = ObjectiveConfig(clip="dro", dro_beta=0.1)
    logp = _t([[-1.0]]).requires_grad_(True)
    loss = surrogate_loss(cfg, torch.ones(1, 1, dtype=D), _t([[0.5]]), logp, _t([[-1.2]]))
    assert loss.item() == pytest.approx(0.502, abs=1e-12)
    loss.sum().backward()
    assert logp.grad.item() == pytest.approx(-0.48, abs=1e-12)


# ----------------------------------------------------------------------------- SSPO (our reading)
def test_subsentence_ratio_by_hand():
    """Spans of 2: log-ratios [0.1, 0.3 | -0.2, 0.4 | 0.6] -> [0.2, 0.2, 0.1, 0.1, 0.6]; a padded token does
    not count in its span's mean: [0.1, 0.3 | 0.5, pad] -> [0.2, 0.2, 0.5, .]."""
    x = _t([[0.1, 0.3, -0.2, 0.4, 0.6], [0.1, 0.3, 0.5, 0.0, 0.0]])
    m = _t([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    got = span_mean(x, m > 0, 2)
    torch.testing.assert_close(got[0], _t([0.2, 0.2, 0.1, 0.1, 0.6]))
    torch.testing.assert_close(got[1, :3], _t([0.2, 0.2, 0.5]))
    cfg = ObjectiveConfig(ratio="subsentence", sspo_span=2)
    rho = importance_ratio("subsentence", x, torch.zeros_like(x), m, cfg=cfg)
    torch.testing.assert_close(rho[0], torch.exp(_t([0.2, 0.2, 0.1, 0.1, 0.6])))


@pytest.mark.parametrize("span, same_as", [(1, "token"), (7, "sequence"), (50, "sequence")])
def test_subsentence_ends_are_token_and_sequence(span, same_as):
    """sspo_span 1 is the token ratio, a span >= the response is GSPO's sequence ratio: loss and gradient."""
    logp, old, adv, mask = _fixture_inputs()
    a = _ours(ObjectiveConfig.preset("grpo", kl_coef=0.0, ratio="subsentence", sspo_span=span), logp, old, adv, mask)
    b = _ours(ObjectiveConfig.preset("grpo", kl_coef=0.0, ratio=same_as), logp, old, adv, mask)
    assert a[0] == pytest.approx(b[0], abs=1e-12)
    torch.testing.assert_close(a[1], b[1])


# ----------------------------------------------------------------------------- refusals
@pytest.mark.parametrize(
    "overrides, words",
    [
        (["objective.clip=dro"], ["dro_beta", "required", "a float > 0"]),
        (["objective.clip=dro", "objective.dro_beta=0"], ["objective.dro_beta", "greater than 0", "got 0"]),
        (["objective.clip=dro", "objective.dro_beta=0.1", "objective.ratio=sequence"], ["ratio='sequence'", "token"]),
        (["objective.delta=1.0"], ["objective.delta", "greater than 1", "got 1.0"]),
        (["objective.clip=cispo", "objective.delta=2.0"], ["objective.delta=2.0", "clip='ppo'"]),
        (["objective.clip=vespo", "objective.vespo_lambda_neg=-1"], ["objective.vespo_lambda_neg", "greater than 0"]),
        (["objective.clip=vespo", "objective.vespo_k_pos=-0.5"], ["objective.vespo_k_pos", "greater than or equal"]),
        (["objective.clip=gppo", "objective.gppo_beta2=-0.5"], ["objective.gppo_beta2", "greater than or equal to 0"]),
        (["objective.ratio=subsentence", "objective.sspo_span=0"], ["objective.sspo_span", "greater than or equal"]),
    ],
)
def test_bad_values_are_refused_before_a_model_loads(overrides, words, capsys):
    assert main(["config", SMOKE, *overrides]) == 2
    err = capsys.readouterr().err
    assert err.startswith("harness: ") and err.count("\n") == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, (w, err)
