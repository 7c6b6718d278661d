"""No function under harness/ is longer than MAX_LINES lines (docs/architecture.md, "Habits").

A function's length is measured with `ast` from its `def` line to its last line (end_lineno - lineno
+ 1): decorators do not count; its docstring, comments and blank lines do (a docstring is read with
the code, and one that needs 30 lines says the function does too much). A nested function counts
inside the function that holds it and on its own. Measured on the formatted source (`make lint`).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 60


def long_functions(files: list[Path], max_lines: int = MAX_LINES) -> list[str]:
    """'path:line name (n lines)' for every function of `files` longer than max_lines."""
    out = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > max_lines:
                    out.append(f"{path}:{node.lineno} {node.name} ({n} lines)")
    return out


def test_no_function_over_the_limit():
    long = long_functions(sorted((ROOT / "harness").rglob("*.py")))
    assert not long, f"functions over {MAX_LINES} lines (split them: one function, one job):\n" + "\n".join(long)


def test_the_measure_can_fail(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(59))
    at_limit = tmp_path / "at_limit.py"
    at_limit.write_text(f'@decorator\ndef f():\n    """doc"""\n{body}\n')  # 1 + 1 + 59 lines = 61
    assert [s.split(" ", 1)[1] for s in long_functions([at_limit])] == ["f (61 lines)"]
    assert long_functions([at_limit], max_lines=61) == []
