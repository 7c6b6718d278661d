"""Aggregation (docs/objective.md, "Aggregation") by hand, the length-bias weights via autograd, and micro-batch
equivalence."""

from __future__ import annotations

import pytest
import torch

from harness.objective import ObjectiveConfig, aggregate, policy_loss
from harness.objective.aggregation import batch_denominators


def T(x, **kw):
    """float64 tensor (hand values are compared at 1e-12)."""
    return torch.tensor(x, dtype=torch.float64, **kw)


NAN = float("nan")
# two sequences of 3 and 1 tokens; padding holds NaN, which must not leak; a third, empty row
LOSS = T([[1.0, 2.0, 3.0, NAN], [4.0, NAN, NAN, NAN], [NAN, NAN, NAN, NAN]])
MASK = T([[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]])


@pytest.mark.parametrize(
    "agg, expected",
    [
        ("token_mean", 2.5),  # (1+2+3+4) / 4 tokens
        ("seq_mean_token_mean", 3.0),  # ((1+2+3)/3 + 4/1) / 2 sequences = (2 + 4)/2
        ("seq_mean_token_sum", 5.0),  # (6 + 4) / 2
        ("seq_mean_token_sum_norm", 0.5),  # (6 + 4) / (2 * C), C = 10
    ],
)
def test_aggregation_by_hand(agg, expected):
    got = aggregate(agg, LOSS, MASK, norm_constant=10.0)
    assert got.item() == pytest.approx(expected, abs=1e-12)
    # the empty row counts neither as a sequence nor a token
    assert batch_denominators(MASK) == (2, 4)


def test_explicit_denominators():
    # the mini-batch had 8 sequences and 20 tokens: this micro-batch's share
    assert aggregate("token_mean", LOSS, MASK, num_tokens=20).item() == pytest.approx(10 / 20)
    assert aggregate("seq_mean_token_mean", LOSS, MASK, num_seqs=8).item() == pytest.approx(6 / 8)
    assert aggregate("seq_mean_token_sum", LOSS, MASK, num_seqs=8).item() == pytest.approx(10 / 8)
    assert aggregate("seq_mean_token_sum_norm", LOSS, MASK, 10.0, num_seqs=8).item() == pytest.approx(10 / 80)


def test_errors():
    with pytest.raises(ValueError, match="norm_constant"):
        aggregate("seq_mean_token_sum_norm", LOSS, MASK)
    with pytest.raises(ValueError, match="allowed"):
        aggregate("mean", LOSS, MASK)
    assert aggregate("token_mean", torch.zeros(1, 2), torch.zeros(1, 2)).item() == 0.0


def _length_weights(cfg):
    """d loss / d logp for a 4-token and a 12-token answer with the same advantage +1 (B = 2), on-policy."""
    lengths = [4, 12]
    mask = T([[1.0] * n + [0.0] * (12 - n) for n in lengths])
    logp = torch.full((2, 12), -1.0, dtype=torch.float64, requires_grad=True)
    ref = logp.detach().clone()  # d k3/d logp = 0 at pi = pi_ref: the KL term adds no gradient here
    loss, _ = policy_loss(cfg, logp, logp.detach(), T([1.0, 1.0]), mask, ref_logp=ref)
    (g,) = torch.autograd.grad(loss, logp)
    return g


def test_length_bias_grpo_seq_mean_token_mean():
    # GRPO: (1/B) (1/|o_i|) per token -> -1/(2*4) = -0.125 on the short answer, -1/(2*12) = -0.041667 on the long
    # (per response, before the batch mean: 1/4 and 1/12)
    g = _length_weights(ObjectiveConfig.preset("grpo"))
    torch.testing.assert_close(g[0, :4], torch.full((4,), -1 / 8), rtol=0, atol=1e-12)
    torch.testing.assert_close(g[1], torch.full((12,), -1 / 24), rtol=0, atol=1e-12)
    assert (g[0, 4:] == 0).all()


def test_token_mean_weighs_every_token_equally():
    # DAPO: 1 / (4 + 12) = 1/16 on every token of both answers
    g = _length_weights(ObjectiveConfig.preset("dapo"))
    torch.testing.assert_close(g[0, :4], torch.full((4,), -1 / 16), rtol=0, atol=1e-12)
    torch.testing.assert_close(g[1], torch.full((12,), -1 / 16), rtol=0, atol=1e-12)


def test_dr_grpo_constant_normaliser():
    # Dr.GRPO: 1 / (B * C) = 1 / (2 * 12) on every token, whatever the length
    g = _length_weights(ObjectiveConfig.preset("dr_grpo", norm_constant=12))
    torch.testing.assert_close(g[0, :4], torch.full((4,), -1 / 24), rtol=0, atol=1e-12)
    torch.testing.assert_close(g[1], torch.full((12,), -1 / 24), rtol=0, atol=1e-12)


# --------------------------------------------------------------------------- micro-batching
LENGTHS = [5, 2, 0, 4, 1, 3]  # one empty row (e.g. a truncated response under mask_truncated)


@pytest.mark.parametrize("agg", ["seq_mean_token_mean", "token_mean", "seq_mean_token_sum_norm", "seq_mean_token_sum"])
@pytest.mark.parametrize("ratio", ["token", "sequence", "sequence_token", "none"])
@pytest.mark.parametrize("clip", ["ppo", "cispo", "none"])
def test_micro_batches_give_the_mini_batch_gradient(make_policy, agg, ratio, clip):
    pol = make_policy(B=6, T=5, seed=7)
    mask = T([[1.0] * n + [0.0] * (5 - n) for n in LENGTHS])
    adv = T([1.0, -0.5, 0.7, -1.2, 0.3, 2.0])
    cfg = ObjectiveConfig(agg=agg, ratio=ratio, clip=clip, norm_constant=5.0, kl_coef=0.04, entropy_coef=0.01)
    with torch.no_grad():
        old = pol.logp() + pol.noise  # off-policy: some tokens clip
        ref = pol.logp() - pol.noise
        ent = pol.noise.abs()

    whole, _ = policy_loss(cfg, pol.logp(), old, adv, mask, ref, entropy=ent)
    g_whole = pol.grad(whole)

    n_seqs, n_toks = batch_denominators(mask)
    total, g_acc = 0.0, torch.zeros_like(g_whole)
    for rows in (slice(0, 2), slice(2, 4), slice(4, 6)):
        part, _ = policy_loss(
            cfg,
            pol.logp(rows),
            old[rows],
            adv[rows],
            mask[rows],
            ref[rows],
            entropy=ent[rows],
            num_seqs=n_seqs,
            num_tokens=n_toks,
        )
        total += part.item()
        g_acc += pol.grad(part)
    assert total == pytest.approx(whole.item(), abs=1e-12)
    torch.testing.assert_close(g_acc, g_whole, rtol=1e-10, atol=1e-12)
    assert g_whole.abs().sum() > 0


def test_micro_batches_without_mini_batch_denominators_differ(make_policy):
    """The test above can fail: with each micro-batch's own counts the gradient changes."""
    pol = make_policy(B=6, T=5, seed=7)
    mask = T([[1.0] * n + [0.0] * (5 - n) for n in LENGTHS])
    adv = T([1.0, -0.5, 0.7, -1.2, 0.3, 2.0])
    cfg = ObjectiveConfig(agg="token_mean", kl_coef=0.0)
    old = pol.logp().detach()
    g_whole = pol.grad(policy_loss(cfg, pol.logp(), old, adv, mask)[0])
    g_acc = sum(
        pol.grad(policy_loss(cfg, pol.logp(r), old[r], adv[r], mask[r])[0])
        for r in (slice(0, 2), slice(2, 4), slice(4, 6))
    )
    assert not torch.allclose(g_acc, g_whole)
