"""Shared test configuration: a fixed hypothesis profile so property tests replay in CI."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ci")

SHARED = Path(__file__).resolve().parents[2] / "shared"


@pytest.fixture
def shared_dir() -> Path:
    """../shared beside the checkout; tests that need it skip with a clear message otherwise."""
    if not SHARED.is_dir():
        pytest.skip(f"reference data not found at {SHARED} (../shared beside the checkout)")
    return SHARED
