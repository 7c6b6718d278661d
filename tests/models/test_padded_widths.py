"""train.pad_to_multiple_of (harness/models/logprobs.py): the trainer's forwards pack their rows to a width that is a
multiple of m, the extra positions after every row with attention 0. Causal attention: no real position sees
them, so the log-probs, entropies and values are those of the unpadded forward (to float rounding: the matrices
have more rows); the output head runs on the real positions only. The context is scoped, and the trainer's
forwards (score, update, a critic) run inside it: tests/train/test_padded_widths_train.py."""

import pytest
import torch

import harness.models.logprobs as lp
from tests.models.packed_rows import three_rows, tiny_model


def test_the_width_by_hand():
    assert lp.packed_width([12, 5, 9], [7, 4, 7]) == 19  # 12 + 7
    assert lp.packed_width([12, 5, 9], [7, 4, 7], 16) == 32
    assert lp.packed_width([12, 5, 9], [7, 4, 7], 19) == 19  # already a multiple
    assert lp.packed_width([3, 8], [0, 0], 4) == 12  # no response: the longest prompt + 1 = 9 -> 12
    assert [lp.round_up(w, 8) for w in (1, 8, 9, 16, 17)] == [8, 8, 16, 16, 24]


def test_pack_adds_padding_after_every_row_and_nothing_else():
    prompts, resp, mask = three_rows(100)
    ids, att, index = lp.pack(prompts, resp, mask, pad_id=0)
    ids16, att16, index16 = lp.pack(prompts, resp, mask, pad_id=0, multiple=16)
    assert ids.shape == (3, 19) and ids16.shape == (3, 32)
    assert torch.equal(ids16[:, :19], ids) and torch.equal(att16[:, :19], att) and torch.equal(index16, index)
    assert (ids16[:, 19:] == 0).all() and (att16[:, 19:] == 0).all()
    assert att16.sum(-1).tolist() == [19, 9, 16]  # each row's own tokens: P_i + its response length


@pytest.mark.parametrize("name", ["tiny-dense", "tiny-moe"])
def test_padded_forwards_give_the_same_logprobs_and_skip_the_head_on_padding(name):
    model = tiny_model(name)
    prompts, resp, mask = three_rows(model.config.vocab_size)
    widths, head_rows = [], []
    pre = model.register_forward_pre_hook(lambda m, a, kw: widths.append(kw["input_ids"].shape[1]), with_kwargs=True)
    hook = model.lm_head.register_forward_hook(lambda m, i, o: head_rows.append(i[0].shape[1]))
    with torch.no_grad():
        logp, ent, _ = lp.response_logprobs(model, prompts, resp, mask, 0, 1.3, with_entropy=True)
        with lp.padded_widths(16):
            logp16, ent16, _ = lp.response_logprobs(model, prompts, resp, mask, 0, 1.3, with_entropy=True)
    pre.remove(), hook.remove()
    assert widths == [19, 32]  # the rows packed to a multiple of 16
    assert head_rows == [19 - 4, 19 - 4]  # from the shortest prompt's last token to the last real position, both
    assert torch.allclose(logp16, logp, atol=1e-6, rtol=0) and torch.allclose(ent16, ent, atol=1e-6, rtol=0)
    assert (logp16[1, 4:] == 0).all()  # the short response's padding stays 0


def test_the_multiple_is_scoped():
    assert lp.pad_multiple() == 1
    with lp.padded_widths(64):
        assert lp.pad_multiple() == 64
        with lp.padded_widths(8):
            assert lp.pad_multiple() == 8
        assert lp.pad_multiple() == 64
    with pytest.raises(RuntimeError), lp.padded_widths(32):
        raise RuntimeError("a forward failed")
    assert lp.pad_multiple() == 1
