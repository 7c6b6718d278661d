"""Registry API: names, errors, prompt rendering."""

import pytest

from harness.models import MODEL_NAMES, build_model, render_prompt
from harness.models.tokenizer import char_tokenizer


def test_model_names():
    assert MODEL_NAMES == ("tiny-dense", "tiny-moe", "smollm2-135m", "smollm2-135m-random", "llama-1b-random")


def test_unknown_name_error_names_value_and_choices():
    with pytest.raises(ValueError, match="no-such-model") as err:
        build_model("no-such-model", seed=0)
    assert all(n in str(err.value) for n in MODEL_NAMES)


def test_bad_override_vocab_rejected():
    with pytest.raises(ValueError, match="vocab_size"):
        build_model("tiny-dense", seed=0, overrides={"vocab_size": 10})


def test_render_prompt_char_tokenizer():
    tok = char_tokenizer()
    text = "What is 3 + 4?\nAnswer:"
    ids = render_prompt(tok, text)
    assert ids == [tok.bos_token_id] + tok.encode(text)
    assert tok.decode(ids[1:]) == text


def test_render_prompt_without_chat_template():
    tok = char_tokenizer()
    tok.chat_template = None
    assert render_prompt(tok, "ab") == [tok.bos_token_id] + tok.encode("ab")
