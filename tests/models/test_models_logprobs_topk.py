"""`response_forward` with a head (the extras slot's forward reads, docs/objective.md, "Token statistics"): the sampled
token's log-probs are `response_logprobs`' bit for bit; SimKO's heads read the forward's K most likely
tokens with their log-softmax values, or the log-probs of given candidates; 0 on padding; gradients flow."""

from types import SimpleNamespace

import torch
from torch import nn

from harness.models.logprobs import response_forward, response_logprobs
from harness.objective import simko


class FakeLM(nn.Module):
    """Logits (B, L, V) from a learned table indexed by the token id (enough for the packing)."""

    def __init__(self, V=7):
        super().__init__()
        self.table = nn.Parameter(torch.randn(V, V, generator=torch.Generator().manual_seed(0)))

    @property
    def device(self):
        return self.table.device

    def forward(self, input_ids, attention_mask, use_cache=False):
        return SimpleNamespace(logits=self.table[input_ids])


def _batch():
    return [[1, 2], [3]], torch.tensor([[4, 5, 6], [2, 0, 0]]), torch.tensor([[1.0, 1, 1], [1, 0, 0]])


def test_top_k_are_the_most_likely_tokens_and_logp_is_unchanged():
    model = FakeLM()
    prompts, resp, mask = _batch()
    cfg = SimpleNamespace(simko_top_k=3)
    logp, ent, _ = response_logprobs(model, prompts, resp, mask, 0, 0.7, with_entropy=True)
    lp2, ent2, got = response_forward(
        model, prompts, resp, mask, 0, 0.7, with_entropy=True, head=lambda view: simko.old_topk(cfg, view)
    )
    topk, idx = got["old_topk_logp"], got["topk_index"]
    assert torch.equal(logp, lp2) and torch.equal(ent, ent2)
    # row 0, token 0 is predicted from the prompt's last position (token 2): log_softmax(table[2] / 0.7)
    full = torch.log_softmax(model.table[2].detach() / 0.7, -1)
    want, want_idx = full.topk(3)
    assert torch.equal(idx[0, 0], want_idx)
    torch.testing.assert_close(topk[0, 0].detach(), want, rtol=0, atol=1e-6)
    assert (topk[1, 1:] == 0).all()  # padding
    topk.sum().backward()
    assert model.table.grad is not None and model.table.grad.abs().sum() > 0


def test_given_candidates_are_gathered():
    model = FakeLM()
    prompts, resp, mask = _batch()
    index = torch.zeros(2, 3, 2, dtype=torch.long)
    index[..., 1] = 5
    cfg = SimpleNamespace(simko_top_k=2)
    _, _, got = response_forward(
        model, prompts, resp, mask, 0, 1.0, head=lambda view: simko.train_topk(cfg, view, {"topk_index": index})
    )
    full = torch.log_softmax(model.table[2].detach(), -1)
    torch.testing.assert_close(got["topk_logp"][0, 0].detach(), full[[0, 5]], rtol=0, atol=1e-6)
    assert torch.equal(got["is_argmax"], resp == 0)


def test_no_head_reads_nothing():
    model = FakeLM()
    prompts, resp, mask = _batch()
    assert response_forward(model, prompts, resp, mask, 0)[2] == {}
