"""JSON Lines as the run directory writes them (metrics.jsonl, groups.jsonl, samples.jsonl): one
record per line, appended; a reader stops at a torn last line (a writer killed mid-line)."""

from __future__ import annotations

import json
from pathlib import Path


def read_jsonl(path: str | Path) -> list[dict]:
    """Records of a JSONL file ([] when it does not exist), stopping at a torn last line."""
    path = Path(path)
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            break
    return out
