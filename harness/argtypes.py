"""argparse value types the command lines share (`harness`, `harness bench`)."""

from __future__ import annotations

import argparse


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
