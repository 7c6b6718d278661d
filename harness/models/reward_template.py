"""What a reward model reads: a (prompt, completion) rendered with the reward model's OWN chat template.

    ids = reward_input_ids(rm_tokenizer, "7*8-6=?\\n", "56-6=50\\nAnswer: 50")

The one rendering every reward model of this project is trained on (`harness train-rm`, harness/rm/) and
scored with (train-rm's held-out scoring and task.rewards' RewardModel both call `chat_input_ids`): the
reward tokenizer's chat template applied to
[{"role": "user", "content": prompt}, {"role": "assistant", "content": completion}], no generation
prompt, no special tokens added beyond what the template writes. A tokenizer without a chat template
(a foreign folder; `harness train-rm` always saves one) renders as BOS (if any) + the messages' contents
joined by blank lines, the same for training and scoring. The model's score is the logit of the
last non-pad token of these ids (what transformers' *ForSequenceClassification pools). A policy's text is
re-rendered here, never its token ids: the two tokenizers may differ. A prompt or completion given as a
list of chat messages (conversational pairs) is used as those messages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

Text = str | list[dict]  # plain text, or chat messages [{"role": ..., "content": ...}, ...]


def reward_messages(prompt: Text, completion: Text) -> list[dict]:
    """The chat messages of one (prompt, completion): a user turn and an assistant turn (messages as given)."""
    head = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
    tail = [{"role": "assistant", "content": completion}] if isinstance(completion, str) else list(completion)
    return head + tail


def chat_input_ids(tokenizer: PreTrainedTokenizerBase, messages: list[dict]) -> list[int]:
    """Token ids the reward model scores for a chat: its chat template (no generation prompt), else BOS (if
    any) + the contents joined by blank lines."""
    if tokenizer.chat_template:
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=False, tokenize=True, return_dict=False)
        return list(ids)
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    return bos + tokenizer.encode("\n\n".join(m["content"] for m in messages), add_special_tokens=False)


def reward_input_ids(tokenizer: PreTrainedTokenizerBase, prompt: Text, completion: Text) -> list[int]:
    """Token ids the reward model scores for (prompt, completion): chat_input_ids of reward_messages."""
    return chat_input_ids(tokenizer, reward_messages(prompt, completion))
