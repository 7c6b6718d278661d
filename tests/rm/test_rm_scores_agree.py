"""One rendering for training and scoring: a folder written by `harness train-rm` scores the same pair the
same way through train-rm's held-out scoring (harness/rm/train.py evaluate) and through task.rewards'
reward model (harness/tasks/rewards/reward_model.py RewardModel), token for token and score for score."""

import torch

from harness.cli import main
from harness.models.reward_template import reward_input_ids
from harness.tasks.rewards import RewardModel, conversation
from tests.tasks.reward_models import tiny_reward_model


def test_train_rms_held_out_scores_are_the_reward_models_scores(small_base, marker_file, tmp_path, monkeypatch):
    from harness.rm import train as rm_train

    encoded, scored = [], []

    def encode_spy(pairs, tok, max_length):
        enc, dropped = real_encode(pairs, tok, max_length)
        encoded.append((pairs, enc, dropped))
        return enc, dropped

    def scores_spy(model, seqs, pad_id, batch_size):
        out = real_scores(model, seqs, pad_id, batch_size)
        scored.append(out)
        return out

    real_encode, real_scores = rm_train.encode, rm_train.scores
    monkeypatch.setattr(rm_train, "encode", encode_spy)
    monkeypatch.setattr(rm_train, "scores", scores_spy)
    out = tmp_path / "rm"
    argv = ["train-rm", "--pairs", str(marker_file), "--base", small_base, "--out", str(out), "--steps", "4"]
    assert main([*argv, "--lr", "3e-3", "--eval-fraction", "0.25"]) == 0
    (held, enc, dropped) = encoded[1]  # encode(train), then encode(held-out)
    assert dropped == 0 and len(held) == 12
    held_chosen, held_rejected = scored[0], scored[1]  # evaluate(held-out) scores chosen, then rejected
    rm = RewardModel(str(out), micro_batch_size=5)
    convs = [
        conversation([{"role": "user", "content": p.prompt}], side) for p in held for side in (p.chosen, p.rejected)
    ]
    assert [rm.token_ids(c) for c in convs[0::2]] == enc.chosen
    assert [rm.token_ids(c) for c in convs[1::2]] == enc.rejected
    got = torch.tensor(rm.score(convs))
    assert torch.allclose(got[0::2], held_chosen, atol=1e-5, rtol=0)
    assert torch.allclose(got[1::2], held_rejected, atol=1e-5, rtol=0)
    assert len(set(got.tolist())) > 1  # scores that differ by input


def test_a_template_less_tokenizer_renders_the_same_for_training_and_scoring(tmp_path):
    """The fallback lives in the one rendering: train-rm's reward_input_ids and the scorer agree (before, the
    first refused such a tokenizer and the second joined the contents itself)."""
    rm = RewardModel(str(tiny_reward_model(tmp_path / "rm", template=None)))
    tok = rm.tokenizer
    assert not tok.chat_template
    conv = conversation([{"role": "user", "content": "7*8=?"}], "56")
    assert rm.token_ids(conv) == reward_input_ids(tok, "7*8=?", "56")
