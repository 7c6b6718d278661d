"""Router-logit noise at rollout (rollout.router_noise) and replay of partial routing."""

import torch

from harness.models import build_model, record_routing, replay_routing, routing_choices, stack_router_logits
from harness.models.moe import noisy_routing
from harness.train.core.routing import capture_routing


def _moe_and_batch():
    model, _ = build_model("tiny-moe", seed=0)
    x = torch.randint(4, 100, (3, 7), generator=torch.Generator().manual_seed(0))  # (B, T)
    return model, x


def test_noisy_routing_is_seeded_recorded_and_removed():
    model, x = _moe_and_batch()
    with torch.no_grad():
        clean = model(x).logits
        runs = []
        for seed in (1, 1, 2):
            with record_routing(model) as calls, noisy_routing(model, 1.0, seed):  # recorder registered first
                runs.append((model(x).logits, torch.stack([c[0] for c in calls])))  # (L, B*T, k)
        after = model(x).logits
    with torch.no_grad(), record_routing(model) as clean_calls:
        model(x)
    clean_choices = torch.stack([c[0] for c in clean_calls])
    assert torch.equal(runs[0][1], runs[1][1]) and torch.equal(runs[0][0], runs[1][0])  # same seed, same noise
    assert not torch.equal(runs[0][1], runs[2][1])
    assert not torch.equal(runs[0][1], clean_choices)  # the recorder sees the noisy choices
    assert (runs[0][0] - clean).abs().max() > 1e-4
    torch.testing.assert_close(after, clean, rtol=0, atol=0)  # hooks removed on exit
    with torch.no_grad(), noisy_routing(model, 0.0, 1):  # sigma = 0: untouched
        torch.testing.assert_close(model(x).logits, clean, rtol=0, atol=0)


def test_noisy_weights_are_renormalised_over_the_k_choices():
    model, x = _moe_and_batch()
    gate = model.model.layers[0].mlp.gate
    seen = []
    h = gate.register_forward_hook(lambda m, a, out: seen.append(out))
    with torch.no_grad(), noisy_routing(model, 2.0, 0):
        model(x)
    h.remove()
    logits, weights, index = seen[0]
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[0]))
    assert torch.equal(index, logits.float().topk(2, dim=-1).indices)  # top-k of the (returned) noisy logits


def test_replay_with_unknown_positions_keeps_the_router_choice():
    model, x = _moe_and_batch()
    with torch.no_grad():
        out = model(x, output_router_logits=True)
        choices = routing_choices(stack_router_logits(out.router_logits, 3), 2)  # (L, B, T, k)
        forced = (choices + 1) % model.config.num_local_experts
        forced[:, :, 4:] = -1  # positions 4.. unknown: the router decides
        with replay_routing(model, forced), capture_routing(model) as calls:
            got = model(x).logits
        own, used = (torch.stack([c[0][i] for c in calls]).view(choices.shape) for i in (0, 1))
        with replay_routing(model, torch.full_like(choices, -1)):
            same = model(x).logits
    assert torch.equal(used[:, :, :4], forced[:, :, :4])
    # unknown positions: the router's own top-k in this forward (in layer 0 the clean run's choice; deeper
    # layers see hidden states changed by the forced positions before them)
    assert torch.equal(used[:, :, 4:], own[:, :, 4:]) and torch.equal(used[0, :, 4:], choices[0, :, 4:])
    assert (got - out.logits).abs().max() > 1e-3
    torch.testing.assert_close(same, out.logits, rtol=0, atol=0)
