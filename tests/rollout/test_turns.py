"""Multi-turn rollouts (harness/rollout/turns.py): the trajectory's tokens are what the model saw, turn by turn;
the response mask is 1 exactly on the tokens it sampled, the sampler's log-probs kept for those only."""

from __future__ import annotations

import torch

from harness.models.tokenizer import char_tokenizer
from harness.rollout.base import RolloutBackend, RolloutBatch, SamplingParams
from harness.rollout.turns import TurnsBackend
from harness.tasks.base import Problem
from harness.tasks.tools import ObservationRender, ToolRunner, ToolSession, load_tools, tool_format

TOK = char_tokenizer()
EOS = TOK.eos_token_id
M = "tests.tasks.user_tools"


class Scripted(RolloutBackend):
    """Turn k of every row writes script[k] (a turn ending in </call> stops there, else with EOS); token t of a
    turn has log-prob -(t + 1) / 10. Records every context it is given."""

    def __init__(self, script: list[str]):
        self.script, self.calls, self.contexts = script, 0, []

    def generate(self, prompts, group_size, params) -> RolloutBatch:
        assert group_size == 1
        self.contexts.append([list(p) for p in prompts])
        text = self.script[self.calls]
        self.calls += 1
        ids = TOK.encode(text, add_special_tokens=False) + ([] if text.endswith("</call>") else [EOS])
        n = len(ids)
        B = len(prompts)
        return RolloutBatch(
            prompt_ids=[list(p) for p in prompts],
            response_ids=torch.tensor([ids] * B),
            response_mask=torch.ones(B, n),
            sampler_logp=-(torch.arange(n, dtype=torch.float32) + 1).div(10).expand(B, n).clone(),
            truncated=torch.zeros(B, dtype=torch.bool),
            texts=[text] * B,
        )


def _backend(script, max_turns=3, tools=("add",), max_tool_tokens=64):
    runner = ToolRunner(load_tools([f"{M}:{t}" for t in tools]), timeout=2.0)

    def start(problem):
        session = ToolSession(runner, "plain")
        return session, [TOK.bos_token_id, *TOK.encode(session.reset(problem), add_special_tokens=False)]

    inner = Scripted(script)
    observe = ObservationRender(TOK, None, max_tool_tokens)
    return inner, TurnsBackend(inner, start, observe, max_turns, TOK.pad_token_id, TOK, stop=("</call>",))


PROBLEM = Problem("u", "2+3=?\n", "5", "easy")
PARAMS = SamplingParams(max_new_tokens=32, seed=3)


def test_the_trajectory_is_what_the_model_saw_and_the_mask_its_own_tokens():
    call, answer = '<call>add {"a": 2, "b": 3}</call>', "Answer: 5"
    inner, backend = _backend([call, answer])
    out = backend.rollout([PROBLEM], [[0]], 2, PARAMS)
    obs = "<result>5</result>\n"
    n1, n2, no = len(call), len(answer) + 1, len(obs)  # the answer's EOS is the model's
    assert out.response_ids.shape == (2, n1 + no + n2)
    want_mask = [1.0] * n1 + [0.0] * no + [1.0] * n2
    assert out.response_mask.tolist() == [want_mask] * 2
    logp = [-(t + 1) / 10 for t in range(n1)] + [0.0] * no + [-(t + 1) / 10 for t in range(n2)]
    assert torch.allclose(out.sampler_logp, torch.tensor([logp] * 2))
    assert out.lengths.tolist() == [n1 + n2] * 2  # a trajectory's response length: the model's tokens only
    assert out.texts == [call + obs + answer] * 2
    # every turn's context is a prefix of the final row: nothing was re-tokenised
    row = out.prompt_ids[0] + out.response_ids[0].tolist()
    for turn in inner.contexts:
        for context in turn:
            assert row[: len(context)] == context
    assert inner.contexts[1][0] == out.prompt_ids[0] + out.response_ids[0, : n1 + no].tolist()
    assert TOK.decode(out.response_ids[0, n1 : n1 + no]) == obs
    x = out.extras
    assert x["turns"].tolist() == [2.0, 2.0] and x["tool_calls"].tolist() == [1.0, 1.0]
    assert x["tool_errors"].tolist() == [0.0, 0.0] and x["obs_tokens"].tolist() == [no, no]
    assert torch.isnan(x["env_reward"]).all() and not out.truncated.any()


def test_the_last_turn_gets_no_observation():
    call = '<call>add {"a": 2, "b": 3}</call>'
    inner, backend = _backend([call], max_turns=1)
    out = backend.rollout([PROBLEM], [[0]], 1, PARAMS)
    assert out.response_mask.tolist() == [[1.0] * len(call)] and out.extras["tool_calls"].tolist() == [1.0]
    assert inner.calls == 1


def test_a_bad_call_is_answered_and_counted():
    _, backend = _backend(["<call>mul 1</call>", "Answer: 5"])
    out = backend.rollout([PROBLEM], [[0]], 1, PARAMS)
    assert out.extras["tool_errors"].tolist() == [1.0]
    assert "<result>error: unknown tool 'mul'; the tools: ['add']</result>" in out.texts[0]


def test_a_long_answer_is_cut_and_says_so():
    _, backend = _backend(["<call>echo " + "x" * 40 + "</call>", "ok"], tools=("echo",), max_tool_tokens=8)
    out = backend.rollout([PROBLEM], [[0]], 1, PARAMS)
    assert "<result>xxxxxxxx [truncated: 40 tokens, 8 kept]</result>" in out.texts[0]
    assert out.extras["obs_truncated"].tolist() == [1.0]


TOOLS_TEMPLATE = (
    "{% if tools %}<|tools|>{{ tools | tojson }}<eos>\n{% endif %}"
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<eos>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def test_a_template_that_renders_tools_gets_hermes_and_its_tool_turns():
    tok = char_tokenizer()
    assert tool_format(tok) == "plain"  # the character model's template renders no tools
    tok.chat_template = TOOLS_TEMPLATE
    assert tool_format(tok) == "hermes"
    tools = [load_tools([f"{M}:add"])[0].schema]
    ids, cut = ObservationRender(tok, tools, fmt="hermes")([{"role": "tool", "content": "5"}])
    # after the assistant's EOS: the rest of its line, the tool turn, the next assistant's generation prompt
    assert tok.decode(ids) == "\n<|tool|>5<eos>\n<|assistant|>" and cut == 0
