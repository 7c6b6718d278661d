"""Code of the user's that exits instead of returning: os._exit turned into an exception while it runs.

    with no_os_exit():          # around a user's code: a reward function, a plugin module's import
        out = fn(prompt, completion, answer, row)
    # sys.exit(n) -> SystemExit, os._exit(n) -> CalledOsExit: the caller names the code and what it did
    # (what_it_did), as for code that raises.

`os._exit` ends a process at once, with no exception to catch; `no_os_exit` turns it into an exception for
the duration of the call, in this process only (a process the code forks exits as it asks). Used by the
reward functions (harness/tasks/rewards/) and the objective's plugins (harness/objective/plugins.py).
"""

from __future__ import annotations

import os


class CalledOsExit(BaseException):
    """A user's function called os._exit(code) (a BaseException, as SystemExit is)."""

    def __init__(self, code):
        super().__init__(code)
        self.code = code


class no_os_exit:  # noqa: N801 -- used as a statement: `with no_os_exit():`
    """Within it, os._exit in this process raises CalledOsExit instead of ending the process."""

    def __enter__(self) -> no_os_exit:
        self._real, pid = os._exit, os.getpid()
        real = self._real

        def guarded(code):
            if os.getpid() != pid:  # a child the function forked: it exits as asked
                real(code)
            raise CalledOsExit(code)

        os._exit = guarded
        return self

    def __exit__(self, *exc) -> None:
        os._exit = self._real


def what_it_did(err: BaseException) -> str:
    """What a user's function did instead of returning, in words: 'called sys.exit(0)', 'raised ValueError: ...'."""
    if isinstance(err, SystemExit):
        return f"called sys.exit({'' if err.code is None else repr(err.code)})"
    if isinstance(err, CalledOsExit):
        return f"called os._exit({err.code!r})"
    return f"raised {type(err).__name__}: {' '.join(str(err).split())}"
