"""render_prompt / render_problem: the system prompt and chat-message prompts of a dataset row, with a
chat template (the character tokenizer's) and without one."""

from __future__ import annotations

from harness.models import build_model, render_problem, render_prompt
from harness.tasks.base import Problem


def _tok():
    return build_model("tiny-dense", seed=0)[1]


def test_system_prompt_and_messages_through_the_chat_template():
    tok = _tok()
    bos = [tok.bos_token_id]
    assert render_prompt(tok, "Q?") == bos + tok.encode("Q?", add_special_tokens=False)
    # the character template closes a system turn with a newline
    assert tok.decode(render_prompt(tok, "Q?", system="Be brief.")) == "<bos>Be brief.\nQ?"
    msgs = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Yes"},
        {"role": "user", "content": "Q?"},
    ]
    assert tok.decode(render_prompt(tok, "ignored", messages=msgs)) == "<bos>HiYes<eos>Q?"


def test_render_problem_appends_the_suffix_to_the_last_user_message():
    tok = _tok()
    msgs = [
        {"role": "user", "content": "First"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "Q?"},
    ]
    p = Problem("u", "Q?", "1", "all", {"messages": msgs, "system": "S."})
    assert tok.decode(render_problem(tok, p, " Think.")) == "<bos>S.\nFirstok<eos>Q? Think."
    plain = Problem("v", "7+1=?\n", "8", "easy")  # a generated task's problem: as before
    assert render_problem(tok, plain, "") == render_prompt(tok, "7+1=?\n")


def test_without_a_chat_template_the_system_prompt_leads():
    tok = _tok()
    tok.chat_template = None
    assert tok.decode(render_prompt(tok, "Q?", system="Be brief.")) == "<bos>Be brief.\n\nQ?"
