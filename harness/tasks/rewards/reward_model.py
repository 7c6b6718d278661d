"""A learned reward model as a reward: a local Hugging Face sequence-classification folder (num_labels 1).

    rm = RewardModel("results/rm/gsm8k", micro_batch_size=8)
    rm.to(torch.device("cuda"))
    scores = rm.score([conversation(messages, completion), ...])     # one float per completion

The policy's text is re-rendered with the reward model's OWN tokenizer and chat template (the prompt's
chat messages, then the completion as the assistant's turn): never the policy's token ids, so a reward
model whose tokenizer or template differs from the policy's (TRL #1979, OpenRLHF #242) scores what it
was trained on. The rendering is harness/models/reward_template.py's `chat_input_ids`, the one `harness
train-rm` trains with (without a chat template: BOS (if any) + the messages' contents joined by blank lines).
Scored in micro-batches of `micro_batch_size` rows (right-padded with the model's pad id; the model's
own pooling reads the last token that is not padding), no gradient, in this process (never pickled into
the reward workers), on the device the run moved it to. A micro-batch changes no score beyond the last
bits of a matmul.

`reward_model_problem(path)` is the check before the policy loads: the tokenizer loads and a sample
conversation scores one finite number (the folder's files are checked before: harness/models/folder.py).
"""

from __future__ import annotations

import math

from harness.models.hub import model_path
from harness.models.reward_template import chat_input_ids, reward_messages

SAMPLE = [{"role": "user", "content": "What is 2 + 3?"}, {"role": "assistant", "content": "2 + 3 = 5. #### 5"}]


def conversation(messages: list[dict], completion: str) -> list[dict]:
    """The chat the reward model reads: the prompt's messages, then the completion as the assistant's turn."""
    return reward_messages(messages, completion)


class RewardModel:
    """A sequence classifier with one label, loaded on first use (the config check, then the run)."""

    def __init__(self, path: str, micro_batch_size: int = 8):
        # a Hub id (org/name) loads its snapshot in huggingface_hub's cache (harness/models/hub.py)
        self.path, self.micro_batch_size = model_path(str(path), key="task.rewards[].model"), int(micro_batch_size)
        self.device = "cpu"
        self._model = None
        self._tok = None

    def to(self, device) -> RewardModel:
        self.device = device
        if self._model is not None:
            self._model.to(self.device)
        return self

    def load(self) -> None:
        if self._model is not None:
            return
        import torch  # heavy: torch and transformers load only where a reward model scores (not in reward workers)
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(self.path, local_files_only=True)
        model = AutoModelForSequenceClassification.from_pretrained(
            self.path, local_files_only=True, dtype=torch.float32
        )
        if model.config.pad_token_id is None:  # the model's pooling finds each row's last token by the pad id
            pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
            model.config.pad_token_id = pad
        self._tok, self._model = tok, model.eval().requires_grad_(False).to(self.device)

    @property
    def tokenizer(self):
        self.load()
        return self._tok

    def token_ids(self, conv: list[dict]) -> list[int]:
        """The reward model's tokens of one conversation: its own chat template (reward_template.chat_input_ids)."""
        return chat_input_ids(self.tokenizer, conv)

    def score(self, convs: list[list[dict]]) -> list[float]:
        """One score per conversation (B,), in micro-batches of micro_batch_size rows."""
        import torch

        self.load()
        ids = [self.token_ids(c) for c in convs]
        pad = self._model.config.pad_token_id
        out: list[float] = []
        for i in range(0, len(ids), self.micro_batch_size):
            chunk = ids[i : i + self.micro_batch_size]
            width = max(len(r) for r in chunk)
            input_ids = torch.tensor([r + [pad] * (width - len(r)) for r in chunk], device=self.device)  # (b, L)
            mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in chunk], device=self.device)
            with torch.no_grad():
                logits = self._model(input_ids=input_ids, attention_mask=mask).logits  # (b, 1)
            out.extend(logits[:, 0].float().cpu().tolist())
        return out


def reward_model_problem(path: str) -> str | None:
    """Why the folder does not score as a reward model (None: its tokenizer loads and a sample scores one
    finite number). Its files are checked first (harness/models/folder.py classifier_problem)."""
    rm = RewardModel(path, micro_batch_size=1)
    try:
        rm.load()
    except Exception as err:  # noqa: BLE001 -- any load failure is the folder's, said in one line
        return f"it does not load ({type(err).__name__}: {' '.join(str(err).split())[:200]})"
    try:
        (value,) = rm.score([SAMPLE])
    except Exception as err:  # noqa: BLE001 -- a forward that fails on a sample: the folder's too
        return f"a sample conversation does not score ({type(err).__name__}: {' '.join(str(err).split())[:200]})"
    if not math.isfinite(value):
        return f"a sample conversation scores {value} (not finite)"
    return None
