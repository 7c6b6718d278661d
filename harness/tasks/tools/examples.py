"""Example tools (docs/tasks.md, "Tools and environments"): what a researcher's own tool module looks like.

task:
  name: arithmetic
  options: {calculator: true, max_operand: 999}
  tools: [harness.tasks.tools.examples:calculator]
"""

from __future__ import annotations

import ast
import operator

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}


def calculator(expression: str) -> str:
    """Evaluates + - * on integers.

    Args:
        expression: e.g. 12*34-5
    """
    return str(_value(ast.parse(expression.strip(), mode="eval").body))


def _value(node: ast.AST) -> int:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_value(node.left), _value(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_value(node.operand)
    raise ValueError(f"not an integer expression of + - *: {ast.unparse(node)!r}")
