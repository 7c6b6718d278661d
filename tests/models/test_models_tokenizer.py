"""The character tokenizer: exact round trip, specials, save/load through AutoTokenizer."""

from transformers import AutoTokenizer

from harness.models.tokenizer import CHARS, char_tokenizer

TEXT = "  What is 12 + 7?\n\nAnswer:  19 \n ~!{}|`'\"\\ end  "


def test_round_trip_is_exact_including_spaces():
    tok = char_tokenizer()
    assert len(tok) == 100
    assert (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id, tok.unk_token_id) == (0, 1, 2, 3)
    every = "".join(CHARS)
    for text in (TEXT, every, " ", "\n", "a  b", ""):
        ids = tok.encode(text)
        assert len(ids) == len(text)  # one token per char, no specials added
        assert tok.decode(ids) == text
    assert tok.encode("é\t") == [tok.unk_token_id] * 2
    assert tok.decode([1, *tok.encode("ab"), 2, 0], skip_special_tokens=True) == "ab"


def test_save_and_load_with_autotokenizer(tmp_path):
    tok = char_tokenizer()
    tok.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert loaded.get_vocab() == tok.get_vocab()
    assert loaded.encode(TEXT) == tok.encode(TEXT)
    assert loaded.decode(loaded.encode(TEXT)) == TEXT
    assert loaded.all_special_ids == tok.all_special_ids
    assert loaded.chat_template == tok.chat_template
    assert loaded.padding_side == "left"
    batch = loaded(["ab", "abcd"], padding=True)
    assert batch["input_ids"][0][:2] == [0, 0] and batch["attention_mask"][0] == [0, 0, 1, 1]


def test_chat_template_is_bos_plus_text():
    tok = char_tokenizer()
    msgs = [{"role": "user", "content": "1+1=?\nAnswer:"}]
    rendered = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    assert rendered == "<bos>1+1=?\nAnswer:"
    full = tok.apply_chat_template(msgs + [{"role": "assistant", "content": " 2"}], tokenize=False)
    assert full == "<bos>1+1=?\nAnswer: 2<eos>"
    ids = tok.apply_chat_template(msgs, add_generation_prompt=True, return_dict=False)
    assert ids == [tok.bos_token_id] + tok.encode("1+1=?\nAnswer:")
