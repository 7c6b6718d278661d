"""Progress a person can follow: one tqdm line on stderr (done / total, rate, ETA), rewritten in place.

    with progress.bar("train", total=steps, initial=start, unit="step") as b:
        ... b.update()            # one step done
    with progress.bar("eval step 10", total=rows, unit="sample", fed=True):
        ... progress.advance(n)   # n more done, from deeper down (the rollout engine's chunks)

Only when stderr is a terminal and on rank 0 (torchrun's RANK): in logs, CI and Snakemake's log files
nothing is written, and nothing else a run prints changes. While a bar is open, the lines the process
prints to stdout go above it, so a terminal shows the step lines with the progress line under them.
Nothing here reads or changes what a run computes.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable, Iterator

from tqdm import tqdm

_open: list = []  # (bar, fed) of the bars open now, outermost first


class _Off:
    """The bar where progress is off: every call does nothing."""

    n = 0

    def update(self, n: int = 1) -> None:
        pass


OFF = _Off()


def enabled() -> bool:
    """Progress lines are drawn: stderr is a terminal, and this is rank 0 (or no torchrun)."""
    return sys.stderr.isatty() and os.environ.get("RANK", "0") == "0"


class _AboveBars:
    """stdout while a bar is open: whole lines are written above the bars (cleared, then redrawn)."""

    def __init__(self, out):
        self.out, self.buf = out, ""

    def write(self, s: str) -> int:
        self.buf += s
        if "\n" in self.buf:
            done, self.buf = self.buf.rsplit("\n", 1)
            with tqdm.external_write_mode(file=sys.stderr):  # clears the bars drawn on stderr, redraws after
                self.out.write(done + "\n")
                self.out.flush()
        return len(s)

    def flush(self) -> None:
        self.out.flush()

    def close_line(self) -> None:
        """What is left of a line without its newline, written as it is."""
        if self.buf:
            self.out.write(self.buf)
            self.buf = ""

    def __getattr__(self, name):
        return getattr(self.out, name)


@contextlib.contextmanager
def bar(desc: str, total: int | None, initial: int = 0, unit: str = "it", fed: bool = False) -> Iterator:
    """A progress line for `total` units (None: a count and a rate, no ETA), starting at `initial`
    (a resumed run); `fed` (an eval): `advance` moves it while it is the innermost, and its line is
    erased when done, as an inner bar's is (drawn under the outer). Off: OFF, and nothing is written."""
    if not enabled():
        yield OFF
        return
    outer = not _open
    leave = outer and not fed  # a finished run of steps keeps its line; an eval's line is erased
    b = tqdm(total=total, initial=initial, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True, leave=leave)
    _open.append((b, fed))
    above = _AboveBars(sys.stdout) if outer else None
    try:
        with contextlib.redirect_stdout(above) if outer else contextlib.nullcontext():
            yield b
    finally:
        _open.pop()
        b.close()
        if above is not None:
            above.close_line()


def counted(steps: Iterable[int], b) -> Iterator[int]:
    """`steps` as they come, the bar `b` one further after each step's work (when the next is asked for)."""
    for step in steps:
        yield step
        b.update()


def advance(n: int) -> None:
    """The innermost open bar moves `n` units if it is `fed` (a training step's rollouts leave the
    step bar alone); nothing when no bar is open."""
    if _open and _open[-1][1]:
        _open[-1][0].update(n)
