"""A researcher's own modes, knobs and presets: modules named in YAML (`objective.plugins: [my_variants]`)
and imported before the config that names them is validated (docs/extending.md).

A plugin is a Python module: a name on sys.path (`my_variants`, `my_lab.variants`: the module part of
the `module:function` names the task rewards use), found also in the working directory the command
runs in (the `harness` console script, unlike `python -m`, does not put it on sys.path). Importing it
runs its `register(...)` / `register_preset(...)` calls; what it registers is recorded with the plugin's
name as its origin, so a config that names the plugin carries its knobs (and one that does not,
does not). Every process that validates a config imports the plugins it names (a Snakemake cell
runs `harness train` in its own process: its config names them).
"""

from __future__ import annotations

import importlib
import os
import sys

from harness.objective.modes import loading
from harness.user_exits import CalledOsExit, no_os_exit, what_it_did

_IMPORTED: set[str] = set()


def plugin_names(value: object) -> tuple[str, ...]:
    """`objective.plugins` as a tuple of module names; ValueError naming the key otherwise."""
    if value is None:
        return ()
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"objective.plugins={value!r} must be a list of module names (e.g. [my_variants])")
    for n in names:
        if n.endswith(".py") or not all(part.isidentifier() for part in n.split(".")):
            raise ValueError(
                f"objective.plugins: {n!r} is not a module name (write my_variants or my_lab.variants, "
                "not a file name or path)"
            )
    return tuple(dict.fromkeys(names))


def import_plugins(value: object) -> tuple[str, ...]:
    """Import every plugin module `value` names (once per process) -> their names. A module that does
    not import is a ValueError naming objective.plugins, the module and the reason, in one line."""
    names = plugin_names(value)
    for name in names:
        if name in _IMPORTED:
            continue
        _import(name)
        _IMPORTED.add(name)
    return names


def _import(name: str) -> None:
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)  # after the installed packages: a plugin never shadows one
    try:
        with loading(name), no_os_exit():  # os._exit on import would end the harness silently, with its status
            importlib.import_module(name)
    except (Exception, SystemExit, CalledOsExit) as err:  # noqa: BLE001 -- any failure is the researcher's to fix
        reason = " ".join(f"{type(err).__name__}: {err}".split())
        if isinstance(err, (SystemExit, CalledOsExit)):
            reason = f"it {what_it_did(err)} on import"
        raise ValueError(
            f"objective.plugins: module {name!r} does not import ({reason}); a plugin is a module on "
            f"sys.path or in the working directory {cwd} (docs/extending.md)"
        ) from None
