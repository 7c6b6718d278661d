"""The math of the zoo members that need trainer support (docs/objective.md, "The trainer's calls"; all three are
wired into the trainer: test_objective_{lambda,simko,prime}_wired.py):
λ-GRPO's length weights, SimKO's top-K spreading, PRIME's implicit process rewards.
Worked examples are the reference implementations' numbers."""

from __future__ import annotations

import math

import pytest
import torch

from harness.objective.aggregation import aggregate
from harness.objective.lambda_grpo import group_length_rows, lambda_length_weights, lambda_row_weights
from harness.objective.prime import prime_advantages, prime_process_rewards, prime_rm_accuracy, prime_rm_loss
from harness.objective.simko import entropy_gate, simko_token_loss


def T(x):
    return torch.tensor(x, dtype=torch.float64)


# --------------------------------------------------------------------------- λ-GRPO
def lambda_length_aggregate(loss_tok, mask, G, lam, lambda_r):
    """The trainer's λ-GRPO loss (policy_loss with row_weights, agg lambda_length = token_mean's
    normaliser): sum_i f_i sum_t M l_it / sum M, f from each row's group lengths."""
    f = lambda_row_weights(*group_length_rows(mask.sum(-1), G), lam, lambda_r)
    return aggregate("token_mean", loss_tok * f.to(loss_tok.dtype).unsqueeze(-1), mask)


def test_lambda_zero_is_token_mean_exactly():
    g = torch.Generator().manual_seed(3)
    loss_tok = torch.randn(6, 5, generator=g, dtype=torch.float64)
    mask = T([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 0, 0]])
    for G in (2, 3, 6):
        got = lambda_length_aggregate(loss_tok, mask, G, 0.0, lambda_r=0.5)
        assert torch.equal(got, aggregate("token_mean", loss_tok, mask)), G
        assert torch.equal(lambda_length_weights(mask.sum(-1), G, 0.0, 0.5), torch.ones(6))


def test_lambda_one_weights_and_gradient_in_lambda():
    # G = 2, lengths [1, 3]: mu 2, sigma 1, z = [-1, 1]; r = 0.5: h = [0.5, 1.5]
    mask = T([[1, 0, 0], [1, 1, 1]])
    loss_tok = torch.ones(2, 3)
    # λ = 1: f = 2 softmax([0.5, 1.5]) = 2 [1/(1+e), e/(1+e)]; loss = (f_1 * 1 + f_2 * 3) / 4
    f1, f2 = 2 / (1 + math.e), 2 * math.e / (1 + math.e)
    torch.testing.assert_close(lambda_length_weights(T([1, 3]), 2, 1.0, 0.5), T([f1, f2]), rtol=0, atol=1e-12)
    assert lambda_length_aggregate(loss_tok, mask, 2, 1.0, 0.5).item() == pytest.approx((f1 + 3 * f2) / 4, abs=1e-12)
    # d loss / d λ at λ = 0: df_i = 2 * 1/2 (ln h_i - mean ln h) = ±(ln 3)/2 -> (−1 + 3)(ln 3)/2 / 4 = ln(3)/4
    lam = torch.tensor(0.0, dtype=torch.float64, requires_grad=True)
    lambda_length_aggregate(loss_tok, mask, 2, lam, 0.5).backward()
    assert lam.grad.item() == pytest.approx(math.log(3) / 4, abs=1e-12)


def test_lambda_equal_lengths_are_uniform_at_any_lambda():
    assert torch.equal(lambda_length_weights(T([4, 4, 4]), 3, -2.0, 0.5), torch.ones(3))


# --------------------------------------------------------------------------- SimKO
ENT = [[0.1, 0.5, 2.0, 0.3, 1.2]]


def test_simko_entropy_gate_worked_example():
    # quantile_0.8 of [0.1, 0.3, 0.5, 1.2, 2.0] = 1.2 + 0.2 * 0.8 = 1.36: only the third token
    assert entropy_gate(T(ENT), torch.ones(1, 5), 0.8).tolist() == [[False, False, True, False, False]]
    # per row, over its own response tokens: with the 2.0 token masked, quantile_0.8 of [0.1, 0.3, 0.5, 1.2]
    # = 0.5 + 0.4 * (1.2 - 0.5) = 0.78, so only the 1.2 token; a row with no response token gates nothing
    rows, mask = T(ENT + ENT), T([[1, 1, 0, 1, 1], [0, 0, 0, 0, 0]])
    assert entropy_gate(rows, mask, 0.8).tolist() == [[False, False, False, False, True], [False] * 5]


def _simko_grads(adv, is_argmax):
    lp = torch.log(T([[0.5, 0.6, 0.3, 0.7, 0.4]])).requires_grad_()
    topk = torch.log(T([[[0.5, 0.2, 0.1]] * 5])).requires_grad_()
    loss = simko_token_loss(
        lp, lp.detach(), topk, topk.detach(), torch.tensor([is_argmax]), T(ENT), T([adv]), torch.ones(1, 5)
    )
    g_lp, g_topk = torch.autograd.grad(loss.sum(), (lp, topk))
    return loss, g_lp, g_topk


def test_simko_correct_response_spreads_mix_over_the_top_k():
    loss, g_lp, g_topk = _simko_grads(0.75, [False] * 5)
    # on-policy (rho = 1): the value is -A rho everywhere; at the gated token the sampled token's
    # coefficient is -(1 - 0.01) 0.75 = -0.7425 and each top-3 candidate's -0.01 * 0.75 / 3 = -0.0025
    torch.testing.assert_close(loss, torch.full((1, 5), -0.75), rtol=0, atol=1e-12)
    torch.testing.assert_close(g_lp, T([[-0.75, -0.75, -0.7425, -0.75, -0.75]]), rtol=0, atol=1e-12)
    torch.testing.assert_close(g_topk[0, 2], T([-0.0025] * 3), rtol=0, atol=1e-12)
    assert (g_topk[0, [0, 1, 3, 4]] == 0).all()


def test_simko_wrong_argmax_token_is_pushed_harder():
    _, g_lp, g_topk = _simko_grads(-0.25, [True] * 5)
    # A < 0 at the gated argmax token: A -> 1.1 * -0.25 = -0.275 (d l / d logp = -A = 0.275); elsewhere 0.25
    torch.testing.assert_close(g_lp, T([[0.25, 0.25, 0.275, 0.25, 0.25]]), rtol=0, atol=1e-12)
    assert (g_topk == 0).all()
    _, g_lp, _ = _simko_grads(-0.25, [False] * 5)  # not the argmax: unchanged
    torch.testing.assert_close(g_lp, torch.full((1, 5), 0.25), rtol=0, atol=1e-12)


def test_simko_without_top_k_log_probs_raises():
    with pytest.raises(ValueError, match="top-K log-probs"):
        simko_token_loss(
            torch.zeros(1, 2),
            torch.zeros(1, 2),
            torch.zeros(1, 2, 2),
            torch.zeros(1, 2, 2),
            torch.zeros(1, 2, dtype=torch.bool),
            torch.zeros(1, 2),
            T([1.0]),
            torch.ones(1, 2),
        )


# --------------------------------------------------------------------------- PRIME
Q = [[0.2, -0.4, 1.0], [-0.6, 0.8, 0.0]]
QMASK = [[1, 1, 1], [1, 1, 0]]
OUT = [1.0, 0.0]


def test_prime_reward_model_bce_worked_example():
    # sigmoid(0.05 * 0.8) = 0.510, sigmoid(0.05 * 0.2) = 0.5025: mean(-log 0.510, -log 0.4975)
    assert prime_rm_loss(T(Q), T(QMASK), T(OUT), 0.05).item() == pytest.approx(0.685753, abs=1e-6)


@pytest.mark.parametrize(
    "keep, expected",
    [
        (False, [[1.046684, 0.244239, 0.697795], [-1.430470, -0.558247, 0.0]]),  # verl's recipe: last dropped
        (True, [[0.397414, 0.375336, 1.148064], [-1.479238, -0.441575, 0.0]]),  # the PRIME repo: kept
    ],
)
def test_prime_advantages_worked_example(keep, expected):
    r = prime_process_rewards(T(Q), T(QMASK), 0.05, prime_keep_last_token=keep)
    adv, returns = prime_advantages(r, T(OUT), T(QMASK), 2, prime_coef=5.0, outcome_coef=5.0)
    torch.testing.assert_close(adv, T(expected), rtol=0, atol=1e-6)
    assert returns[1, 2] == 0 and adv[1, 2] == 0


def test_prime_process_rewards_drop_or_keep_the_last_token():
    dropped = prime_process_rewards(T(Q), T(QMASK), 0.05)
    torch.testing.assert_close(dropped, T([[0.01, -0.02, 0.0], [-0.03, 0.0, 0.0]]), rtol=0, atol=1e-15)
    kept = prime_process_rewards(T(Q), T(QMASK), 0.05, prime_keep_last_token=True)
    torch.testing.assert_close(kept, T([[0.01, -0.02, 0.05], [-0.03, 0.04, 0.0]]), rtol=0, atol=1e-15)


def test_prime_accuracy_and_binary_outcomes():
    # sequence scores 0.8 (> 0, correct) and 0.2 (> 0, wrong): one of two predicted
    assert prime_rm_accuracy(T(Q), T(QMASK), T(OUT)) == 0.5
    with pytest.raises(ValueError, match="0 and 1"):
        prime_rm_loss(T(Q), T(QMASK), T([1.0, 0.3]))
