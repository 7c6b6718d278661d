"""The tool format a tokenizer takes, and the tokens of the messages that follow a model's turn.

    fmt = tool_format(tokenizer)                       # "hermes" if its chat template renders tools, else "plain"
    observe = ObservationRender(tokenizer, tools=schemas, max_tokens=256)
    ids, truncated = observe([{"role": "tool", "content": "408"}])

With a chat template the messages are rendered as the template renders them after an assistant turn, the
generation prompt of the next assistant turn included: the text after the assistant's turn (and its EOS) in
apply_chat_template(history + messages) (the way verl and TRL take a tool turn's tokens). The model's own turn
is left as it sampled it: a turn that ended at a stop string (the plain format's </call>) gets no EOS added.
Without a chat template the messages' contents follow as they are. In the plain format a tool's answer is
"<result>ANSWER</result>\n", in a user message. A message whose content (a tool's answer: inside the tags) is
longer than max_tokens tokens is cut there and says so: "... [truncated: 812 tokens, 256 kept]".
"""

from __future__ import annotations

TURN = "\x1fharness-turn\x1f"  # an assistant turn's content no template changes, to find where it ends


def tool_format(tokenizer) -> str:
    """hermes where the tokenizer's chat template renders `tools` (apply_chat_template(..., tools=...)), else
    plain (the character model's template, ChatML without tools)."""
    template = tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else str(tokenizer.chat_template)
    return "hermes" if tokenizer.chat_template and "tools" in template else "plain"


def _plain(message: dict) -> dict:
    if message["role"] != "tool":
        return message
    return {"role": "user", "content": f"<result>{message['content']}</result>\n"}


class ObservationRender:
    """messages -> (the token ids that follow the model's turn, how many contents were cut)."""

    def __init__(self, tokenizer, tools: list[dict] | None = None, max_tokens: int | None = None, fmt="plain"):
        self.tok, self.tools, self.max_tokens, self.fmt = tokenizer, tools or None, max_tokens, fmt

    def __call__(self, messages: list[dict]) -> tuple[list[int], int]:
        messages, cut = self._cut(messages)
        if self.fmt == "plain":  # a tool's answer between tags, as the plain description says
            messages = [_plain(m) for m in messages]
        text = self._after_turn(messages) if self.tok.chat_template else "".join(m["content"] for m in messages)
        return list(self.tok.encode(text, add_special_tokens=False)), cut

    def _cut(self, messages: list[dict]) -> tuple[list[dict], int]:
        if self.max_tokens is None:
            return messages, 0
        out, cut = [], 0
        for m in messages:
            ids = self.tok.encode(m["content"], add_special_tokens=False)
            if len(ids) > self.max_tokens:
                kept = self.tok.decode(ids[: self.max_tokens])
                m = {**m, "content": f"{kept} [truncated: {len(ids)} tokens, {self.max_tokens} kept]"}
                cut += 1
            out.append(m)
        return out, cut

    def _after_turn(self, messages: list[dict]) -> str:
        """The chat template's text for `messages` after an assistant turn and its EOS."""
        tools = {"tools": self.tools} if self.tools else {}
        history = [{"role": "user", "content": "x"}, {"role": "assistant", "content": TURN}]
        head = self.tok.apply_chat_template(history, tokenize=False, **tools)
        full = self.tok.apply_chat_template(history + messages, tokenize=False, add_generation_prompt=True, **tools)
        at = head.rindex(TURN) + len(TURN)
        eos = self.tok.eos_token
        if eos and head.startswith(eos, at):
            at += len(eos)
        if not full.startswith(head[:at]):
            raise ValueError("the chat template renders an assistant turn otherwise once messages follow it")
        return full[at:]
