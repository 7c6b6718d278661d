"""argparse value types the command lines share (`harness`, `harness bench`)."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1 (got {value})")
    return value


def int_list(text: str) -> list[int]:
    """argparse type: "1,8,64" -> [1, 8, 64], each >= 1."""
    return [positive_int(t.strip()) for t in text.split(",") if t.strip()]


def out_dir(text: str) -> str:
    """argparse type: a folder to write into, created if missing: not a file, and creatable (a folder is made
    and removed in its nearest existing ancestor, which tells more than permission bits do: /proc, root)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path; name a folder (it is created if missing)")
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a file, not a folder; name a folder (it is created if missing)")
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} cannot be created: {str(probe)!r} is a file, not a folder")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".harness-probe-", dir=probe))
    except OSError as err:
        raise argparse.ArgumentTypeError(
            f"{text!r} cannot be created in {str(probe)!r} ({err.strerror or err}); name a folder you can write"
        ) from None
    return text
