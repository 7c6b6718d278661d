"""The dataset task's rewards: task.rewards' verifiers, functions and reward models, normalised and summed.

    rewards = DatasetRewards(specs, correct="correct", timeout=5.0, workers=0)
    rewards.score_batch(problems, completions, truncated, train=True)   # -> [RewardBreakdown], one a completion

Verifiers and functions run in the rule scorer (harness/tasks/rewards/scorer.py, in worker processes when
task.reward_workers > 0); a reward model (task.rewards[i].model) scores the chat (the prompt's messages and
the completion) on the run's device, each process its own rows of a training batch (place's map_rows).
Without a reward model or a normaliser the scorer's weighted sum is the total; with one, each reward's raw
values (logged as reward/<name>) are normalised (task.rewards[i].normalize: a running normaliser learns from
training batches only and is checkpointed: state_dict), then weighted and summed. `correct` names the reward
that decides correctness (a reward model's: its raw score > 0 on a finished completion).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from harness.tasks.base import Problem, RewardBreakdown
from harness.tasks.rewards.normalize import Normalizer
from harness.tasks.rewards.reward_model import RewardModel, conversation
from harness.tasks.rewards.scorer import Item, ItemRewards, RewardSpec, Scorer


def item(problem: Problem, completion: str, truncated: bool) -> Item:
    """A dataset problem and one completion as the scorer's input (its row named for error messages)."""
    where = f"{problem.meta['file']} row {problem.meta['row']} (uid {problem.uid})"
    return Item(problem.prompt, completion, problem.answer, problem.meta["fields"], bool(truncated), where)


def messages(problem: Problem) -> list[dict]:
    """The prompt as chat messages (its system prompt, then its own messages or one user message)."""
    meta = problem.meta
    msgs = list(meta["messages"]) if meta.get("messages") else [{"role": "user", "content": problem.prompt}]
    return [{"role": "system", "content": meta["system"]}, *msgs] if meta.get("system") is not None else msgs


class DatasetRewards:
    """specs: task.rewards (at least one); correct: the name of the reward deciding correctness (checked by the
    task); timeout, workers: task.reward_timeout, task.reward_workers of the rule scorer."""

    def __init__(self, specs: list[RewardSpec], correct: str, timeout: float, workers: int) -> None:
        self.specs, self.correct = list(specs), correct
        rules = [s for s in self.specs if s.model is None]  # verifiers and functions: the scorer (and its workers)
        self.scorer = Scorer(rules, correct, timeout, workers)
        self.reward_models = {s.name: RewardModel(s.model, s.micro_batch_size) for s in self.specs if s.model}
        self.normalizers = {s.name: Normalizer(s.normalize) for s in self.specs}
        self._map_rows = None  # place(): each process scores its own rows with a reward model

    def mixed(self) -> bool:
        """Whether a reward model or a normaliser takes part (else the scorer's weighted sum is the total)."""
        return bool(self.reward_models) or any(n.mode != "none" for n in self.normalizers.values())

    def place(self, device, map_rows: Callable | None = None) -> None:
        """The run's device for the reward models; map_rows(fn, rows): fn over this process's rows, the
        results of every process gathered (harness/parallel.py map_shards), for a training batch."""
        for rm in self.reward_models.values():
            rm.to(device)
        self._map_rows = map_rows

    def breakdown(self, scored: ItemRewards, truncated: bool) -> RewardBreakdown:
        """format = 1 when the completion finished and the `correct` reward's verifier read an answer
        (a function defining correctness reads no answer: any finished completion)."""
        spec = next(s for s in self.specs if s.name == self.correct)
        fmt = 0.0 if truncated or (spec.verifier and scored.parsed is None) else 1.0
        parts = {**scored.rewards, "timeouts": float(scored.timed_out)}
        terms = tuple((sp.name, sp.weight, scored.rewards[sp.name]) for sp in self.specs)
        return RewardBreakdown(
            total=scored.total, correct=scored.correct, format=fmt, parsed=scored.parsed, parts=parts, terms=terms
        )

    def score(self, problem: Problem, completion: str, truncated: bool) -> RewardBreakdown:
        if self.mixed():
            return self.score_batch([problem], [completion], [truncated])[0]
        return self.breakdown(self.scorer.score(item(problem, completion, truncated)), bool(truncated))

    def score_batch(
        self, problems: list[Problem], completions: list[str], truncated: list[bool], train: bool = False
    ) -> list[RewardBreakdown]:
        """train: a training batch (a running normaliser learns from it; each process scores its own rows
        with a reward model)."""
        items = [item(p, c, t) for p, c, t in zip(problems, completions, truncated)]
        scored = self.scorer.score_many(items)
        if self.mixed():
            models = {n: self._model_scores(rm, problems, completions, train) for n, rm in self.reward_models.items()}
            scored = self._combine(scored, models, truncated, train)
        return [self.breakdown(s, bool(t)) for s, t in zip(scored, truncated)]

    def _model_scores(self, rm: RewardModel, problems: list[Problem], completions: list[str], train: bool):
        convs = [conversation(messages(p), c) for p, c in zip(problems, completions)]
        if train and self._map_rows is not None:
            return self._map_rows(rm.score, convs)
        return rm.score(convs)

    def _combine(
        self, scored: list[ItemRewards], models: dict[str, list[float]], truncated, train: bool
    ) -> list[ItemRewards]:
        """Each reward's raw values (logged as reward/<name>), normalised, then weighted and summed; `correct`
        from a reward model is its raw score > 0."""
        raw = {s.name: models[s.name] if s.model else [x.rewards[s.name] for x in scored] for s in self.specs}
        normed = {name: self.normalizers[name](values, update=train) for name, values in raw.items()}
        out = []
        for i, x in enumerate(scored):
            total = math.fsum(s.weight * normed[s.name][i] for s in self.specs)
            correct = raw[self.correct][i] > 0 and not truncated[i] if self.correct in models else x.correct
            out.append(ItemRewards({s.name: raw[s.name][i] for s in self.specs}, total, correct, x.parsed, x.timed_out))
        return out

    def state_dict(self) -> dict:
        """The running normalisers' statistics (a checkpoint's; {} without one)."""
        return {n: z.state_dict() for n, z in self.normalizers.items() if z.mode == "running"}

    def load_state_dict(self, state: dict) -> None:
        for name, z in (state or {}).items():
            self.normalizers[name].load_state_dict(z)
