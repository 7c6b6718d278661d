"""Character-level tokenizer for the synthetic tasks (arithmetic, countdown).

One token per character: every printable ASCII char 0x20-0x7E plus "\\n", after four
special tokens `<pad>`=0, `<bos>`=1, `<eos>`=2, `<unk>`=3 (any other char maps to
`<unk>`). It is a real `PreTrainedTokenizerFast` backed by a `tokenizers` WordLevel
model, so `save_pretrained(dir)` writes a standard `tokenizer.json` that
`AutoTokenizer.from_pretrained(dir)` and vLLM load back unchanged.

No special token is added by `encode`: `decode(encode(text)) == text` exactly
(spaces included). The prompt format is `<bos>` + task text (the text ends with its
cue, e.g. "...\\nAnswer:"); the chat template renders exactly that, with `<eos>`
after each assistant turn, so chat APIs and `render_prompt` agree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIAL_TOKENS = (PAD, BOS, EOS, UNK)  # ids 0, 1, 2, 3
CHARS = tuple(chr(c) for c in range(0x20, 0x7F)) + ("\n",)

# bos + the messages' contents concatenated: an assistant turn (the completion, which
# follows the prompt's cue directly) is closed by eos, a system turn by a newline. With
# add_generation_prompt nothing is appended: the task text already ends with its cue.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{{ message['content'] }}"
    "{% if message['role'] == 'assistant' %}{{ eos_token }}"
    "{% elif message['role'] == 'system' %}{{ '\\n' }}{% endif %}"
    "{% endfor %}"
)


def char_tokenizer(model_max_length: int = 512) -> PreTrainedTokenizerFast:
    """Build the character tokenizer (vocab size len(SPECIAL_TOKENS) + len(CHARS) = 100)."""
    from transformers import PreTrainedTokenizerFast  # heavy: transformers loads only where a tokenizer is built

    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS + CHARS)}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    # Every single character (newline included) is its own pre-token.
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    backend.decoder = decoders.Fuse()  # join tokens with no separator
    backend.add_special_tokens(list(SPECIAL_TOKENS))
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token=PAD,
        bos_token=BOS,
        eos_token=EOS,
        unk_token=UNK,
        clean_up_tokenization_spaces=False,
        model_max_length=model_max_length,
        padding_side="left",  # decoder-only generation pads prompts on the left
        chat_template=CHAT_TEMPLATE,
    )
