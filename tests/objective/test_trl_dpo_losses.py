"""Every `dpo_loss_type` equals TRL 1.16's DPOTrainer on the same log-probs (loss and its gradient w.r.t.
the policy's chosen and rejected log-probs, 1e-6): the fixture is TRL's own `_compute_loss`, run by
benchmarks/reference/trl_dpo_loss.py (TRL is not needed here). Hand-computed values for a few of them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from harness.objective import ObjectiveConfig, dpo_loss
from harness.objective.dpo_losses import DPO_LOSS

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "trl_dpo_loss.json").read_text())
OWN_KNOBS = {"label_smoothing": "dpo_label_smoothing", "discopop_tau": "dpo_discopop_tau"}


def T(x) -> torch.Tensor:
    return torch.tensor(x, dtype=torch.float64)


def _config(case: dict) -> ObjectiveConfig:
    types = case["loss_type"]
    owned = {k.name for t in types for k in DPO_LOSS.mode(t).knobs}
    knobs = {OWN_KNOBS[k]: case[k] for k in OWN_KNOBS if OWN_KNOBS[k] in owned}
    if case["loss_weights"] is not None:  # TRL's loss_type list with loss_weights
        knobs["dpo_loss_weights"] = dict(zip(types, case["loss_weights"], strict=True))
    return ObjectiveConfig.preset("dpo", dpo_loss_type=types[0], dpo_beta=case["beta"], **knobs)


def _ours(cfg: ObjectiveConfig, data: dict = FIXTURE) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    pc, pr = T(data["pol_chosen"]).requires_grad_(), T(data["pol_rejected"]).requires_grad_()
    loss, _ = dpo_loss(
        cfg,
        pc,
        pr,
        T(data["ref_chosen"]),
        T(data["ref_rejected"]),
        chosen_lengths=T(data["chosen_lengths"]),
        rejected_lengths=T(data["rejected_lengths"]),
    )
    g_c, g_r = torch.autograd.grad(loss, (pc, pr))
    return loss.detach(), g_c, g_r


def test_the_fixture_covers_every_builtin_loss_type():
    assert FIXTURE["trl"] == "1.16.0"
    assert {c["loss_type"][0] for c in FIXTURE["cases"] if len(c["loss_type"]) == 1} == set(DPO_LOSS.builtin_names())
    assert any(c["loss_weights"] for c in FIXTURE["cases"])


@pytest.mark.parametrize("case", FIXTURE["cases"], ids=lambda c: c["name"])
def test_loss_and_gradient_equal_trl(case):
    loss, g_c, g_r = _ours(_config(case))
    assert loss.item() == pytest.approx(case["loss"], abs=1e-6)
    torch.testing.assert_close(g_c, T(case["grad_chosen"]), rtol=0, atol=1e-6)
    torch.testing.assert_close(g_r, T(case["grad_rejected"]), rtol=0, atol=1e-6)


def test_ipo_on_the_sums_is_not_trls():
    """dpo_ipo_length_norm false squares the token sums (the paper read literally): not TRL's number."""
    case = next(c for c in FIXTURE["cases"] if c["name"] == "ipo")
    loss, _, _ = _ours(_config(case).model_copy(update={"dpo_ipo_length_norm": False}))
    c = T(FIXTURE["pol_chosen"]) - T(FIXTURE["ref_chosen"])
    r = T(FIXTURE["pol_rejected"]) - T(FIXTURE["ref_rejected"])
    assert loss.item() == pytest.approx(float(((c - r - 5.0) ** 2).mean()), abs=1e-12)
    assert abs(loss.item() - case["loss"]) > 1.0


# pair 1: chosen -10 vs ref -12 (c = +2), rejected -15 vs ref -14 (r = -1): h = 3; lengths 4 and 2
# pair 2: chosen  -5 vs ref  -5 (c =  0), rejected  -6 vs ref  -7 (r = +1): h = -1; lengths 2 and 5
HAND = dict(
    pol_chosen=[-10.0, -5.0],
    pol_rejected=[-15.0, -6.0],
    ref_chosen=[-12.0, -5.0],
    ref_rejected=[-14.0, -7.0],
    chosen_lengths=[4.0, 2.0],
    rejected_lengths=[2.0, 5.0],
)
sig = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731


def _hand(loss_type: str, **knobs) -> tuple[float, list[float], list[float]]:
    loss, g_c, g_r = _ours(ObjectiveConfig.preset("dpo", dpo_loss_type=loss_type, **knobs), HAND)
    return loss.item(), g_c.tolist(), g_r.tolist()


def test_ipo_per_token_by_hand():
    # c/|y_c| = [0.5, 0], r/|y_r| = [-0.5, 0.2]: diff [1, -0.2]; target 1/(2*0.1) = 5 -> [16, 27.04] -> 21.52
    loss, g_c, g_r = _hand("ipo")
    assert loss == pytest.approx(21.52, abs=1e-12)
    # d/dpi_c = 2 (diff - 5) / |y_c| / B = [2*(-4)/4/2, 2*(-5.2)/2/2] = [-1, -2.6]; d/dpi_r = the negative / |y_r|
    assert g_c == pytest.approx([-1.0, -2.6], abs=1e-12)
    assert g_r == pytest.approx([2.0, 1.04], abs=1e-12)
    # on the sums: (h - 5)^2 = [4, 36] -> 20
    assert _hand("ipo", dpo_ipo_length_norm=False)[0] == pytest.approx(20.0, abs=1e-12)


def test_hinge_robust_and_sppo_by_hand():
    # hinge: max(0, 1 - 0.1 h) = [0.7, 1.1] -> 0.9; both pairs inside the margin: d/dpi_c = -beta/B = -0.05
    loss, g_c, _ = _hand("hinge")
    assert loss == pytest.approx(0.9, abs=1e-12) and g_c == pytest.approx([-0.05, -0.05], abs=1e-12)
    # robust, eps 0.1: (-(0.9) log sigma(z) + 0.1 log sigma(-z)) / 0.8, z = [0.3, -0.1]
    ls = lambda x: math.log(sig(x))  # noqa: E731
    want = sum((-0.9 * ls(z) + 0.1 * ls(-z)) / 0.8 for z in (0.3, -0.1)) / 2
    assert _hand("robust", dpo_label_smoothing=0.1)[0] == pytest.approx(want, abs=1e-12)
    # sppo_hard: (c - 5)^2 + (r + 5)^2 = [9 + 16, 25 + 36] = [25, 61] -> 43
    assert _hand("sppo_hard")[0] == pytest.approx(43.0, abs=1e-12)


def test_apo_and_bco_by_hand():
    # apo_zero: 1 - sigma(0.1 c) + sigma(0.1 r) = [1 - sigma(0.2) + sigma(-0.1), 1 - 0.5 + sigma(0.1)]
    want = (1 - sig(0.2) + sig(-0.1) + 0.5 + sig(0.1)) / 2
    assert _hand("apo_zero")[0] == pytest.approx(want, abs=1e-12)
    # apo_down: sigma(0.1 c) + 1 - sigma(0.1 h) = [sigma(0.2) + 1 - sigma(0.3), 0.5 + 1 - sigma(-0.1)]
    want = (sig(0.2) + 1 - sig(0.3) + 1.5 - sig(-0.1)) / 2
    assert _hand("apo_down")[0] == pytest.approx(want, abs=1e-12)
    # bco_pair: -log sigma(0.1 c) - log sigma(-0.1 r)
    want = -(math.log(sig(0.2)) + math.log(sig(0.1)) + math.log(0.5) + math.log(sig(-0.1))) / 2
    assert _hand("bco_pair")[0] == pytest.approx(want, abs=1e-12)


def test_aot_unpaired_sorts_over_the_batch():
    # sort(c) = [0, 2], sort(r) = [-1, 1] -> deltas [1, 1]: -log sigma(0.1) for both pairs
    loss, _, _ = _hand("aot_unpaired")
    assert loss == pytest.approx(-math.log(sig(0.1)), abs=1e-12)
    # paired: sort(pi_c - pi_r) = sort([5, 1]) = [1, 5], sort(ref_c - ref_r) = sort([2, 2]) -> deltas [-1, 3]
    want = -(math.log(sig(-0.1)) + math.log(sig(0.3))) / 2
    assert _hand("aot")[0] == pytest.approx(want, abs=1e-12)


def test_length_normalised_modes_need_both_lengths():
    cfg = ObjectiveConfig.preset("dpo", dpo_loss_type="sigmoid_norm")
    args = [T(HAND[k]) for k in ("pol_chosen", "pol_rejected", "ref_chosen", "ref_rejected")]
    with pytest.raises(ValueError, match="rejected_lengths"):
        dpo_loss(cfg, *args, chosen_lengths=T(HAND["chosen_lengths"]))


def test_a_mix_is_the_weighted_sum_of_its_terms():
    cfg = ObjectiveConfig.preset("dpo", dpo_loss_weights={"sigmoid": 0.8, "sppo_hard": 0.5})
    args = [T(HAND[k]) for k in ("pol_chosen", "pol_rejected", "ref_chosen", "ref_rejected")]
    loss, m = dpo_loss(cfg, *args)
    # sigmoid: mean -log sigma([0.3, -0.1]) = 0.6493760...; sppo_hard 43 (above)
    sigmoid = (math.log1p(math.exp(-0.3)) + math.log1p(math.exp(0.1))) / 2
    assert loss.item() == pytest.approx(0.8 * sigmoid + 0.5 * 43.0, abs=1e-12)
    assert m["loss/dpo/sigmoid"] == pytest.approx(0.8 * sigmoid, abs=1e-12)
    assert m["loss/dpo/sppo_hard"] == pytest.approx(21.5, abs=1e-12) and m["loss/dpo"] == pytest.approx(loss.item())


@pytest.mark.parametrize(
    "knobs, words",
    [
        (dict(dpo_loss_weights={"sigmoid": 1.0, "kto": 1.0}), ["dpo_loss_weights", "'kto'", "allowed keys"]),
        (dict(dpo_loss_weights={"bco_pair": 1.0}), ["dpo_loss_type='sigmoid'", "dpo_loss_weights"]),
        (dict(dpo_loss_weights={"sigmoid": -1.0}), ["dpo_loss_weights", "greater than 0"]),
        (dict(dpo_loss_weights={"sigmoid": 1.0, "exo_pair": 1.0}), ["dpo_label_smoothing", "exo_pair"]),
        (dict(dpo_loss_type="robust", dpo_label_smoothing=-0.1), ["dpo_label_smoothing", "-0.1"]),
        (dict(dpo_loss_type="robust", dpo_label_smoothing=0.5), ["dpo_label_smoothing", "0.5"]),
        (dict(dpo_loss_type="discopop", dpo_discopop_tau=0.0), ["dpo_discopop_tau"]),
        (dict(dpo_loss_type="exo_pair"), ["dpo_label_smoothing=0.0", "exo_pair", "> 0"]),
    ],
)
def test_bad_dpo_knobs_are_refused_naming_the_key(knobs, words):
    with pytest.raises(ValueError) as e:
        ObjectiveConfig.preset("dpo", **knobs)
    msg = str(e.value)
    assert all(w in msg for w in words), msg
