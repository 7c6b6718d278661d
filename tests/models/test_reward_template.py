"""The reward template (harness/models/reward_template.py): the reward tokenizer's own chat template on
[user: prompt, assistant: completion], token for token."""

from harness.models.reward_template import chat_input_ids, reward_input_ids, reward_messages
from harness.models.tokenizer import char_tokenizer


def test_text_becomes_a_user_and_an_assistant_turn():
    assert reward_messages("2+2=?", "4") == [
        {"role": "user", "content": "2+2=?"},
        {"role": "assistant", "content": "4"},
    ]
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "2+2=?"}]
    assert reward_messages(msgs, "4") == [*msgs, {"role": "assistant", "content": "4"}]
    assert reward_messages([], msgs) == msgs  # an implicit prompt: the conversation as given


def test_ids_are_the_tokenizers_own_template():
    tok = char_tokenizer()
    ids = reward_input_ids(tok, "2+2=?\n", "4")
    assert ids == tok.apply_chat_template(
        [{"role": "user", "content": "2+2=?\n"}, {"role": "assistant", "content": "4"}],
        tokenize=True,
        return_dict=False,
    )
    assert tok.decode(ids) == "<bos>2+2=?\n4<eos>"  # the character template: bos, the turns, eos after the answer


def test_a_tokenizer_without_a_template_renders_plain_text():
    """A foreign folder's tokenizer without a chat template: BOS + the contents joined by blank lines, for
    train-rm and the scorer alike (one rendering: chat_input_ids)."""
    tok = char_tokenizer()
    tok.chat_template = None
    ids = reward_input_ids(tok, "a", "b")
    assert ids == [tok.bos_token_id, *tok.encode("a\n\nb", add_special_tokens=False)]
    assert tok.decode(ids) == "<bos>a\n\nb"
    assert chat_input_ids(tok, reward_messages("a", "b")) == ids
