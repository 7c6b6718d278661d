"""The rollout correction's step-level part (harness/objective/batch_correction.py): verl's rejection sampling
(rollout_rs) and the IS weights' batch normalisation, by hand, against verl 0.9.1's own code (fixture from
benchmarks/reference/rollout_rejection.py), and the config's refusals."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import torch

from harness.objective import ObjectiveConfig, batch_correction, inputs_needed, policy_loss
from harness.objective.batch_correction import NORM_KEY, bounds_of, options_of
from harness.objective.rollout_correction import rollout_correction

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "rollout_rejection.json").read_text())
X = {k: torch.tensor(v, dtype=torch.float64) for k, v in FIXTURE["inputs"].items()}
M = X["mask"] > 0
BASE = dict(clip="none", agg="token_mean", kl_coef=0.0, entropy_coef=0.0)


def _rs(options, threshold) -> ObjectiveConfig:
    return ObjectiveConfig(**BASE, rollout_rs=options, rollout_rs_threshold=threshold)


def _fixed(cfg, old, rollout, mask):
    return batch_correction(cfg, mask, old, rollout)


# ------------------------------------------------------------------------------------------- hand-computed values
# one row of 3 tokens: log pi_old = [0, 0, 0] (r = pi_old / pi_rollout), the sampler's log-probs [-0.5, 0, 0.2]:
# log r = [0.5, 0, -0.2]; k1 = -log r = [-0.5, 0, 0.2]; k2 = (log r)^2 / 2 = [0.125, 0, 0.02];
# k3 = r - 1 - log r = [e^0.5 - 1.5, 0, e^-0.2 - 0.8] = [0.14872, 0, 0.01873]
OLD = torch.zeros(1, 3, dtype=torch.float64)
SAMPLER = torch.tensor([[-0.5, 0.0, 0.2]], dtype=torch.float64)
ONE_ROW = torch.ones(1, 3, dtype=torch.float64)
HAND = [
    ("token_k1", 1.5, [0, 1, 1]),  # k1 in [log(1/1.5), log 1.5] = [-0.405, 0.405]: -0.5 out
    ("token_k1", "0.9_1.3", [0, 1, 1]),  # [log 0.9, log 1.3] = [-0.105, 0.262]: -0.5 out, 0.2 in
    ("token_k2", 0.1, [0, 1, 1]),  # 0.125 > 0.1
    ("token_k3", 0.1, [0, 1, 1]),  # 0.1487 > 0.1
    ("seq_sum_k1", 1.5, [1, 1, 1]),  # sum k1 = -0.3 inside [-0.405, 0.405]
    ("seq_sum_k2", 0.14, [0, 0, 0]),  # sum k2 = 0.145 > 0.14: the whole row
    ("seq_mean_k2", 0.05, [1, 1, 1]),  # mean k2 = 0.0483 <= 0.05
    ("seq_mean_k3", 0.05, [0, 0, 0]),  # mean k3 = 0.05582 > 0.05
    ("seq_max_k3", 0.15, [1, 1, 1]),  # max k3 = 0.1487 <= 0.15
    ("seq_max_k2", 0.12, [0, 0, 0]),  # max k2 = 0.125 > 0.12
    ("token_k2,seq_mean_k2", "0.1,0.05", [0, 1, 1]),  # both must pass
]


@pytest.mark.parametrize("options, threshold, keep", HAND, ids=lambda v: str(v))
def test_each_rejection_option_by_hand(options, threshold, keep):
    got = _fixed(_rs(options, threshold), OLD, SAMPLER, ONE_ROW)
    assert got.mask.tolist() == [keep]


def test_a_rejected_token_leaves_every_denominator():
    """token_mean over the kept tokens only: the rejected token is as if it had not been sampled (verl's
    response_mask), not a zero in the mean (as the IS masks are)."""
    cfg = _rs("token_k2", 0.1)
    mask = _fixed(cfg, OLD, SAMPLER, ONE_ROW).mask
    logp = torch.tensor([[-1.0, -2.0, -3.0]], dtype=torch.float64, requires_grad=True)
    loss, _ = policy_loss(cfg, logp, logp.detach(), torch.tensor([1.0], dtype=torch.float64), mask)
    loss.backward()
    # clip none, A = 1, ratio 1: l_t = -1 on each kept token; mean over the 2 kept
    assert float(loss.detach()) == pytest.approx(-1.0)
    assert logp.grad.tolist() == [[0.0, -0.5, -0.5]]


def test_the_rejection_reports_its_shares():
    two_rows = torch.cat([ONE_ROW, torch.tensor([[0.0, 1.0, 0.0]], dtype=torch.float64)])  # row 1: the r = 1 token
    got = _fixed(_rs("token_k2", 0.1), torch.zeros(2, 3, dtype=torch.float64), SAMPLER.repeat(2, 1), two_rows)
    assert got.metrics["rejection/frac_masked"] == pytest.approx(1 / 4)  # 1 of the 4 response tokens
    assert got.metrics["rejection/seq_frac_masked"] == pytest.approx(1 / 2)  # row 0 of the 2 rows


# ------------------------------------------------------------------------------------------------- verl's own code
@pytest.mark.parametrize("case", FIXTURE["rejection"], ids=lambda c: f"{c['rollout_rs']}-{c['threshold']}")
def test_rejection_equals_verl(case):
    got = _fixed(_rs(case["rollout_rs"], case["threshold"]), X["old_logp"], X["rollout_logp"], X["mask"])
    assert got.mask.tolist() == case["mask"]


def test_the_fixture_rejects_some_and_keeps_some_in_every_case():
    n = int(M.sum())
    for case in FIXTURE["rejection"]:
        kept = int((torch.tensor(case["mask"]) > 0).sum())
        assert 0 < kept < n, case["rollout_rs"]


def _is_cfg(level: str, threshold) -> ObjectiveConfig:
    if isinstance(threshold, str):
        lo, hi = (float(v) for v in threshold.split("_"))
        bounds = dict(rollout_is=f"{level}_mask", rollout_is_clip_min=lo, rollout_is_clip_max=hi)
    else:
        bounds = dict(rollout_is=f"{level}_truncate", rollout_is_clip_max=threshold)
    return ObjectiveConfig(**BASE, **bounds, rollout_is_batch_normalize=True)


@pytest.mark.parametrize("case", FIXTURE["normalize"], ids=lambda c: f"{c['rollout_is']}-{c['threshold']}")
def test_batch_normalized_weights_equal_verl(case):
    """The step's mean goes to the loss in extras; the weight the loss applies is verl's normalised weight."""
    cfg = _is_cfg(case["rollout_is"], case["threshold"])
    fixed = _fixed(cfg, X["old_logp"], X["rollout_logp"], X["mask"])
    old, rollout = torch.where(M, X["old_logp"], 0.0), torch.where(M, X["rollout_logp"], 0.0)
    A = torch.ones_like(old)
    w = rollout_correction(cfg, old, old, rollout, A, M, fixed.extras[NORM_KEY]).w
    want = torch.tensor(case["weights"], dtype=torch.float64)
    torch.testing.assert_close(w[M], want[M], rtol=1e-6, atol=1e-7)
    raw = torch.tensor(case["raw"], dtype=torch.float64)
    on = M & (want > 0)  # IcePop's zeros carry no ratio
    assert fixed.metrics["rollout_is/batch_norm_factor"] == pytest.approx(float((raw[on] / want[on]).mean()), rel=1e-6)


def test_a_micro_batch_uses_the_steps_mean_not_its_own():
    """The normaliser is the whole batch's (verl computes it on the step's batch before the mini-batches): a
    micro-batch of 3 rows given its rows of the step's mean weighs as the step does, not by its own mean."""
    cfg = _is_cfg("token", 2.0)
    fixed = _fixed(cfg, X["old_logp"], X["rollout_logp"], X["mask"])
    old, rollout = torch.where(M, X["old_logp"], 0.0), torch.where(M, X["rollout_logp"], 0.0)
    A = torch.ones_like(old)
    whole = rollout_correction(cfg, old, old, rollout, A, M, fixed.extras[NORM_KEY]).w
    part = rollout_correction(cfg, old[:3], old[:3], rollout[:3], A[:3], M[:3], fixed.extras[NORM_KEY][:3]).w
    torch.testing.assert_close(part, whole[:3], rtol=0, atol=0)
    own = _fixed(cfg, X["old_logp"][:3], X["rollout_logp"][:3], X["mask"][:3]).extras[NORM_KEY]
    assert float(own[0]) != pytest.approx(float(fixed.extras[NORM_KEY][0]))  # its own mean would differ


def test_off_by_default_and_what_the_trainer_must_compute():
    cfg = ObjectiveConfig()
    same = _fixed(cfg, None, X["rollout_logp"], X["mask"])
    assert same.mask is X["mask"] and same.extras == {} and same.metrics == {}
    assert inputs_needed(_rs("token_k1", 2.0)).recompute_old_logp  # pi_old against the sampler, before the update


# ------------------------------------------------------------------------------------------------- refusals
def test_the_threshold_parsing():
    assert bounds_of(["token_k1"], 2.0)["token_k1"] == (0.5, 2.0)
    assert bounds_of(["token_k1", "seq_max_k3"], "0.8_1.5, 0.1") == {
        "token_k1": (0.8, 1.5),
        "seq_max_k3": (None, 0.1),
    }
    assert options_of("token_k1, token_k1,seq_sum_k2") == ["token_k1", "seq_sum_k2"]


@pytest.mark.parametrize(
    "knobs, named",
    [
        (dict(rollout_rs="token_k4", rollout_rs_threshold=2.0), "rollout_rs="),
        (dict(rollout_rs="seq_max_k1", rollout_rs_threshold=2.0), "rollout_rs="),  # verl has no seq_max_k1
        (dict(rollout_rs="token_k1"), "rollout_rs_threshold"),  # a bound is required
        (dict(rollout_rs="token_k1", rollout_rs_threshold=0.5), "rollout_rs_threshold"),  # [2, 0.5] holds no 1
        (dict(rollout_rs="token_k1", rollout_rs_threshold="1.2_3.0"), "rollout_rs_threshold"),  # nor [1.2, 3]
        (dict(rollout_rs="token_k2", rollout_rs_threshold="0.5_2.0"), "rollout_rs_threshold"),  # k2: one bound
        (dict(rollout_rs="token_k2", rollout_rs_threshold=-1.0), "rollout_rs_threshold"),
        (dict(rollout_rs="token_k2", rollout_rs_threshold="a"), "rollout_rs_threshold"),
        (dict(rollout_rs="token_k2,token_k3", rollout_rs_threshold="1,2,3"), "rollout_rs_threshold"),
        (dict(rollout_rs="token_k2", rollout_rs_threshold=True), "rollout_rs_threshold"),
        (dict(rollout_is="token_truncate", rollout_is_batch_normalize="yes"), "rollout_is_batch_normalize"),
    ],
)
def test_bad_values_are_refused_naming_the_knob(knobs, named):
    with pytest.raises(ValueError, match=named):
        ObjectiveConfig(**knobs)


def test_a_run_config_refuses_a_normalisation_without_weights_and_a_correction_bypass_makes_one():
    from harness.config import ConfigError, load_config

    cases = [
        (["objective.rollout_is_batch_normalize=true"], "rollout_is_batch_normalize=True is read only with"),
        (["train.old_logp=bypass", "objective.rollout_is=token_truncate"], "objective.rollout_is='token_truncate'"),
        (["train.old_logp=bypass", "objective.tis_cap=2.0"], "objective.tis_cap=2.0"),
        (
            ["train.old_logp=bypass", "objective.rollout_rs=token_k1", "objective.rollout_rs_threshold=2.0"],
            "objective.rollout_rs='token_k1' with train.old_logp='bypass'",
        ),
        (
            ["train.old_logp=bypass", "objective.seq_logprob_error_threshold=2"],
            "objective.seq_logprob_error_threshold=2.0 with train.old_logp='bypass'",
        ),
        (["train.old_logp=rollout", "objective.seq_logprob_error_threshold=2"], "it rejects by pi_old / pi_rollout"),
    ]
    for overrides, says in cases:
        with pytest.raises(ConfigError, match=re.escape(says)):
            load_config("experiments/runs/smoke.yaml", overrides)


# ------------------------------------------------------------------------------------------------- NeMo-RL's mask
def test_the_sequence_error_by_hand():
    """Row [log r = 0.5, 0, -0.2] (r = pi_old / pi_rollout): error = (e^0.5 + e^0 + e^0.2) / 3
    = (1.64872 + 1 + 1.22140) / 3 = 1.29004; masked at a threshold of 1.28, kept at 1.3."""
    want = (math.exp(0.5) + 1 + math.exp(0.2)) / 3
    assert want == pytest.approx(1.29004, abs=1e-5)
    for threshold, kept in ((1.28, [0, 0, 0]), (1.3, [1, 1, 1])):
        got = _fixed(ObjectiveConfig(**BASE, seq_logprob_error_threshold=threshold), OLD, SAMPLER, ONE_ROW)
        assert got.mask.tolist() == [kept]
        assert got.metrics["seq_logprob_error/mean"] == pytest.approx(want)


@pytest.mark.parametrize("case", FIXTURE["seq_logprob_error"], ids=lambda c: str(c["threshold"]))
def test_sequence_error_mask_equals_nemo_rl(case):
    cfg = ObjectiveConfig(**BASE, seq_logprob_error_threshold=case["threshold"])
    got = _fixed(cfg, X["old_logp"], X["rollout_logp"], X["mask"])
    rows = M.any(-1)
    kept = got.mask.sum(-1) > 0
    assert kept[rows].tolist() == [v > 0 for v in torch.tensor(case["sample_mask"])[rows].tolist()]
    assert 0 < int(kept.sum()) < int(rows.sum())  # the case masks some rows, not all
    want = case["metrics"]["mean_seq_mult_prob_error"]  # over the rows with a response token
    assert got.metrics["seq_logprob_error/mean"] == pytest.approx(want, rel=1e-9)


def test_the_sequence_error_and_rollout_rs_reject_together():
    cfg = ObjectiveConfig(**BASE, seq_logprob_error_threshold=1.3, rollout_rs="token_k2", rollout_rs_threshold=0.1)
    assert _fixed(cfg, OLD, SAMPLER, ONE_ROW).mask.tolist() == [[0, 1, 1]]  # the token rejection; the row passes
    assert inputs_needed(cfg).recompute_old_logp


@pytest.mark.parametrize("value", [0.5, -1.0, "two"])
def test_a_sequence_error_threshold_below_one_is_refused(value):
    with pytest.raises(ValueError, match="seq_logprob_error_threshold"):
        ObjectiveConfig(seq_logprob_error_threshold=value)
