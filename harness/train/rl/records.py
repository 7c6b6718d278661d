"""What an RL step logs besides its update's metrics: the rollout's, the scoring's, the phases' timings, and the
completions kept for samples.jsonl.

    rec.update(step_records(ep, batch, coll, scored_metrics, hacking, mismatch_records))
    rec.update(perf_records(t_rollout, t_score, t_update, ep, inner_epochs))
    samples = logged_samples(ep, step, group_size, n)      # the first completion of each of the first n prompts

Shapes: ep.rewards (B,), batch.adv (B, T) per token or (B,) per sequence, batch.mask (B, T); B = prompts x G.
"""

from __future__ import annotations

from harness.models.logprobs import packed_width
from harness.train.core.batch import Batch
from harness.train.core.episode import Episode
from harness.train.diagnostics.metrics import rollout_metrics


def step_records(ep: Episode, batch: Batch, coll: dict, scored: dict, hacking, mismatch: dict) -> dict:
    """The rollout's metrics, the hacking probe's (a reward model beside a verifier), the collection's, the
    rollout/train mismatch's (observers.py mismatch_records), the scoring's (e.g. PRIME's prm/loss) and
    adv/abs_mean, in that order."""
    out = dict(rollout_metrics(ep))
    if hacking is not None:  # the reward model's score against the verifier's verdicts
        out.update(hacking.step(ep.scores, ep.correct))
    out.update(coll)
    out.update(mismatch)
    out.update(scored)  # e.g. PRIME's prm/loss, prm/accuracy, reward/process_mean
    adv, mask = batch.adv, batch.mask
    out["adv/abs_mean"] = float((adv.abs() * mask).sum() / mask.sum()) if adv.dim() == 2 else float(adv.abs().mean())
    return out


def perf_records(
    t_rollout: float, t_score: float, t_update: float, ep: Episode, inner_epochs: int, multiple: int = 1
) -> dict:
    """The phases' seconds, the tokens a second of the rollout and of the update (its K epochs each), and the
    batch's width: its longest prompt plus the response length, rounded up to `multiple` (train.pad_to_multiple_of),
    the padded row length of the step's forwards when they run the whole batch at once (a width no step had before
    can cost a GPU once per shape: harness/models/logprobs.py; the allocator's side: harness/train/run/cuda_allocs.py)."""
    r = ep.rollout
    n_tok = float(r.response_mask.sum())
    lens, T = [len(p) for p in r.prompt_ids], r.response_ids.shape[1]
    return {
        "perf/batch_width": float(packed_width(lens, [T] * len(lens), multiple)),  # every row's response T long
        "perf/rollout_seconds": t_rollout,
        "perf/score_seconds": t_score,
        "perf/update_seconds": t_update,
        "perf/rollout_tokens_per_s": n_tok / max(t_rollout, 1e-9),
        "perf/train_tokens_per_s": n_tok * inner_epochs / max(t_update, 1e-9),
    }


def logged_samples(ep: Episode, step: int, group_size: int, n: int) -> list[dict]:
    """samples.jsonl's rows of a step: the first completion of each of its first n prompts."""
    rewards = ep.rewards.tolist()
    return [
        {
            "step": step,
            "prompt": p.prompt,
            "difficulty": p.difficulty,
            "completion": ep.rollout.texts[i * group_size],
            "reward": float(rewards[i * group_size]),
            "correct": bool(ep.scores[i * group_size].correct),
        }
        for i, p in enumerate(ep.problems[:n])
    ]
