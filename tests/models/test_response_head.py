"""The trainer's forwards compute the output head only where a response token is predicted
(harness/models/logprobs.py: transformers' `logits_to_keep`), not on the prompts: the same log-probs and
entropies as the head on every position (to float rounding: the head's matmul has fewer rows), fewer rows
through the head."""

import pytest
import torch

import harness.models.logprobs as lp
from tests.models.packed_rows import three_rows, tiny_model


@pytest.mark.parametrize("name", ["tiny-dense", "tiny-moe"])
def test_the_head_on_response_positions_gives_the_same_logprobs(name, monkeypatch):
    model = tiny_model(name)
    prompts, resp, mask = three_rows(model.config.vocab_size)
    rows_seen = []
    hook = model.lm_head.register_forward_hook(lambda m, i, o: rows_seen.append(i[0].shape[1]))
    with torch.no_grad():
        logp, ent, _ = lp.response_logprobs(model, prompts, resp, mask, 0, 1.3, with_entropy=True)
        monkeypatch.setattr(lp, "takes_logits_to_keep", lambda m: False)
        logp_all, ent_all, _ = lp.response_logprobs(model, prompts, resp, mask, 0, 1.3, with_entropy=True)
    hook.remove()
    L = max(len(p) + int(m.sum()) for p, m in zip(prompts, mask))  # the packed width: 19
    assert rows_seen == [L - (5 - 1), L]  # from the shortest prompt's last token on, against every position
    assert torch.allclose(logp, logp_all, atol=1e-6, rtol=0) and torch.allclose(ent, ent_all, atol=1e-6, rtol=0)
    assert float(logp_all.abs().sum()) > 0 and (logp_all[1, 4:] == 0).all()
