"""Fixtures of the integration tests (a module's own fixture of the same name takes precedence)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tensor_eqsat import zoo
from tensor_eqsat.ir.serialize import save


@pytest.fixture
def graph_file(tmp_path: Path) -> Path:
    """A small SqueezeNet as graph JSON."""
    path = tmp_path / "squeeze.json"
    save(zoo.get("squeezenet", image=47, width_divisor=8, classes=10), path)
    return path
