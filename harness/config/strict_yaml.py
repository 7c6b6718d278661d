"""Reading YAML strictly: the one reader of run configs and study files (harness/experiment/load.py). A key
given twice in one mapping, an empty file, bytes that are not UTF-8 and YAML syntax errors are errors
naming the file and line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from harness.config.base import ConfigError


class DuplicateKeyError(yaml.MarkedYAMLError):
    """A key given twice in one YAML mapping."""


class StrictLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a key given twice in one mapping (PyYAML keeps the last one
    silently). Merge keys (`<<: *anchor`) may still be overridden by the mapping's own keys."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node.start_mark)
                except TypeError:  # an unhashable key: SafeLoader's own error follows
                    continue
                if first is not key_node.start_mark:
                    raise DuplicateKeyError(
                        None,
                        None,
                        f"duplicate key {key!r} (first given at line {first.line + 1}; "
                        "a YAML mapping takes each key once)",
                        key_node.start_mark,
                    )
        return super().construct_mapping(node, deep)


def _yaml_problem(err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    context, cmark = getattr(err, "context", None), getattr(err, "context_mark", None)
    ctx = f" ({context}{f' at line {cmark.line + 1}' if cmark is not None else ''})" if context else ""
    return f"{where}{problem}{ctx}"


def yaml_loads(text: str, source: str, error: type[Exception] = None) -> Any:
    """Parse YAML text strictly (StrictLoader); a syntax error or duplicate key raises `error`
    (default ConfigError) naming `source` and the line."""
    error = error or ConfigError
    try:
        return yaml.load(text, Loader=StrictLoader)  # noqa: S506 -- StrictLoader is a SafeLoader
    except DuplicateKeyError as err:
        raise error(f"{source}: {_yaml_problem(err)}") from None
    except yaml.YAMLError as err:
        raise error(f"{source}: not valid YAML: {_yaml_problem(err)}") from None


def read_yaml(path: str | Path, what: str = "run config", error: type[Exception] = None) -> Any:
    """The one reader of run configs and study files: strict YAML (no duplicate keys), UTF-8,
    not empty; every problem raises `error` (default ConfigError) naming the file and line."""
    error = error or ConfigError
    p = Path(path)
    if not p.exists():
        raise error(f"{what} file {str(p)!r} does not exist")
    if not p.is_file():
        raise error(f"{what} {str(p)!r} is not a file")
    try:
        raw = p.read_bytes()
    except OSError as err:
        raise error(f"{p}: cannot read the {what}: {err.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise error(
            f"{p}: the {what} is not UTF-8 text (byte 0x{raw[err.start]:02x} on line {line}); save it as UTF-8"
        ) from None
    data = yaml_loads(text, str(p), error)
    if data is None:
        raise error(
            f"{p}: the {what} is empty; write the keys to set (a file that only restates "
            "the defaults must say so, e.g. `seed: 0`)"
        )
    return data
