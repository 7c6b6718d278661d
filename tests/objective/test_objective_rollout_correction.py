"""The rollout correction against the sampler's log-probs (harness/objective/rollout_correction.py, docs/objective.md,
"Rollout correction against the sampler"): hand-computed values of each formula; equal to TRL 1.16's importance-sampling
modes and off-policy mask and to verl 0.9.1's rollout_is weights on the fixture
benchmarks/reference/rollout_correction.py wrote (random inputs with padding, 1e-6); tis_cap computing token_truncate
with clip_max, logging none of its metrics; the config's refusals."""

import json
import math
from pathlib import Path

import pytest
import torch

from harness.objective import ObjectiveConfig, policy_loss
from harness.objective.api import inputs_needed
from harness.objective.rollout_correction import m2po_keep, off_policy_keep, rollout_correction, uses_sampler_logp

T = torch.tensor
FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "rollout_correction.json").read_text())
BASE = dict(kl_coef=0.0, clip="none", agg="token_mean")


def _tensor(rows) -> torch.Tensor:
    return torch.tensor([[float("nan") if v is None else v for v in row] for row in rows], dtype=torch.float32)


X = {k: (_tensor(v) if isinstance(v[0], list) else torch.tensor(v)) for k, v in FIXTURE["inputs"].items()}
M = X["mask"] > 0


def _clean(x):
    return torch.where(M, x, torch.zeros_like(x))


def _weight(cfg: ObjectiveConfig) -> torch.Tensor:
    """Our w (B, T) on the fixture's inputs, as policy_loss computes it."""
    A = X["adv"].unsqueeze(-1).expand_as(X["logp"])
    got = rollout_correction(cfg, _clean(X["logp"]), _clean(X["old_logp"]), _clean(X["rollout_logp"]), A, M)
    return got.w


def _cfg_of(case) -> ObjectiveConfig:
    return ObjectiveConfig(
        **BASE, rollout_is=case["mode"], rollout_is_clip_min=case["clip_min"], rollout_is_clip_max=case["clip_max"]
    )


# ------------------------------------------------------------------------------------------- hand-computed values
# one row, pi_old = pi_theta = 1, the sampler's log-probs [-2, 0, 1]: log r = [2, 0, -1], r = [e^2, 1, e^-1];
# bounds [0.5, 5]; clip none, token_mean, A = 1: loss = -mean_t w_t
HAND = {
    "token_truncate": [5.0, 1.0, 0.5],  # e^2 = 7.39 -> 5, e^-1 = 0.37 -> 0.5
    "token_mask": [0.0, 1.0, 0.0],  # both outside [0.5, 5]: dropped (IcePop)
    "sequence_truncate": [math.e] * 3,  # prod r = e^(2 + 0 - 1) = e, inside
    "sequence_mask": [math.e] * 3,
}


@pytest.mark.parametrize("mode", list(HAND))
def test_each_importance_sampling_mode_by_hand(mode):
    cfg = ObjectiveConfig(**BASE, rollout_is=mode, rollout_is_clip_min=0.5, rollout_is_clip_max=5.0)
    loss, metrics = policy_loss(
        cfg, torch.zeros(1, 3), torch.zeros(1, 3), T([1.0]), torch.ones(1, 3), rollout_logp=T([[-2.0, 0.0, 1.0]])
    )
    assert loss.item() == pytest.approx(-sum(HAND[mode]) / 3, rel=1e-6)
    kind = "masked" if mode.endswith("mask") else "truncated"
    assert metrics[f"rollout_is/frac_{kind}"] == pytest.approx(2 / 3 if mode.startswith("token") else 0.0)
    assert metrics[f"rollout_is/seq_frac_{kind}"] == (1.0 if mode.startswith("token") else 0.0)
    assert metrics["rollout_is/weight_mean"] == pytest.approx(sum(HAND[mode]) / 3, rel=1e-6)


def test_a_sequence_outside_its_bounds_is_truncated_or_dropped_whole():
    # two rows: log r sums 2.5 (r = 12.2 > 5) and -0.2 (r = 0.82, inside); the second row has one padding token
    roll = T([[-1.0, -1.5, 0.0], [0.2, 0.0, 9.0]])
    mask = T([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    for mode, w0 in (("sequence_truncate", 5.0), ("sequence_mask", 0.0)):
        cfg = ObjectiveConfig(**BASE, rollout_is=mode, rollout_is_clip_min=0.5, rollout_is_clip_max=5.0)
        loss, metrics = policy_loss(cfg, torch.zeros(2, 3), torch.zeros(2, 3), T([1.0, 1.0]), mask, rollout_logp=roll)
        assert loss.item() == pytest.approx(-(3 * w0 + 2 * math.exp(-0.2)) / 5, rel=1e-6)
        kind = "masked" if mode.endswith("mask") else "truncated"
        assert metrics[f"rollout_is/seq_frac_{kind}"] == 0.5 and metrics[f"rollout_is/frac_{kind}"] == 0.6


def test_off_policy_mask_by_hand():
    # KL_i = mean_t (log pi_rollout - log pi_theta): row 0 0.5/3 = 0.167, row 1 0.3/3 = 0.1, row 2 0.9/3 = 0.3
    roll = T([[0.5, 0.0, 0.0], [0.1, 0.1, 0.1], [0.9, 0.0, 0.0]])
    adv = T([-1.0, -1.0, 1.0])  # delta 0.12: row 0 is negative and far -> dropped; row 1 near; row 2 positive
    cfg = ObjectiveConfig(**BASE, off_policy_mask_threshold=0.12)
    loss, metrics = policy_loss(cfg, torch.zeros(3, 3), torch.zeros(3, 3), adv, torch.ones(3, 3), rollout_logp=roll)
    assert loss.item() == pytest.approx(-(0 * 3 - 1 * 3 + 1 * 3) / 9, abs=1e-7)  # row 0 weighs 0
    assert metrics["off_policy_mask/frac_masked"] == pytest.approx(1 / 3)
    keep, _ = off_policy_keep(cfg, torch.zeros(3, 3), roll, adv.unsqueeze(-1).expand(3, 3), torch.ones(3, 3) > 0)
    assert keep.tolist() == [[False] * 3, [True] * 3, [True] * 3]


def test_m2po_masks_the_largest_squared_log_ratios_until_the_budget_holds():
    # (log r)^2 = [4, 0, 1, 0.25, 0.01] on 5 tokens (one padded position): mean 1.052 > 0.3; without the 4: 0.315 > 0.3;
    # without the 4 and the 1: 0.0867 <= 0.3 -> two masked
    lp = torch.zeros(2, 3)
    roll = T([[-2.0, 0.0, 1.0], [0.5, 0.1, 7.0]])
    mask = T([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    cfg = ObjectiveConfig(**BASE, m2_threshold=0.3)
    keep, _ = m2po_keep(cfg, lp, torch.where(mask > 0, roll, 0.0), torch.ones(2, 3), mask > 0)
    assert keep.tolist() == [[False, True, False], [True, True, True]]
    loss, metrics = policy_loss(cfg, lp, lp, T([1.0, 1.0]), mask, rollout_logp=roll)
    assert loss.item() == pytest.approx(-3 / 5, rel=1e-6)
    assert metrics["m2po/frac_masked"] == pytest.approx(2 / 5) and metrics["m2po/m2"] == pytest.approx(5.26 / 5)
    assert m2po_keep(cfg.model_copy(update={"m2_threshold": 2.0}), lp, roll * mask, torch.ones(2, 3), mask > 0)[0].all()


def test_the_corrections_multiply():
    # TIS with cap 2: w = [2, 1, e^-1]; M2PO at 0.3 masks (log r)^2 = 4 and 1 (the rest's mean 0): [0, 1, 0]
    cfg = ObjectiveConfig(**BASE, rollout_is="token_truncate", rollout_is_clip_max=2.0, m2_threshold=0.3)
    loss, _ = policy_loss(
        cfg, torch.zeros(1, 3), torch.zeros(1, 3), T([1.0]), torch.ones(1, 3), rollout_logp=T([[-2.0, 0.0, 1.0]])
    )
    assert loss.item() == pytest.approx(-1 / 3, rel=1e-6)  # M2PO's mask [0, 1, 0] x TIS [2, 1, 0.37]


def test_tis_cap_is_token_truncate_and_logs_as_before():
    logp, old = torch.zeros(2, 3), T([[0.3, -0.2, 1.0], [0.0, 0.5, -0.7]])
    roll, mask, adv = T([[-1.0, 0.0, 0.2], [0.4, -0.6, 0.0]]), T([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]]), T([1.0, -0.5])
    legacy, m_legacy = policy_loss(ObjectiveConfig(**BASE, tis_cap=1.5), logp, old, adv, mask, rollout_logp=roll)
    new, m_new = policy_loss(
        ObjectiveConfig(**BASE, rollout_is="token_truncate", rollout_is_clip_max=1.5),
        logp,
        old,
        adv,
        mask,
        rollout_logp=roll,
    )
    assert torch.equal(legacy, new)
    w = torch.exp(old - torch.where(mask > 0, roll, 0.0)).clamp(max=1.5)  # TIS: w = min(exp(old - rollout), cap)
    assert w.max() == 1.5  # the cap binds on this batch
    rho_a = torch.exp(logp - old) * adv.unsqueeze(-1)  # clip none: l = -rho A, token_mean
    assert legacy.item() == pytest.approx((-(w * rho_a) * mask).sum().item() / 5, rel=1e-6)
    assert not any(k.startswith("rollout_is/") for k in m_legacy) and "rollout_is/frac_truncated" in m_new


# ---------------------------------------------------------------------------------- equal to TRL 1.16 and verl 0.9.1
@pytest.mark.parametrize(
    "case", FIXTURE["trl_importance_sampling"], ids=lambda c: f"{c['mode']}-{c['clip_min']}-{c['clip_max']}"
)
def test_importance_sampling_equals_trl(case):
    want = torch.tensor(case["w"], dtype=torch.float32)
    got = _weight(_cfg_of(case))
    torch.testing.assert_close(got[M], want[M], rtol=1e-6, atol=1e-6)


def test_the_fixture_exercises_every_branch():
    kinds = set()
    for case in FIXTURE["trl_importance_sampling"]:
        w = torch.tensor(case["w"], dtype=torch.float32)[M]
        if (w == 0).any():
            kinds.add(f"{case['mode']} drops")
        if case["clip_max"] is not None and (w == case["clip_max"]).any():
            kinds.add(f"{case['mode']} caps")
        if case["clip_min"] is not None and (w == case["clip_min"]).any():
            kinds.add(f"{case['mode']} raises")
    assert {"token_mask drops", "sequence_mask drops", "token_truncate caps", "token_truncate raises"} <= kinds
    assert {"sequence_truncate caps", "sequence_truncate raises"} <= kinds
    keeps = [torch.tensor(c["keep"], dtype=torch.float32)[:, 0] for c in FIXTURE["trl_off_policy_mask"]]
    assert any(not k.all() for k in keeps) and any(k.all() for k in keeps)


@pytest.mark.parametrize("case", FIXTURE["trl_off_policy_mask"], ids=lambda c: str(c["threshold"]))
def test_off_policy_mask_equals_trl(case):
    got = _weight(ObjectiveConfig(**BASE, off_policy_mask_threshold=case["threshold"]))
    assert torch.equal(got[M], torch.tensor(case["keep"], dtype=torch.float32)[M])


@pytest.mark.parametrize("case", FIXTURE["verl_rollout_is"], ids=lambda c: f"{c['rollout_is']}-{c['threshold']}")
def test_rollout_is_equals_verl(case):
    """verl's rollout_is_threshold: a float is TIS (our *_truncate), "lo_hi" IcePop (our *_mask with both bounds)."""
    th = case["threshold"]
    if isinstance(th, str):
        lo, hi = (float(v) for v in th.split("_"))
        cfg = ObjectiveConfig(
            **BASE, rollout_is=f"{case['rollout_is']}_mask", rollout_is_clip_min=lo, rollout_is_clip_max=hi
        )
    else:
        cfg = ObjectiveConfig(**BASE, rollout_is=f"{case['rollout_is']}_truncate", rollout_is_clip_max=th)
    torch.testing.assert_close(_weight(cfg)[M], torch.tensor(case["w"], dtype=torch.float32)[M], rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------------------------------------- what a trainer needs
def test_the_trainer_computes_what_each_correction_reads():
    cfg = ObjectiveConfig(rollout_is="sequence_mask")
    assert uses_sampler_logp(cfg) and inputs_needed(cfg).recompute_old_logp  # pi_old (the trainer's) over the sampler's
    for knob in (dict(off_policy_mask_threshold=0.5), dict(m2_threshold=0.04)):
        cfg = ObjectiveConfig(**knob)
        assert uses_sampler_logp(cfg) and not inputs_needed(cfg).recompute_old_logp  # pi_theta against the sampler
    assert not uses_sampler_logp(ObjectiveConfig())


def test_a_correction_without_the_sampler_logp_is_refused():
    with pytest.raises(ValueError, match="need rollout_logp"):
        policy_loss(ObjectiveConfig(m2_threshold=0.1), torch.zeros(1, 2), torch.zeros(1, 2), T([1.0]), torch.ones(1, 2))


@pytest.mark.parametrize(
    "knobs, named",
    [
        (dict(rollout_is="tis"), "rollout_is"),
        (dict(rollout_is="token_truncate", tis_cap=2.0), "tis_cap"),
        (dict(rollout_is="token_mask", rollout_is_clip_min=3.0, rollout_is_clip_max=2.0), "rollout_is_clip_min"),
        (dict(rollout_is="sequence_truncate", rollout_is_clip_max=None), "rollout_is_clip_max"),
        (dict(rollout_is="token_mask", rollout_is_clip_max=0.0), "rollout_is_clip_max"),
        (dict(off_policy_mask_threshold=-0.1), "off_policy_mask_threshold"),
        (dict(m2_threshold=0.0), "m2_threshold"),
    ],
)
def test_bad_values_are_refused_naming_the_knob(knobs, named):
    with pytest.raises(ValueError, match=named):
        ObjectiveConfig(**knobs)


def test_a_token_the_sampler_could_not_score_gets_weight_one_as_in_trl():
    # TRL 1.16 nan_to_num's the log-ratio: r = 1 at a NaN sampler log-prob; M2PO and the off-policy mask count it 0
    roll = T([[-2.0, float("nan"), 1.0]])
    cfg = ObjectiveConfig(**BASE, rollout_is="token_truncate", rollout_is_clip_max=5.0, off_policy_mask_threshold=0.0)
    loss, _ = policy_loss(cfg, torch.zeros(1, 3), torch.zeros(1, 3), T([1.0]), torch.ones(1, 3), rollout_logp=roll)
    assert loss.item() == pytest.approx(-(5.0 + 1.0 + math.exp(-1.0)) / 3, rel=1e-6)
    loss, _ = policy_loss(
        ObjectiveConfig(**BASE, m2_threshold=0.5),
        torch.zeros(1, 3),
        torch.zeros(1, 3),
        T([1.0]),
        torch.ones(1, 3),
        rollout_logp=roll,
    )
    assert loss.item() == pytest.approx(-2 / 3, rel=1e-6)  # (log r)^2 = [4, 0, 1]: the 4 masked, mean 0.5 left


@pytest.mark.parametrize("mode", ["token_mask", "sequence_mask"])
@pytest.mark.parametrize(
    "bounds, named",
    [
        ((None, 0.5), "rollout_is_clip_max=0.5, rollout_is_clip_min=None with rollout_is='{m}'"),
        ((0.2, 0.9), "rollout_is_clip_max=0.9, rollout_is_clip_min=0.2 with rollout_is='{m}'"),
        ((2.0, 5.0), "rollout_is_clip_min=2.0, rollout_is_clip_max=5.0 with rollout_is='{m}'"),
    ],
)
def test_a_mask_interval_without_1_is_refused_naming_both_bounds(mode, bounds, named):
    """w = r 1[C_min <= r <= C_max] (module docstring): an on-policy token has r = 1, so [0.2, 0.9] or [2, 5]
    would give every such token weight 0 (the first case computes it)."""
    lo, hi = bounds
    r = torch.tensor([[1.0, 1.0]])
    assert bool(((r < (lo or 0.0)) | (r > hi)).all())  # every on-policy token outside the interval: masked
    with pytest.raises(ValueError) as err:
        ObjectiveConfig(rollout_is=mode, rollout_is_clip_min=lo, rollout_is_clip_max=hi)
    assert named.format(m=mode) in str(err.value)
    assert "an interval without 1 masks every on-policy token" in str(err.value)


@pytest.mark.parametrize("bounds", [(None, 1.0), (1.0, 3.0), (0.5, 5.0), (None, None)])
def test_a_mask_interval_holding_1_and_any_truncation_interval_are_accepted(bounds):
    """1 on an edge is kept (C_min <= r <= C_max); a truncation clamps every weight into [C_min, C_max] and masks
    none, so its interval may lie off 1 (a rescaled step, not a dropped token)."""
    lo, hi = bounds
    ObjectiveConfig(rollout_is="token_mask", rollout_is_clip_min=lo, rollout_is_clip_max=hi)
    ObjectiveConfig(rollout_is="token_truncate", rollout_is_clip_min=None, rollout_is_clip_max=0.5)
    ObjectiveConfig(rollout_is="sequence_truncate", rollout_is_clip_min=2.0, rollout_is_clip_max=4.0)
