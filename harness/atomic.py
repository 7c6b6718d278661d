"""Atomic writes, the only place the project writes a file or folder by temp-and-rename: a reader
(a resuming run, Snakemake, a second process) sees the old content or the new, never a half."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


def atomic_write(path: str | os.PathLike, write: Callable[[Path], object]) -> None:
    """Call write(tmp) on a temp path beside `path`, then rename it onto `path`
    (e.g. `atomic_write(p, lambda t: torch.save(obj, t))`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write_text(path: str | os.PathLike, text: str, only_if_changed: bool = False) -> bool:
    """Write `text` to `path` atomically; returns True if the file changed. With only_if_changed
    an identical file is left alone (its mtime does not move, so Snakemake reruns nothing)."""
    path = Path(path)
    if only_if_changed and path.is_file() and path.read_text() == text:
        return False
    atomic_write(path, lambda tmp: tmp.write_text(text))
    return True


@contextmanager
def atomic_folder(dest: str | Path, replace: bool = True) -> Iterator[Path]:
    """Yield an empty temp folder next to `dest`; when the block succeeds it becomes `dest`
    (made world-readable), so readers never see a half-written folder. An existing
    `dest` is swapped out when `replace`, else the rename raises OSError (a racing
    writer won). On error the temp folder is deleted and `dest` is untouched."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    try:
        yield tmp
        tmp.chmod(0o755)  # mkdtemp makes 0700, safetensors files come out 0600
        for f in tmp.rglob("*"):
            f.chmod(0o755 if f.is_dir() else 0o644)
        if replace and dest.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-", dir=dest.parent))
            os.rename(dest, old / dest.name)
            os.rename(tmp, dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
