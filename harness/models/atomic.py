"""Atomic folder writes: build in a sibling temp folder, then rename into place."""
from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


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
