"""Fixtures for the zoo tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def tensat_data(shared_dir: Path) -> Path:
    """The directory of TENSAT's rule and .model files (skips if ../shared is absent)."""
    path = shared_dir / "reference" / "tensat-data"
    if not path.is_dir():
        pytest.skip(f"TENSAT data not found at {path}")
    return path
