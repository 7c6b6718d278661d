"""Router logits of the tiny MoE: shapes, top-k, recording and routing replay."""

import torch

from harness.models import build_model, record_routing, replay_routing, routers, routing_choices, stack_router_logits


def _moe_and_batch():
    model, _ = build_model("tiny-moe", seed=0)
    x = torch.randint(4, 100, (3, 7), generator=torch.Generator().manual_seed(0))  # (B, T)
    return model, x


def test_router_logits_shape_and_topk():
    model, x = _moe_and_batch()
    cfg = model.config
    L, E, k = cfg.num_hidden_layers, cfg.num_local_experts, cfg.num_experts_per_tok
    assert len(routers(model)) == L and routers(model)[0] is model.model.layers[0].mlp.gate
    with torch.no_grad(), record_routing(model) as calls:
        out = model(x, output_router_logits=True)
    assert len(out.router_logits) == L and out.router_logits[0].shape == (3 * 7, E)  # (B*T, E)
    logits = stack_router_logits(out.router_logits, batch_size=3)  # (L, B, T, E)
    assert logits.shape == (L, 3, 7, E)
    choices = routing_choices(logits, k)  # (L, B, T, k)
    assert choices.shape == (L, 3, 7, k)
    recorded = torch.stack([c[0] for c in calls]).view(L, 3, 7, k)  # what the routers really picked
    assert torch.equal(recorded, choices)
    assert (choices[..., 0] != choices[..., 1]).all()  # k distinct experts per token
    assert out.aux_loss is not None and torch.isfinite(out.aux_loss)


def test_replay_routing_reproduces_and_forces_choices():
    model, x = _moe_and_batch()
    with torch.no_grad():
        out = model(x, output_router_logits=True)
        choices = routing_choices(stack_router_logits(out.router_logits, 3), 2)  # (L, B, T, k)
        with replay_routing(model, choices):
            same = model(x).logits
        with replay_routing(model, (choices + 1) % model.config.num_local_experts):
            forced = model(x).logits
        after = model(x).logits  # hooks removed on exit
    torch.testing.assert_close(same, out.logits, rtol=0, atol=1e-6)
    assert (forced - out.logits).abs().max() > 1e-3
    torch.testing.assert_close(after, out.logits, rtol=0, atol=0)


def test_replay_keeps_router_gradient():
    model, x = _moe_and_batch()
    model.train()
    with torch.no_grad():
        out = model(x, output_router_logits=True)
    choices = routing_choices(stack_router_logits(out.router_logits, 3), 2)
    with replay_routing(model, choices):
        model(x, labels=x).loss.backward()
    assert all(r.weight.grad is not None and r.weight.grad.abs().sum() > 0 for r in routers(model))


def test_record_routing_during_generation():
    model, x = _moe_and_batch()
    with torch.no_grad(), record_routing(model) as calls:
        model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=3, min_new_tokens=3, do_sample=False)
    # prompt forward (B*T rows), then one (B, k) per new token after the first
    assert [c.shape for c in calls[0]] == [(21, 2), (3, 2), (3, 2)]
