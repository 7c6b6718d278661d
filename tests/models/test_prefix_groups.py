"""train.share_prefix: a run of identical prompts goes through the model once and the responses on its KV cache
(harness/models/prefix_groups.py). The same log-probs, entropies and gradients as the plain forward (every row
[prompt | response]) up to rounding, with the prompts' rows cut to one per run."""

import pytest
import torch

from harness.config import ConfigError, load_config
from harness.models import build_model
from harness.models.logprobs import response_forward
from harness.models.lora import AdaptersOff, add_lora
from harness.models.prefix_groups import prompt_groups


def test_prompt_groups_are_runs_of_identical_consecutive_prompts():
    firsts, run = prompt_groups([[1, 2], [1, 2], [3], [1, 2], [1, 2], [1, 2], [4, 5, 6]])
    assert firsts == [0, 2, 3, 6]  # [1, 2] again after [3] is a run of its own
    assert run.tolist() == [0, 0, 1, 2, 2, 2, 3]


def _batch(vocab: int):
    """4 prompts of 3-9 tokens in runs of 4, 1, 3 and 2 rows; responses of 10 tokens, some ended early."""
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(3, vocab, (n,), generator=g).tolist() for n in (5, 9, 3, 7)]
    rows = [p for p, k in zip(prompts, (4, 1, 3, 2)) for _ in range(k)]
    resp = torch.randint(3, vocab, (len(rows), 10), generator=g)
    mask = torch.ones(len(rows), 10)
    for i, n in enumerate((10, 4, 10, 7, 1, 10, 9, 2, 10, 6)):
        mask[i, n:] = 0
        resp[i, n:] = 0
    return rows, resp, mask


def _forward(model, rows, resp, mask, share: bool):
    """log-probs, entropies (B, T) and every gradient of a REINFORCE-like loss with an entropy term."""
    model.zero_grad(set_to_none=True)
    logp, entropy, _ = response_forward(model, rows, resp, mask, 0, 0.7, with_entropy=True, share_prefix=share)
    adv = torch.linspace(-1, 1, len(rows)).unsqueeze(1)
    (-(logp * adv).sum() / mask.sum() - 0.01 * entropy.sum() / mask.sum()).backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return logp.detach(), entropy.detach(), grads


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_shared_prefix_forward_equals_the_plain_one_with_a_prompt_run_once(lora):
    model = build_model("tiny-dense", seed=0)[0]
    if lora:
        model = add_lora(model, r=4, alpha=8, dropout=0.0, targets="all-linear")
    rows, resp, mask = _batch(model.config.vocab_size)
    shapes: list = []
    embed = model.get_input_embeddings()
    embed.register_forward_hook(lambda m, i, o: shapes.append(tuple(i[0].shape)))
    plain = _forward(model, rows, resp, mask, False)
    shapes.clear()
    shared = _forward(model, rows, resp, mask, True)
    assert shapes == [(4, 9), (10, 10)]  # the 4 distinct prompts once (left-padded), then the 10 responses
    assert float((shared[0] - plain[0]).abs().max()) <= 1e-5 and float(plain[0].abs().sum()) > 1
    assert float((shared[1] - plain[1]).abs().max()) <= 1e-5
    assert float((shared[0][mask == 0]).abs().max()) == 0.0  # padding stays 0
    assert shared[2].keys() == plain[2].keys() and len(plain[2]) == (56 if lora else 38)
    for name, g in plain[2].items():
        assert float((shared[2][name] - g).norm()) <= 1e-4 * float(g.norm()) + 1e-9, name


def test_the_lora_reference_runs_its_prompts_once_with_the_adapters_off():
    """pi_ref of a LoRA policy (AdaptersOff) through the shared-prefix forward: the base's log-probs."""
    base = build_model("tiny-dense", seed=0)[0]
    rows, resp, mask = _batch(base.config.vocab_size)
    with torch.no_grad():
        want = response_forward(base, rows, resp, mask, 0, 1.0, share_prefix=False)[0]
        policy = add_lora(base, r=4, alpha=8, dropout=0.0, targets="all-linear")
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.add_(0.5)  # the adapters now move the policy: off, the base must come back
        moved = response_forward(policy, rows, resp, mask, 0, 1.0, share_prefix=True)[0]
        got = response_forward(AdaptersOff(policy), rows, resp, mask, 0, 1.0, share_prefix=True)[0]
    assert float((moved - want).abs().max()) > 1e-2
    assert float((got - want).abs().max()) <= 1e-5


def test_a_response_of_one_token_takes_the_prompts_logits_only():
    model = build_model("tiny-dense", seed=0)[0]
    rows, resp, mask = _batch(model.config.vocab_size)
    with torch.no_grad():
        a = response_forward(model, rows, resp[:, :1], mask[:, :1], 0, share_prefix=True)[0]
        b = response_forward(model, rows, resp[:, :1], mask[:, :1], 0, share_prefix=False)[0]
    assert a.shape == (10, 1) and float((a - b).abs().max()) <= 1e-5


@pytest.mark.parametrize(
    "overrides, match",
    [
        (["model.name=tiny-moe"], r"train\.share_prefix=true with model\.name='tiny-moe', an MoE"),
        (["train.gradient_checkpointing=true"], r"train\.share_prefix=true with train\.gradient_checkpointing"),
        (["train.parallel=fsdp"], r"train\.parallel='fsdp' with train\.share_prefix=true"),
    ],
    ids=["moe", "checkpointing", "fsdp"],
)
def test_what_share_prefix_does_not_combine_with_is_refused_naming_the_keys(overrides, match):
    with pytest.raises((ConfigError, ValueError), match=match):
        load_config("experiments/runs/smoke.yaml", ["train.share_prefix=true", *overrides])


def test_a_model_without_logits_to_keep_gets_the_head_everywhere_and_the_same_logprobs(monkeypatch):
    """A model whose forward takes no `logits_to_keep`: the head runs on every position, the needed ones are cut."""
    model = build_model("tiny-dense", seed=0)[0]
    rows, resp, mask = _batch(model.config.vocab_size)
    with torch.no_grad():
        want = response_forward(model, rows, resp, mask, 0, share_prefix=False)[0]
        monkeypatch.setattr("harness.models.logprobs.takes_logits_to_keep", lambda m: False)
        real = type(model).forward
        monkeypatch.setattr(
            type(model),
            "forward",
            lambda self, *a, logits_to_keep=None, **k: _no_keep(real, self, logits_to_keep, a, k),
        )
        got = response_forward(model, rows, resp, mask, 0, share_prefix=True)[0]
    assert float((got - want).abs().max()) <= 1e-5


def _no_keep(forward, model, logits_to_keep, args, kwargs):
    assert logits_to_keep is None, "logits_to_keep passed to a model that does not take it"
    return forward(model, *args, **kwargs)
