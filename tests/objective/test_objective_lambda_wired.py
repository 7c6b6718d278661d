"""λ-GRPO through the trainer's calls (harness/objective/api.py, docs/objective.md, "The trainer's calls", "λ-GRPO"):
`agg: lambda_length` weighs each row by f_i of its group, from rows taken anywhere in the batch,
λ = 0 is token_mean exactly, and λ gets a gradient of its own."""

from __future__ import annotations

import pytest
import torch

from harness.config import ConfigError, load_config
from harness.objective import LossInputs, ObjectiveConfig, inputs_needed, loss
from harness.objective.lambda_grpo import group_length_rows, lambda_length_weights, lambda_row_weights

MASK = torch.tensor(
    [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 0, 0]],
    dtype=torch.float64,
)
G = 3


def _inputs(rows, lam, seed=0):
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(6, 5, generator=g, dtype=torch.float64)
    old = logp + 0.05 * torch.randn(6, 5, generator=g, dtype=torch.float64)
    adv = torch.randn(6, generator=g, dtype=torch.float64)
    lengths, pos = group_length_rows(MASK.sum(-1), G)
    return LossInputs(
        logp=logp[rows].requires_grad_(True),
        old_logp=old[rows],
        adv=adv[rows],
        mask=MASK[rows],
        entropy=None,
        lam=lam,
        group_lengths=lengths[rows],
        group_pos=pos[rows],
    )


def test_row_weights_of_any_rows_are_the_groups_weights():
    lengths, pos = group_length_rows(MASK.sum(-1), G)
    assert lengths.tolist()[4] == [2.0, 4.0, 3.0] and pos.tolist() == [0, 1, 2, 0, 1, 2]
    full = lambda_length_weights(MASK.sum(-1), G, 0.7, 0.5)
    perm = [4, 0, 5, 2]
    got = lambda_row_weights(lengths[perm], pos[perm], 0.7, 0.5)
    torch.testing.assert_close(got, full[perm].to(got.dtype), rtol=0, atol=1e-6)


def test_lambda_zero_is_token_mean_exactly_through_loss():
    lam = ObjectiveConfig.preset("lambda_grpo")
    tm = ObjectiveConfig.preset("lambda_grpo", agg="token_mean")
    rows = list(range(6))
    a, ma = loss(lam, _inputs(rows, torch.tensor(0.0, requires_grad=True)), 6, float(MASK.sum()))
    b, mb = loss(tm, _inputs(rows, None), 6, float(MASK.sum()))
    assert torch.equal(a, b) and ma["loss/policy"] == mb["loss/policy"] and ma["agg/lambda"] == 0.0


def test_lambda_gets_a_gradient_and_micro_batches_sum_to_the_mini_batch():
    obj = ObjectiveConfig.preset("lambda_grpo")
    n = float(MASK.sum())
    lam = torch.tensor(0.3, requires_grad=True)
    whole, _ = loss(obj, _inputs(list(range(6)), lam), 6, n)
    (g_whole,) = torch.autograd.grad(whole, lam)
    assert g_whole != 0
    perm = [5, 1, 3, 0, 4, 2]  # a random mini-batch order splits the groups
    parts = [loss(obj, _inputs(perm[i : i + 2], lam), 6, n)[0] for i in (0, 2, 4)]
    torch.testing.assert_close(sum(parts), whole, rtol=0, atol=1e-12)
    (g_parts,) = torch.autograd.grad(sum(parts), lam)
    torch.testing.assert_close(g_parts, g_whole, rtol=0, atol=1e-10)
    # hand value at λ = 0.3: the weighted token sum / 22 tokens
    x = _inputs(list(range(6)), lam)
    f = lambda_length_weights(MASK.sum(-1), G, 0.3, 0.5).to(torch.float64)
    ell = -x.adv.unsqueeze(-1) * torch.exp(x.logp.detach() - x.old_logp)  # unclipped where the clip is idle
    rho = torch.exp(x.logp.detach() - x.old_logp)
    clipped = -x.adv.unsqueeze(-1) * rho.clamp(0.8, 1.2)
    ell = torch.maximum(ell, clipped)
    want = (f.unsqueeze(-1) * ell * MASK).sum() / n
    assert float(whole.detach()) == pytest.approx(float(want), abs=1e-12)


def test_missing_lambda_raises_and_needs_say_so():
    obj = ObjectiveConfig.preset("lambda_grpo")
    assert "lam" in inputs_needed(obj).components and not inputs_needed(ObjectiveConfig.preset("grpo")).components
    with pytest.raises(ValueError, match="lambda_length"):
        loss(obj, _inputs([0, 1], None), 2, 8)


def test_run_config_refuses_lambda_knobs_without_lambda_length():
    with pytest.raises(ConfigError, match="lambda_lr"):
        load_config(None, ["objective.preset=grpo", "objective.lambda_lr=0.1"])
    with pytest.raises(ConfigError, match="lambda_lr"):
        load_config(None, ["objective.preset=lambda_grpo", "objective.lambda_lr=0"])
