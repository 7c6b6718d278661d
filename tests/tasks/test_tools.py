"""Tools (task.tools): schemas from type hints and docstrings, calls parsed from the model's text, every failure
of a tool an answer the model reads (harness/tasks/tools/)."""

from __future__ import annotations

import pytest

from harness.tasks.tools import BadCall, Call, ToolRunner, ToolSession, load_tools, parse_calls
from harness.tasks.tools.examples import calculator

M = "tests.tasks.user_tools"


def test_the_schema_is_transformers_from_hints_and_docstring():
    (tool,) = load_tools([f"{M}:add"])
    assert tool.name == "add"
    assert tool.schema == {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {
                    "a": {"type": "integer", "description": "the first"},
                    "b": {"type": "integer", "description": "the second"},
                },
                "required": ["a", "b"],
            },
            "return": {"type": "string"},
        },
    }


@pytest.mark.parametrize(
    "specs, needles",
    [
        ([f"{M}:no_hints"], ["task.tools[0]", "no_hints", "type hint"]),
        ([f"{M}:no_doc"], ["task.tools[0]", "no_doc", "docstring"]),
        ([f"{M}:add", "nope_module:f"], ["task.tools[1]", "'nope_module' does not import"]),
        ([f"{M}:missing"], ["task.tools[0]", "has no 'missing'"]),
        ([f"{M}:add", f"{M}:add"], ["task.tools[1]", "also task.tools[0]"]),
        (["justaname"], ["task.tools[0]", "module.path:function"]),
    ],
)
def test_a_tool_that_does_not_fit_is_refused_naming_it(specs, needles):
    with pytest.raises(ValueError) as e:
        load_tools(specs)
    for n in needles:
        assert n in str(e.value), str(e.value)


TOOLS = load_tools([f"{M}:add", f"{M}:echo"])


@pytest.mark.parametrize(
    "text, fmt, want",
    [
        ("no call here", "hermes", []),
        ('x <tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>', "hermes", [Call("add", {"a": 1, "b": 2})]),
        ('<tool_call>{"name": "add", "arguments": "{\\"a\\": 1, \\"b\\": 2}"}</tool_call>', "hermes", [Call("add", {"a": 1, "b": 2})]),
        ('<tool_call>{"name": "echo", "arguments": {"text": "a"}}</tool_call><tool_call>{"name": "echo", "arguments": {"text": "b"}}</tool_call>',
         "hermes", [Call("echo", {"text": "a"}), Call("echo", {"text": "b"})]),
        ("<call>echo hello world</call>", "plain", [Call("echo", {"text": "hello world"})]),
        ('<call>add {"a": 3, "b": 4}</call>', "plain", [Call("add", {"a": 3, "b": 4})]),
        ('<call>add {"a": "3", "b": " 4"}</call>', "plain", [Call("add", {"a": 3, "b": 4})]),  # cast by the schema
    ],
)  # fmt: skip
def test_calls_are_parsed(text, fmt, want):
    assert parse_calls(text, fmt, TOOLS) == want


@pytest.mark.parametrize(
    "text, fmt, reason",
    [
        ("<tool_call>{not json}</tool_call>", "hermes", "not JSON"),
        ('<tool_call>{"arguments": {}}</tool_call>', "hermes", '"name"'),
        ('<tool_call>{"name": "add", "arguments": [1]}</tool_call>', "hermes", "not a JSON object"),
        ('<tool_call>{"name": "add", "arguments": {"a": 1}', "hermes", "no closing </tool_call>"),
        ('<tool_call>{"name": "mul", "arguments": {}}</tool_call>', "hermes", "unknown tool 'mul'"),
        ('<tool_call>{"name": "add", "arguments": {"a": 1, "c": 2}}</tool_call>', "hermes", "unknown: ['c'], missing: ['b']"),
        ("<call>add 1 2</call>", "plain", "add takes 2 arguments"),
        ('<call>add {"a": "x", "b": 1}</call>', "plain", "a='x' is not a integer"),
        ("<call></call>", "plain", "no tool name"),
    ],
)  # fmt: skip
def test_a_call_that_does_not_parse_is_a_bad_call(text, fmt, reason):
    (call,) = parse_calls(text, fmt, TOOLS)
    assert isinstance(call, BadCall) and reason in call.reason, call


def _answer(spec: str, workers: int = 0, timeout: float = 2.0):
    runner = ToolRunner(load_tools([spec]), timeout=timeout, workers=workers)
    try:
        return runner.run_many([Call(spec.split(":")[1], {"x": 1})] * (2 if workers else 1))
    finally:
        runner.close(kill=True)


@pytest.mark.parametrize(
    "name, needle",
    [
        ("boom", "error: boom raised ZeroDivisionError: no"),
        ("leave", "error: leave called sys.exit(3)"),
        ("hard_exit", "error: hard_exit called os._exit(4)"),
        ("number", "error: number returned a int, not a string"),
    ],
)
def test_a_failing_tool_is_an_error_the_model_reads(name, needle):
    (answer,) = _answer(f"{M}:{name}")
    assert answer.error and answer.text == needle


def test_a_hanging_tool_runs_out_of_time():
    (answer,) = _answer(f"{M}:hang", timeout=0.2)
    assert answer.error and "ran over its time limit (0.2 s)" in answer.text


def test_a_call_with_arguments_the_function_does_not_take_is_an_error():
    runner = ToolRunner(load_tools([f"{M}:add"]), timeout=1.0)
    (answer,) = runner.run_many([Call("add", {"a": 1})])
    assert answer.error and answer.text.startswith("error: add: missing a required argument")


def test_a_tool_that_kills_its_worker_is_an_error_and_the_pool_comes_back():
    runner = ToolRunner(load_tools([f"{M}:suicide", f"{M}:add"]), timeout=2.0, workers=2)
    try:
        answers = runner.run_many([Call("suicide", {"x": 1}), Call("suicide", {"x": 1})])
        assert all(a.error and "killed its process" in a.text for a in answers), answers
        again = runner.run_many([Call("add", {"a": 1, "b": 2}), Call("add", {"a": 3, "b": 4})])
        assert [a.text for a in again] == ["3", "7"]
    finally:
        runner.close(kill=True)


def test_the_plain_session_describes_the_tools_and_answers_calls():
    from harness.tasks.base import Problem

    session = ToolSession(ToolRunner(load_tools([f"{M}:add"]), 1.0), "plain")
    first = session.reset(Problem("u", "2+3=?\n", "5", "easy"))
    assert first.endswith("add(a: integer, b: integer): Add two integers.\n2+3=?\n")
    reply = session.step('<call>add {"a": 2, "b": 3}</call>')
    assert reply.messages == [{"role": "tool", "content": "5"}] and not reply.done
    assert (reply.calls, reply.errors) == (1, 0)
    bad = session.step("<call>mul 1</call>")
    assert bad.errors == 1 and "unknown tool 'mul'" in bad.messages[0]["content"]
    assert session.step("Answer: 5").done


def test_the_calculator_example():
    assert calculator("12*34-5") == "403" and calculator(" -3+2*(4-1) ") == "3"
    with pytest.raises(ValueError):
        calculator("2**10")
