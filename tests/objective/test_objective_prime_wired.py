"""PRIME through the trainer's calls (harness/objective/api.py, docs/objective.md, "The trainer's calls", "PRIME"): the
`prime` preset's `advantages` and `loss` reproduce prime.py's worked example (verl's recipe numbers),
micro-batches sum to the mini-batch's reward-model loss, and the knobs are validated."""

from __future__ import annotations

import math

import pytest
import torch

from harness.config import ConfigError
from harness.objective import LossInputs, ObjectiveConfig, advantages, inputs_needed, loss

Q = [[0.2, -0.4, 1.0], [-0.6, 0.8, 0.0]]  # log pi_phi - log pi_ref
MASK = [[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]]
OUT = [1.0, 0.0]
REF = [[-1.0, -2.0, -0.5], [-0.3, -1.5, 0.0]]


def T(x):
    return torch.tensor(x, dtype=torch.float64)


def _prm_logp():
    return (T(Q) + T(REF)) * T(MASK)


def test_the_preset_asks_for_the_reward_model_and_the_reference():
    needs = inputs_needed(ObjectiveConfig.preset("prime"))
    assert needs.components == ("prm_logp",) and needs.ref_logp
    assert not inputs_needed(ObjectiveConfig.preset("grpo")).components


@pytest.mark.parametrize(
    "keep, expected",
    [
        (False, [[1.046684, 0.244239, 0.697795], [-1.430470, -0.558247, 0.0]]),  # verl's recipe: last dropped
        (True, [[0.397414, 0.375336, 1.148064], [-1.479238, -0.441575, 0.0]]),  # the PRIME repo: kept
    ],
)
def test_advantages_reproduce_the_worked_example(keep, expected):
    obj = ObjectiveConfig.preset("prime", prime_keep_last_token=keep)
    s = advantages(obj, T(OUT), T(MASK), 2, prm_logp=_prm_logp(), ref_logp=T(REF))
    torch.testing.assert_close(s.adv, T(expected), rtol=0, atol=1e-6)
    # BCE of sigmoid(0.05 * [0.8, 0.2]) against [1, 0]; both scores > 0: one of two predicted
    assert s.metrics["prm/loss"] == pytest.approx(0.685753, abs=1e-6)
    assert s.metrics["prm/accuracy"] == 0.5
    # token rewards 0.05 q: [0.01, -0.02, (0.05)] and [-0.03, (0.04)] over 5 tokens
    proc = (0.01 - 0.02 - 0.03 + (0.05 + 0.04 if keep else 0.0)) / 5
    assert s.metrics["reward/process_mean"] == pytest.approx(proc, abs=1e-12)


def test_advantages_without_the_reward_model_raise():
    with pytest.raises(ValueError, match="prm_logp"):
        advantages(ObjectiveConfig.preset("prime"), T(OUT), T(MASK), 2, ref_logp=T(REF))


def test_loss_adds_the_reward_model_bce_and_micro_batches_sum_to_it():
    obj = ObjectiveConfig.preset("prime")
    adv = advantages(obj, T(OUT), T(MASK), 2, prm_logp=_prm_logp(), ref_logp=T(REF)).adv
    logp = T(REF).clone()

    def part(rows, prm):
        return LossInputs(
            logp=logp[rows],
            old_logp=logp[rows],
            adv=adv[rows],
            mask=T(MASK)[rows],
            entropy=None,
            ref_logp=T(REF)[rows],
            prm_logp=prm[rows],
            outcomes=T(OUT)[rows],
        )

    prm = _prm_logp().requires_grad_(True)
    total, m = loss(obj, part([0, 1], prm), 2, 5)
    assert m["loss/prm"] == pytest.approx(0.685753, abs=1e-6)
    total.backward()
    # d BCE / d q_t = beta * (sigmoid(beta * sum q) - y) / B on each response token
    s = [1 / (1 + math.exp(-0.05 * 0.8)), 1 / (1 + math.exp(-0.05 * 0.2))]
    want = T([[0.05 * (s[0] - 1) / 2] * 3, [0.05 * s[1] / 2] * 2 + [0.0]])
    torch.testing.assert_close(prm.grad, want, rtol=0, atol=1e-12)
    # two micro-batches of one row each, with the mini-batch's denominators, sum to the same loss
    parts = [loss(obj, part([i], _prm_logp()), 2, 5)[1]["loss/prm"] for i in (0, 1)]
    assert sum(parts) == pytest.approx(m["loss/prm"], abs=1e-12)


def test_loss_without_outcomes_raises():
    obj = ObjectiveConfig.preset("prime")
    x = LossInputs(
        logp=T(REF),
        old_logp=T(REF),
        adv=torch.zeros(2, 3, dtype=torch.float64),
        mask=T(MASK),
        entropy=None,
        ref_logp=T(REF),
        prm_logp=_prm_logp(),
    )
    with pytest.raises(ValueError, match="outcomes"):
        loss(obj, x, 2, 5)


@pytest.mark.parametrize(
    "overrides, match",
    [
        (dict(scale="group_std"), "allowed scale with baseline='prime'"),
        (dict(kl_coef=0.05, kl_placement="reward", kl_estimator="k1"), "kl_placement='reward' with baseline='prime'"),
        (dict(overlong_buffer=8), "overlong_buffer=8 with baseline='prime'"),
        (dict(prime_beta=0.0), "prime_beta"),
        (dict(prm_lr=-1.0), "prm_lr"),
    ],
)
def test_illegal_prime_knobs_raise_naming_them(overrides, match):
    with pytest.raises(ValueError, match=match):
        ObjectiveConfig.preset("prime", **overrides)


def test_run_config_refuses_prime_knobs_without_prime_and_singleton_groups():
    from harness.config import load_config

    with pytest.raises(ConfigError, match="prime_coef"):
        load_config(None, ["objective.preset=grpo", "objective.prime_coef=3"])
    with pytest.raises(ConfigError, match="group_size=1 is impossible with objective.baseline=prime"):
        load_config(None, ["objective.preset=prime", "train.group_size=1"])


def test_prm_auc_by_hand():
    """Scores sum_t M q per row: correct rows [3, 1], wrong rows [1, 0, 2]; pairs (correct > wrong):
    3 beats all three (3), 1 ties 1 (1/2), beats 0 (1), loses to 2 (0): 4.5 / 6 = 0.75."""
    from harness.objective.prime import prime_rm_auc

    q = T([[3.0, 0.0], [1.0, 0.0], [0.5, 0.5], [0.0, 9.0], [2.0, 0.0]])
    mask = T([[1, 1], [1, 1], [1, 1], [1, 0], [1, 1]])  # row 3's 9.0 is off the mask: its score is 0
    assert prime_rm_auc(q, mask, T([1, 1, 0, 0, 0])) == pytest.approx(0.75, abs=1e-12)
    assert prime_rm_auc(torch.zeros(4, 2), torch.ones(4, 2), T([1, 0, 1, 0])) == 0.5  # a fresh PRM: all ties
    assert prime_rm_auc(q, mask, T([1, 1, 1, 1, 1])) is None  # one outcome only: undefined


def test_worked_example_auc():
    obj = ObjectiveConfig.preset("prime")
    s = advantages(obj, T(OUT), T(MASK), 2, prm_logp=_prm_logp(), ref_logp=T(REF))
    assert s.metrics["prm/auc"] == 1.0  # the correct row scores 0.8, the wrong one 0.2
