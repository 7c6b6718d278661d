"""What a reward model reads: a (prompt, completion) rendered with the reward model's OWN chat template.

    ids = reward_input_ids(rm_tokenizer, "7*8-6=?\\n", "56-6=50\\nAnswer: 50")

The one rendering every reward model of this project is trained on (`harness train-rm`, harness/rm/) and
scored with: the reward tokenizer's chat template applied to
[{"role": "user", "content": prompt}, {"role": "assistant", "content": completion}], no generation
prompt, no special tokens added beyond what the template writes. The model's score is the logit of the
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


def reward_input_ids(tokenizer: PreTrainedTokenizerBase, prompt: Text, completion: Text) -> list[int]:
    """Token ids the reward model scores for (prompt, completion); ValueError if the tokenizer has no chat
    template (a folder written by `harness train-rm` always has one)."""
    if not tokenizer.chat_template:
        raise ValueError("the reward model's tokenizer has no chat template (tokenizer_config.json chat_template)")
    ids = tokenizer.apply_chat_template(
        reward_messages(prompt, completion), add_generation_prompt=False, tokenize=True, return_dict=False
    )
    return list(ids)
