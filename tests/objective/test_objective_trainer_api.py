"""The trainer's calls (harness/objective/api.py, docs/objective.md, "The trainer's calls"): inputs_needed, loss_mask,
advantages, loss. Equivalence with the building blocks as the RL trainer combined them before
(group_advantages / kl_in_reward / critic_advantages; policy_loss + value_loss with the entropy
detached when entropy_coef is 0 and the sampler's log-probs only with tis_cap), and hand values."""

import pytest
import torch

from harness.objective import (
    LossInputs,
    Needs,
    ObjectiveConfig,
    Scored,
    advantages,
    group_advantages,
    inputs_needed,
    loss,
    loss_mask,
    policy_loss,
    value_loss,
)
from harness.objective.advantages import critic_advantages
from harness.objective.kl import kl_in_reward, token_rewards_with_kl

B, T, G = 6, 5, 3


def _data(seed=0):
    g = torch.Generator().manual_seed(seed)
    mask = torch.ones(B, T)
    mask[1, 3:] = 0
    mask[4, 1:] = 0
    return dict(
        rewards=torch.randint(0, 2, (B,), generator=g).double() + 0.1 * torch.rand(B, generator=g),
        mask=mask,
        logp=-torch.rand(B, T, generator=g),
        ref_logp=-torch.rand(B, T, generator=g),
        values=torch.randn(B, T, generator=g) * mask,
    )


def _before(obj, rewards, mask, logp, ref_logp, values):
    """The RL trainer's advantage path as it was written in harness/train/rl/step.py (the ref_logp is
    there iff kl_coef > 0; `cur` the behaviour log-probs; the sampler's as the critic's dummy)."""
    ref_logp = ref_logp if obj.kl_coef > 0 else None
    kl_reward = obj.kl_placement == "reward" and ref_logp is not None
    if obj.baseline == "critic":
        tok = token_rewards_with_kl(obj, rewards, logp, ref_logp, mask)
        return critic_advantages(obj, tok, values, mask)
    if kl_reward:
        rewards = kl_in_reward(obj, rewards, logp, ref_logp, mask)
    return group_advantages(obj, rewards, G), None


PRESET_CASES = ["grpo", "dr_grpo", "dapo", "gspo", "cispo", "rloo", "reinforce_pp", "lite_ppo", "gpg", "ppo"]


@pytest.mark.parametrize("preset", PRESET_CASES)
@pytest.mark.parametrize("seed", [0, 1])
def test_advantages_equal_the_building_blocks_path(preset, seed):
    obj = ObjectiveConfig.preset(preset, **({"norm_constant": 40.0} if preset == "dr_grpo" else {}))
    d = _data(seed)
    needs = inputs_needed(obj)
    got = advantages(
        obj,
        d["rewards"],
        d["mask"],
        G,
        logp=d["logp"] if needs.current_logp_for_kl else None,
        ref_logp=d["ref_logp"] if needs.ref_logp else None,
        values=d["values"] if "values" in needs.components else None,
    )
    adv, returns = _before(obj, **d)
    assert torch.equal(got.adv, adv)
    assert (got.returns is None) == (returns is None) and (returns is None or torch.equal(got.returns, returns))


def test_advantages_kl_in_the_reward_by_hand():
    """RLOO-style: r_i - kl_coef sum_t M k1, then leave-one-out, no scale. Two groups of G=2,
    T=2; k1 = logp - ref_logp = 0.5 on every response token; rows 1 and 3 have one token."""
    obj = ObjectiveConfig(
        baseline="leave_one_out",
        scale="none",
        kl_coef=0.1,
        kl_estimator="k1",
        kl_placement="reward",
        agg="seq_mean_token_sum",
    )
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0], [1.0, 1.0], [1.0, 0.0]])
    logp = torch.full((4, 2), -1.0)
    ref = torch.full((4, 2), -1.5)
    out = advantages(obj, torch.tensor([1.0, 0.0, 1.0, 1.0]), mask, 2, logp=logp, ref_logp=ref)
    # penalised rewards: 1 - 0.1, 0 - 0.05, 1 - 0.1, 1 - 0.05
    assert torch.allclose(out.rewards, torch.tensor([0.9, -0.05, 0.9, 0.95]))
    # leave-one-out, G = 2: A_i = r_i - r_other
    assert torch.allclose(out.adv, torch.tensor([0.95, -0.95, -0.05, 0.05]))
    assert out.returns is None and isinstance(out, Scored)


def test_advantages_critic_by_hand():
    """Critic, scale none, gamma = lam = 1, V = 0: A_t = sum of the rewards from t on; with the KL
    in the reward (k1 = 0.5 per token, kl_coef 0.2): r_t = -0.1, +r_i on the last token."""
    obj = ObjectiveConfig(
        baseline="critic",
        scale="none",
        gamma=1.0,
        lam=1.0,
        kl_coef=0.2,
        kl_estimator="k1",
        kl_placement="reward",
        agg="token_mean",
    )
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    logp, ref = torch.full((2, 3), -1.0), torch.full((2, 3), -1.5)
    out = advantages(obj, torch.tensor([1.0, 0.0]), mask, 1, logp=logp, ref_logp=ref, values=torch.zeros(2, 3))
    assert torch.allclose(out.adv, torch.tensor([[0.7, 0.8, 0.9], [-0.1, 0.0, 0.0]]))
    assert torch.allclose(out.returns, out.adv)  # V = 0: R = A
    assert torch.allclose(out.rewards, torch.tensor([0.7, -0.1]))  # per-token rewards summed over the row


def test_advantages_refuse_missing_inputs():
    d = _data()
    with pytest.raises(ValueError, match="needs values"):
        advantages(ObjectiveConfig.preset("ppo"), d["rewards"], d["mask"], G, logp=d["logp"], ref_logp=d["ref_logp"])
    with pytest.raises(ValueError, match="needs logp"):
        advantages(ObjectiveConfig.preset("rloo"), d["rewards"], d["mask"], G, ref_logp=d["ref_logp"])
    # no KL in the reward: neither logp nor ref_logp is read
    out = advantages(ObjectiveConfig.preset("grpo"), d["rewards"], d["mask"], G)
    assert torch.equal(out.adv, group_advantages(ObjectiveConfig.preset("grpo"), d["rewards"], G))
    assert torch.equal(out.rewards, d["rewards"])


def test_loss_mask_zeroes_truncated_rows_only_with_mask_truncated():
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    truncated = torch.tensor([False, True, False])
    assert loss_mask(ObjectiveConfig(), mask, truncated) is mask
    got = loss_mask(ObjectiveConfig(mask_truncated=True), mask, truncated)
    assert torch.equal(got, torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]))
    with pytest.raises(ValueError, match="truncated"):
        loss_mask(ObjectiveConfig(mask_truncated=True), mask, truncated[:2])


@pytest.mark.parametrize(
    "preset,expect",
    [
        ("grpo", Needs(ref_logp=True, current_logp_for_kl=False, recompute_old_logp=False, adv_only_gradient=False)),
        ("dapo", Needs(ref_logp=False, current_logp_for_kl=False, recompute_old_logp=False, adv_only_gradient=True)),
        (
            "ppo",
            Needs(
                ref_logp=True,
                current_logp_for_kl=True,
                recompute_old_logp=False,
                adv_only_gradient=True,
                components=("values",),
            ),
        ),
        ("rloo", Needs(ref_logp=True, current_logp_for_kl=True, recompute_old_logp=False, adv_only_gradient=True)),
        ("gpg", Needs(ref_logp=False, current_logp_for_kl=False, recompute_old_logp=False, adv_only_gradient=True)),
    ],
)
def test_inputs_needed_by_preset(preset, expect):
    assert inputs_needed(ObjectiveConfig.preset(preset)) == expect


def test_inputs_needed_follow_the_knobs():
    n = inputs_needed(ObjectiveConfig.preset("dapo", tis_cap=2.0, entropy_coef=0.01))
    assert n.recompute_old_logp and not n.adv_only_gradient
    n = inputs_needed(ObjectiveConfig.preset("grpo", kl_coef=0.0))
    assert not n.ref_logp and n.adv_only_gradient
    assert inputs_needed(ObjectiveConfig.preset("dpo")).ref_logp


# ----------------------------------------------------------------------------------------- loss
def _loss_case(tiny_policy, seed=3):
    g = torch.Generator().manual_seed(seed)
    logp = tiny_policy.logp()
    Bp, Tp = logp.shape
    mask = torch.ones(Bp, Tp)
    mask[0, 3:] = 0
    return dict(
        logp=logp,
        old=(logp + tiny_policy.noise).detach(),
        mask=mask,
        adv=torch.randn(Bp, generator=g),
        ref=(logp - 0.2 * torch.rand(Bp, Tp, generator=g)).detach(),
        roll=(logp + 0.5 * torch.randn(Bp, Tp, generator=g)).detach(),
        ent=(logp.exp() * 2.0 + 0.1),
    )  # an entropy that depends on W (it carries a gradient)


def _before_loss(obj, c, values=None, old_values=None, returns=None):
    """policy_loss + value_loss as harness/train/rl/update.py combined them."""
    total, metrics = policy_loss(
        obj,
        c["logp"],
        c["old"],
        c["adv"],
        c["mask"],
        ref_logp=c["ref"],
        entropy=c["ent"] if obj.entropy_coef else c["ent"].detach(),
        rollout_logp=c["roll"] if obj.tis_cap else None,
        num_seqs=7,
        num_tokens=20,
    )
    if values is not None:
        vloss, vm = value_loss(obj, values, old_values, returns, c["mask"], num_seqs=7, num_tokens=20)
        total, metrics = total + vloss, {**metrics, **vm}
    return total, metrics


@pytest.mark.parametrize(
    "knobs",
    [
        dict(preset="grpo"),
        dict(preset="grpo", entropy_coef=0.05),
        dict(preset="dapo", tis_cap=1.5),
        dict(preset="cispo"),
        dict(preset="gspo"),
        dict(preset="dapo", tis_cap=1.5, entropy_coef=-0.02),
    ],
)
def test_loss_equals_policy_loss_as_the_trainer_called_it(tiny_policy, knobs):
    knobs = dict(knobs)
    obj = ObjectiveConfig.preset(knobs.pop("preset"), **knobs)
    c = _loss_case(tiny_policy)
    x = LossInputs(
        logp=c["logp"],
        old_logp=c["old"],
        adv=c["adv"],
        mask=c["mask"],
        entropy=c["ent"],
        ref_logp=c["ref"],
        rollout_logp=c["roll"],
    )
    got, got_m = loss(obj, x, num_seqs=7, num_tokens=20)
    exp, exp_m = _before_loss(obj, c)
    assert torch.equal(got, exp) and got_m == exp_m
    assert torch.equal(tiny_policy.grad(got), tiny_policy.grad(_before_loss(obj, _loss_case(tiny_policy))[0]))


def test_loss_detaches_the_entropy_when_entropy_coef_is_zero(tiny_policy):
    c = _loss_case(tiny_policy)
    ent = c["ent"].detach().requires_grad_()
    x = LossInputs(logp=c["logp"], old_logp=c["old"], adv=c["adv"], mask=c["mask"], entropy=ent)
    total, metrics = loss(ObjectiveConfig.preset("dapo"), x)  # entropy_coef 0: only a metric
    assert torch.autograd.grad(total, ent, allow_unused=True)[0] is None
    assert metrics["entropy"] == pytest.approx(float((ent * c["mask"]).sum() / c["mask"].sum()))
    # entropy_coef 0.1, token_mean: d loss / d H_it = -0.1 * M_it / sum M  (by hand)
    total, _ = loss(ObjectiveConfig.preset("dapo", entropy_coef=0.1), x)
    (g,) = torch.autograd.grad(total, ent)
    assert torch.allclose(g, -0.1 * c["mask"] / c["mask"].sum())


def test_loss_uses_the_sampler_logp_only_with_tis_cap(tiny_policy):
    c = _loss_case(tiny_policy)
    base = dict(logp=c["logp"], old_logp=c["old"], adv=c["adv"], mask=c["mask"], entropy=None)
    dapo = ObjectiveConfig.preset("dapo")
    with_roll, _ = loss(dapo, LossInputs(**base, rollout_logp=c["roll"]))
    without, _ = loss(dapo, LossInputs(**base))
    assert torch.equal(with_roll, without)  # tis_cap null: the sampler's log-probs are not read
    tis = ObjectiveConfig.preset("dapo", tis_cap=1.5)
    capped, _ = loss(tis, LossInputs(**base, rollout_logp=c["roll"]))
    assert not torch.equal(capped, without)
    # by hand: token_mean of the surrogate times w = min(exp(old - rollout), 1.5)
    rho = torch.exp(c["logp"] - c["old"])
    A = c["adv"].unsqueeze(-1).expand_as(rho)
    surr = -torch.minimum(rho * A, rho.clamp(0.8, 1.28) * A)
    w = torch.exp(c["old"] - c["roll"]).clamp(max=1.5)
    assert float(capped) == pytest.approx(float((surr * w * c["mask"]).sum() / c["mask"].sum()), rel=1e-12)


def test_loss_adds_the_value_loss_when_values_are_given(tiny_policy):
    obj = ObjectiveConfig.preset("ppo")
    c = _loss_case(tiny_policy)
    g = torch.Generator().manual_seed(5)
    values = torch.randn(*c["mask"].shape, generator=g).requires_grad_()
    old_values, returns = values.detach() + 0.3, torch.randn(*c["mask"].shape, generator=g)
    x = LossInputs(
        logp=c["logp"],
        old_logp=c["old"],
        adv=c["adv"],
        mask=c["mask"],
        entropy=c["ent"],
        ref_logp=c["ref"],
        values=values,
        old_values=old_values,
        returns=returns,
    )
    got, got_m = loss(obj, x, num_seqs=7, num_tokens=20)
    exp, exp_m = _before_loss(obj, c, values, old_values, returns)
    assert torch.equal(got, exp) and got_m == exp_m
    assert {"loss/value", "value/clip_frac", "value/explained_variance"} <= set(got_m)
    with pytest.raises(ValueError, match="old_values and returns"):
        loss(
            obj,
            LossInputs(
                logp=c["logp"],
                old_logp=c["old"],
                adv=c["adv"],
                mask=c["mask"],
                entropy=None,
                ref_logp=c["ref"],
                values=values,
            ),
        )
