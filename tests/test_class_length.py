"""No class under harness/ is longer than MAX_LINES lines (docs/architecture.md, "Habits").

A class's length is measured with `ast` from its `class` line to its last line, docstring, comments and blank
lines included, on the formatted source. A class over it is split where its concerns part (loading vs.
scoring, engine start vs. weight sync vs. generation, a run's start vs. its loop vs. its checkpoints), not
cut in two: each part a module named for what it holds.

SPLIT_ELSEWHERE: classes a branch in flight is splitting (empty while none is). Each must still be over the limit
where it is named here: once split, the entry fails the test and is removed.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 150
SPLIT_ELSEWHERE: set[str] = set()


def class_lengths(files: list[Path], root: Path = ROOT) -> dict[str, int]:
    """'path name' -> its length in lines, for every class of `files`."""
    out = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ClassDef):
                out[f"{path.relative_to(root)} {node.name}"] = node.end_lineno - node.lineno + 1
    return out


def test_no_class_over_the_limit():
    lengths = class_lengths(sorted((ROOT / "harness").rglob("*.py")))
    long = {k: n for k, n in lengths.items() if n > MAX_LINES and k not in SPLIT_ELSEWHERE}
    assert not long, f"classes over {MAX_LINES} lines (split them where their concerns part): {long}"
    done = {k for k in SPLIT_ELSEWHERE if lengths.get(k, 0) <= MAX_LINES}
    assert not done, f"no longer over {MAX_LINES} lines (or gone): remove them from SPLIT_ELSEWHERE: {sorted(done)}"


def test_the_measure_can_fail(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(149))
    at_limit = tmp_path / "at_limit.py"
    at_limit.write_text(f'class C:\n    """doc"""\n{body}\n')  # 1 + 1 + 149 lines = 151
    assert class_lengths([at_limit], tmp_path) == {"at_limit.py C": 151}
