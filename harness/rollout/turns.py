"""Multi-turn rollouts: the model calls tools, or talks to an environment, over several turns.

    backend = TurnsBackend(inner, start, observe, max_turns=4, pad_id=0, tokenizer=tok)
    batch = roll_out(backend, problems, prompts, group_size, params)   # a RolloutBatch of whole trajectories

Each row's trajectory is its prompt, then [model turn, observation]* ending with a model turn:

    prompt | model turn 1 | observation 1 | model turn 2 | ... | model turn k        (k <= max_turns)
             mask 1         mask 0          mask 1                mask 1

`start(problem) -> (session, prompt ids)` opens one session a row (a tool session, or the researcher's
environment: harness/train/core/agent.py); after each model turn `session.step(text)` answers with a reply
(its `messages`, `done`, `reward`, `calls`, `errors`), and `observe(messages) -> (ids, truncated)` renders the
messages as the tokens that follow the model's turn. The next turn is generated from the trajectory's tokens
so far, as ids: nothing is decoded and re-tokenised, so each turn's context is a prefix of the final row and
the policy is trained on exactly the tokens it saw (tests/rollout/test_turns.py). A row ends when its session
says done, its turn is truncated (max_new_tokens without EOS or a stop string), max_turns is reached, or its
next turn would not fit max_context positions.

The RolloutBatch's response is the whole trajectory after the prompt: response_mask is 1 exactly on the tokens
the model sampled (each turn's EOS or stop token included), sampler_logp their log-probs (0 on observation
tokens and padding); `lengths` counts the model's tokens only. truncated: the last model turn was. texts: the
trajectory decoded (special tokens skipped), what the task's rewards score. extras (B,) float: "turns",
"tool_calls", "tool_errors", "obs_tokens", "obs_truncated", and "env_reward" (the session's final reward,
NaN where it gave none).

Each turn's generate draws from its own seed (turn_seed); a single-turn run never comes here.
Shapes: N problems, G group size, B = N*G rows (groups contiguous), T trajectory width.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from harness.rollout.base import RolloutBackend, RolloutBatch, SamplingParams

STATS = ("turns", "tool_calls", "tool_errors", "obs_tokens", "obs_truncated")


def turn_seed(seed: int, turn: int) -> int:
    """The sampling seed of turn `turn` (0-based) of a rollout seeded `seed`."""
    return (seed * 1_000_003 + turn * 7_919) % (2**31 - 1)


@dataclass
class Trajectory:
    """One row's response so far: token ids, the model's mask, the sampler's log-probs, and its counts."""

    ids: list[int] = field(default_factory=list)
    mask: list[float] = field(default_factory=list)
    logp: list[float] = field(default_factory=list)
    truncated: bool = False
    reward: float = float("nan")
    stats: dict = field(default_factory=lambda: dict.fromkeys(STATS, 0))

    def add(self, ids: list[int], logp: list[float] | None) -> None:
        """A model turn (its log-probs given: mask 1) or an observation (None: mask 0, log-prob 0)."""
        self.ids += ids
        self.mask += [1.0 if logp is not None else 0.0] * len(ids)
        self.logp += logp if logp is not None else [0.0] * len(ids)


def to_batch(prompts: list[list[int]], rows: list[Trajectory], texts: list[str], pad_id: int) -> RolloutBatch:
    """The trajectories as a RolloutBatch (B rows, right-padded to the longest)."""
    T = max([len(r.ids) for r in rows] + [1])
    ids = torch.full((len(rows), T), pad_id, dtype=torch.long)
    mask, logp = torch.zeros(len(rows), T), torch.zeros(len(rows), T)
    for i, r in enumerate(rows):
        ids[i, : len(r.ids)] = torch.tensor(r.ids, dtype=torch.long)
        mask[i, : len(r.mask)] = torch.tensor(r.mask)
        logp[i, : len(r.logp)] = torch.tensor(r.logp)
    extras = {k: torch.tensor([float(r.stats[k]) for r in rows]) for k in STATS}
    extras["env_reward"] = torch.tensor([r.reward for r in rows], dtype=torch.float32)
    truncated = torch.tensor([r.truncated for r in rows], dtype=torch.bool)
    return RolloutBatch(prompts, ids, mask, logp, truncated, texts, extras)


def roll_out(backend, problems: list, prompts: list[list[int]], group_size: int, params: SamplingParams):
    """A step's rows: a TurnsBackend's trajectories for `problems`, any other backend's single turn (`generate` of
    the rendered `prompts`, the call a single-turn run has always made)."""
    if isinstance(backend, TurnsBackend):
        return backend.rollout(problems, prompts, group_size, params)
    return backend.generate(prompts, group_size, params)


class TurnsBackend(RolloutBackend):
    """A backend's `generate`, turn after turn, for the rows of `rollout`; `generate` itself is the inner
    backend's single turn (an eval)."""

    def __init__(self, inner, start, observe, max_turns: int, pad_id: int, tokenizer, stop=(), max_context=None):
        self.inner, self.start, self.observe = inner, start, observe
        self.max_turns, self.pad_id, self.tokenizer = int(max_turns), pad_id, tokenizer
        self.stop = tuple(stop)  # the tool format's closing tag (plain format): a turn ends after its call
        self.max_context = max_context  # the model's positions: a turn that would not fit is not started

    def generate(self, prompts: list[list[int]], group_size: int, params: SamplingParams) -> RolloutBatch:
        return self.inner.generate(prompts, group_size, params)

    def sync_weights(self, model: torch.nn.Module) -> None:
        self.inner.sync_weights(model)

    def close(self) -> None:
        self.inner.close()

    def rollout(self, problems: list, prompts: list[list[int]], group_size: int, params: SamplingParams):
        """G trajectories for each problem (`prompts`, the single-turn renders, are not used: each session
        renders its own first message)."""
        opened = [self.start(p) for p in problems for _ in range(group_size)]
        sessions, firsts = [s for s, _ in opened], [list(ids) for _, ids in opened]
        rows = [Trajectory() for _ in opened]
        active = list(range(len(rows)))
        stops = tuple(dict.fromkeys((*params.stop, *self.stop)))
        for turn in range(self.max_turns):
            active = [i for i in active if self._fits(firsts[i], rows[i], params)]
            if not active:
                break
            turn_params = replace(params, seed=turn_seed(params.seed, turn), stop=stops, first_prompt=0)
            out = self.inner.generate([firsts[i] + rows[i].ids for i in active], 1, turn_params)
            active = self._turn(out, active, sessions, rows, last=turn == self.max_turns - 1)
        texts = [self.tokenizer.decode(r.ids, skip_special_tokens=True) for r in rows]
        return to_batch(firsts, rows, texts, self.pad_id)

    def _fits(self, prompt: list[int], row: Trajectory, params: SamplingParams) -> bool:
        return self.max_context is None or len(prompt) + len(row.ids) + params.max_new_tokens <= self.max_context

    def _turn(self, out: RolloutBatch, active: list[int], sessions, rows: list[Trajectory], last: bool) -> list[int]:
        """Add one generated turn to each active row and its session's reply; -> the rows that go on."""
        keep = out.response_mask.bool()
        going = []
        for j, i in enumerate(active):
            row = rows[i]
            row.add(out.response_ids[j][keep[j]].tolist(), out.sampler_logp[j][keep[j]].tolist())
            row.truncated = bool(out.truncated[j])
            row.stats["turns"] += 1
            reply = sessions[i].step(out.texts[j])
            row.stats["tool_calls"] += reply.calls
            row.stats["tool_errors"] += reply.errors
            if reply.reward is not None:
                row.reward = float(reply.reward)
            if reply.done or row.truncated or last or not reply.messages:
                continue
            ids, cut = self.observe(reply.messages)
            row.add(list(ids), None)
            row.stats["obs_tokens"] += len(ids)
            row.stats["obs_truncated"] += int(cut)
            going.append(i)
        return going
