"""Cell ids: `axis=value` joined with `__`; the axis name is the shortest unique dotted suffix of
its key, values are sanitised for paths (`preset=dapo__group_size=8__seed=1`)."""

from __future__ import annotations

import re
from typing import Any

_SAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def format_value(v: Any) -> str:
    """A readable, path-safe rendering of an axis value."""
    if isinstance(v, bool):
        s = "true" if v else "false"
    elif v is None:
        s = "none"
    elif isinstance(v, float):
        s = repr(v)
    elif isinstance(v, dict):
        s = "_".join(f"{format_value(k)}-{format_value(x)}" for k, x in v.items())
    elif isinstance(v, (list, tuple)):
        s = "-".join(format_value(x) for x in v)
    else:
        s = str(v)
    return _SAFE.sub("-", s).strip("-") or "empty"


def short_names(keys: list[str]) -> dict[str, str]:
    """Shortest unique dotted suffix of each key: objective.preset -> preset."""
    out = {}
    for key in keys:
        parts = key.split(".")
        for n in range(1, len(parts) + 1):
            cand = ".".join(parts[-n:])
            if sum(1 for other in keys if other == cand or other.endswith("." + cand)) == 1:
                out[key] = cand
                break
        else:
            out[key] = key
    return out
