"""The MoE router's load-balancing loss, objective.router_aux_loss_coef (harness/objective/router_aux.py): the term
by hand, through `loss`, the training forward's aux loss = transformers' load_balancing_loss_func on the forward's
own router logits and attention mask, and the refusals."""

from __future__ import annotations

import pytest
import torch
from transformers.models.mixtral.modeling_mixtral import load_balancing_loss_func

from harness.config import ConfigError, load_config
from harness.models import build_model
from harness.models.logprobs import pack, response_forward
from harness.objective import LossInputs, ObjectiveConfig, inputs_needed, loss
from harness.objective.router_aux import AUX_KEY, router_aux_term

SMOKE = "experiments/runs/smoke.yaml"


def test_the_term_by_hand():
    """c * (b / B_mb) * aux: 0.02 * (2 / 8) * 1.5 = 0.0075; a whole mini-batch weighs 1."""
    assert router_aux_term(0.02, torch.tensor(1.5), rows=2, num_seqs=8).item() == pytest.approx(0.0075)
    assert router_aux_term(0.02, torch.tensor(1.5), rows=2, num_seqs=None).item() == pytest.approx(0.03)


def test_through_loss_it_is_added_and_carries_its_gradient():
    logp = torch.log(torch.tensor([[0.5, 0.25], [0.5, 0.9]]))
    mask, adv = torch.ones(2, 2), torch.tensor([1.0, -1.0])
    aux = torch.tensor(2.0, requires_grad=True)
    on = ObjectiveConfig(kl_coef=0.0, router_aux_loss_coef=0.1)
    with_aux, metrics = loss(on, LossInputs(logp, logp, adv, mask, extras={AUX_KEY: aux}), num_seqs=4)
    without, _ = loss(ObjectiveConfig(kl_coef=0.0), LossInputs(logp, logp, adv, mask))
    assert (with_aux - without).item() == pytest.approx(0.1 * 0.5 * 2.0)
    assert metrics["loss/router_aux"] == pytest.approx(0.1)
    (g,) = torch.autograd.grad(with_aux, aux)
    assert g.item() == pytest.approx(0.05)
    with pytest.raises(ValueError, match="router_aux_loss"):
        loss(on, LossInputs(logp, logp, adv, mask))


def test_the_forward_returns_transformers_aux_loss():
    """The training forward's aux loss is load_balancing_loss_func of its own rows' router logits, padding masked."""
    model, _ = build_model("tiny-moe", seed=0)
    prompts = [[5, 6, 7], [8, 9]]
    response = torch.tensor([[10, 11, 12], [13, 14, 0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    _, _, extras = response_forward(model, prompts, response, mask, pad_id=0, router_aux=True)
    aux = extras[AUX_KEY]
    assert aux.requires_grad and torch.isfinite(aux)
    ids, att, _ = pack(prompts, response, mask, 0, [3, 2], model.device, 1)
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=att, output_router_logits=True)
    cfg = model.config
    ref = load_balancing_loss_func(out.router_logits, cfg.num_local_experts, cfg.num_experts_per_tok, att)
    assert aux.item() == pytest.approx(ref.item(), abs=1e-6)
    _, _, plain = response_forward(model, prompts, response, mask, pad_id=0)
    assert AUX_KEY not in plain  # off: the forward is the plain one


def test_inputs_needed():
    assert inputs_needed(ObjectiveConfig(router_aux_loss_coef=0.02)).router_aux_loss
    assert not inputs_needed(ObjectiveConfig()).router_aux_loss


@pytest.mark.parametrize(
    "overrides, named",
    [
        (["objective.router_aux_loss_coef=0.02"], "objective.router_aux_loss_coef"),  # the smoke model is dense
        (["model.name=tiny-moe", "objective.router_aux_loss_coef=-1"], "objective.router_aux_loss_coef"),
    ],
)
def test_bad_values_are_refused_naming_the_key(overrides, named):
    with pytest.raises(ConfigError, match=named):
        load_config(SMOKE, overrides)


def test_loads_on_an_moe():
    assert (
        load_config(
            SMOKE, ["model.name=tiny-moe", "objective.router_aux_loss_coef=0.02"]
        ).objective.router_aux_loss_coef
        == 0.02
    )
