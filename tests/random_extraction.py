"""Random extractions of a saturated e-graph: one e-node per class at random must compute what the
original graph computes (the rules' right sides are exact in the engine, not only on paper)."""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from tensor_eqsat.egraph.convert import to_graph
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.interpreter import run


def differing_random_extractions(graph: Graph, egraph: Any, choices: int, label: str) -> int:
    """Extract ``choices`` random graphs (seeds 0..choices-1) from ``egraph``; assert each has the
    original's output shapes and values (within 1e-4 of the largest magnitude); return how many
    differ from the original in their op counts."""
    expected = run(graph, seed=1)
    different = 0
    for seed in range(choices):
        rng = random.Random(seed)
        choice = {}
        for cid in egraph.class_ids():
            nodes = [n for n in egraph.nodes(cid) if not egraph.is_blacklisted(n)]
            choice[cid] = rng.choice(nodes)
        extracted = to_graph(egraph, choice)
        different += extracted.op_counts() != graph.op_counts()
        for a, b in zip(expected, run(extracted, seed=1), strict=True):
            assert a.shape == b.shape
            scale = max(1.0, float(np.max(np.abs(a))))
            assert float(np.max(np.abs(a - b))) <= 1e-4 * scale, f"{label}, choice seed {seed}"
    return different
