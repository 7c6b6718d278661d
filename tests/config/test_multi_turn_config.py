"""Multi-turn rollouts' bad input is refused before a model loads, one line naming the key (harness/config/turns.py)."""

from __future__ import annotations

import pytest

from harness.config import ConfigError, load_config

CALC = "experiments/runs/calculator.yaml"
M = "tests.tasks.user_tools"


@pytest.mark.parametrize(
    "path, overrides, needles",
    [
        (CALC, ["task.tools=[nope_tools:calc]"], ["task.tools[0]='nope_tools:calc'", "does not import"]),
        (CALC, [f"task.tools=[{M}:missing]"], ["task.tools[0]", "has no 'missing'"]),
        (CALC, [f"task.tools=[{M}:no_hints]"], ["task.tools[0]", "type hint"]),
        (CALC, [f"task.tools=[{M}:no_doc]"], ["task.tools[0]", "docstring"]),
        (CALC, ["task.tools=[]", f"task.environment={M}:NoStep"], ["task.environment=", "has no step method"]),
        (CALC, [f"task.environment={M}:Guess"], ["task.tools=", "task.environment=", "give one"]),
        (CALC, ["rollout.max_turns=0"], ["rollout.max_turns", "greater than or equal to 1"]),
        (CALC, ["rollout.backend=vllm"], ["task.tools", "rollout.backend='vllm'"]),
        ("experiments/runs/dpo.yaml", [f"task.tools=[{M}:add]"], ["task.tools", "trainer='dpo'"]),
        ("experiments/runs/smoke.yaml", ["rollout.max_turns=2"], ["rollout.max_turns", "task.tools"]),
        ("experiments/runs/smoke.yaml", ["task.tool_workers=2"], ["task.tool_workers", "task.environment"]),
    ],
)
def test_bad_multi_turn_input_is_one_line_naming_the_key(path, overrides, needles):
    with pytest.raises(ConfigError) as e:
        load_config(path, overrides)
    msg = str(e.value)
    assert "\n" not in msg.strip(), msg
    for n in needles:
        assert n in msg, msg


def test_the_example_config_loads():
    cfg = load_config(CALC)
    assert cfg.task.tools == ["harness.tasks.tools.examples:calculator"] and cfg.rollout.max_turns == 3
