"""Fixtures for the experiment-layer tests; helpers live in study_helpers.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from study_helpers import REPO


@pytest.fixture
def repo() -> Path:
    return REPO
