"""Fixtures of the cost tests."""

from __future__ import annotations

import pytest

from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.serialize import save


@pytest.fixture
def graph_file(tmp_path):
    """A conv + ReLU graph JSON (the profile commands' input)."""
    g = Graph()
    x = g.input((1, 8, 6, 6), name="x")
    g.output(g.relu(g.conv2d(x, g.weight((8, 8, 3, 3)))))
    path = tmp_path / "g.json"
    save(g, path)
    return path
