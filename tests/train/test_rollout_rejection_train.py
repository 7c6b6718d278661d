"""The step-level rollout correction in a real run (harness/objective/batch_correction.py through
harness/train/core/scoring.py) and train.old_logp=bypass.

The sampler's log-probs differ from the trainer's here by rollout.top_p < 1: the sampler's are of the
truncated distribution, so log pi_rollout >= log pi_old on every token and k1 = log(pi_rollout / pi_old) >= 0.
"""

import json

import torch

import harness.train.rl.step as rl_step
from harness.objective import batch_correction
from harness.train import train

TOP_P = ["rollout.top_p=0.9", "train.steps=2", "train.checkpoint_every=2"]


def _records(run):
    """The training steps' records (the final eval's has no loss)."""
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if "loss/policy" in r]


def _watch(monkeypatch):
    real, seen = rl_step.score_episode, []

    def watching(sc, ep, *args, **kw):
        out = real(sc, ep, *args, **kw)
        seen.append((ep.rollout.response_mask.clone(), out[0]))
        return out

    monkeypatch.setattr(rl_step, "score_episode", watching)
    return seen


def test_rejected_tokens_leave_the_steps_loss_mask(fast_config, tmp_path, monkeypatch):
    """token_k1 at ratio 1.02: the tokens whose sampler probability is > 2% above pi_old's leave the mask the
    update reads, as batch_correction computes it from that step's pi_old and sampler log-probs."""
    seen = _watch(monkeypatch)
    cfg = fast_config(*TOP_P, "objective.rollout_rs=token_k1", "objective.rollout_rs_threshold=1.02")
    train(cfg, tmp_path)
    sampled, batch = seen[0]
    dropped = (sampled.to(batch.mask.device) > 0) & (batch.mask == 0)
    assert 0 < int(dropped.sum()) < int((sampled > 0).sum())  # some, not all
    want = batch_correction(cfg.objective, sampled.to(batch.mask.dtype), batch.old_logp, batch.rollout_logp).mask
    assert torch.equal(batch.mask, want)
    rec = _records(tmp_path)[0]
    assert rec["rejection/frac_masked"] == float(dropped.sum()) / float((sampled > 0).sum())
    assert 0 < rec["rejection/seq_frac_masked"] <= 1


def test_responses_far_from_the_sampler_leave_whole(fast_config, tmp_path, monkeypatch):
    """NeMo-RL's sequence logprob-error mask at 1.01 (the rows here average 1.009): a response leaves the mask whole or not at all."""
    seen = _watch(monkeypatch)
    train(fast_config(*TOP_P, "objective.seq_logprob_error_threshold=1.01"), tmp_path)
    sampled, batch = seen[0]
    rows = (sampled > 0).any(-1).to(batch.mask.device)
    gone = rows & (batch.mask.sum(-1) == 0)
    assert 0 < int(gone.sum()) < int(rows.sum())
    kept = rows & ~gone
    assert torch.equal(batch.mask[kept], sampled.to(batch.mask.device).to(batch.mask.dtype)[kept])
    rec = _records(tmp_path)[0]
    assert rec["rejection/seq_frac_masked"] == float(gone.sum()) / float(rows.sum())
    assert rec["seq_logprob_error/mean"] > 1.0


def test_batch_normalized_weights_average_one_over_the_step(fast_config, tmp_path):
    """One mini-batch, one micro-batch: the weights the loss applies are the step's own, so their mean over the
    step's response tokens is 1 (before normalising, top_p makes pi_old / pi_rollout < 1)."""
    cfg = fast_config(*TOP_P, "objective.rollout_is=token_truncate", "objective.rollout_is_batch_normalize=true")
    train(cfg, tmp_path)
    records = _records(tmp_path)
    assert len(records) == 2
    for rec in records:
        assert abs(rec["rollout_is/weight_mean"] - 1.0) < 1e-5
        assert rec["rollout_is/batch_norm_factor"] < 1.0


def test_bypass_takes_the_samplers_logp_as_pi_old_where_they_differ(fast_config, tmp_path, monkeypatch):
    """train.old_logp=bypass with top_p < 1 (where train.old_logp=rollout is refused): pi_old is the sampler's
    log-probs, not a recompute, and the PPO ratio at the first forward is pi_theta / pi_rollout, not 1."""
    seen = _watch(monkeypatch)
    train(fast_config(*TOP_P, "train.old_logp=bypass"), tmp_path)
    _, batch = seen[0]
    assert torch.equal(batch.old_logp, batch.rollout_logp.to(batch.old_logp.device))
    rec = _records(tmp_path)[0]
    assert rec["ratio/mean"] < 1.0  # pi_theta / pi_rollout with pi_rollout renormalised over the top-p set
