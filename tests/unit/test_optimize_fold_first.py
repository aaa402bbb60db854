"""The fold-first phase of :func:`tensor_eqsat.optimize.optimize` (``OptimizeConfig.fold_first``):
batch norm folded everywhere before the search, as rules in the e-graph."""

from __future__ import annotations

import numpy as np
import pytest

from tensor_eqsat.egraph.egraph import EGraph
from tensor_eqsat.errors import ConfigError
from tensor_eqsat.ir import Graph
from tensor_eqsat.ir.interpreter import run as run_graph
from tensor_eqsat.optimize import optimize
from tensor_eqsat.rules.sets import FOLD_FIRST, load_rule_set

RULES = load_rule_set("taso-inference")


def inception(branches: int = 2) -> Graph:
    """``branches`` 1x1 convs of one input, each followed by batch norm and ReLU."""
    rng = np.random.default_rng(0)
    g = Graph()
    x = g.input((1, 16, 8, 8), name="x")
    outs = []
    for k in range(branches):
        w = g.weight((8, 16, 1, 1), name=f"w{k}", data=rng.standard_normal((8, 16, 1, 1)).astype(np.float32))
        stats = {
            "g": rng.uniform(0.5, 1.5, 8),
            "b": rng.uniform(-1, 1, 8),
            "m": rng.uniform(-1, 1, 8),
            "v": rng.uniform(0.5, 2.0, 8),
        }
        params = [g.weight((8,), name=f"{n}{k}", data=v.astype(np.float32)) for n, v in stats.items()]
        outs.append(g.relu(g.batchnorm(g.conv2d(x, w), *params)))
    g.output(*outs)
    return g


def counts(result) -> dict[str, int]:
    return {RULES.by_id(i).name: n for i, n in result.rule_counts.items()}


def test_every_batch_norm_is_folded_before_any_search_step():
    # No search iteration at all: what was applied is the fold-first phase alone.
    g = inception(3)
    settings = {
        "search": "saturate",
        "iter_limit": 0,
        "rules": "taso-inference",
        "cost_model": "recorded:h200",
    }
    eg = EGraph.from_graph(g)
    folded = optimize(g, egraph=eg, fold_first=True, **settings)
    assert counts(folded) == {"bn-fold-conv": 1}  # one iteration, as a saturation counts them
    assert len(eg.classes_with_op("bnfold_weight")) == 3  # every batch norm has its folded form
    eg = EGraph.from_graph(g)
    assert optimize(g, egraph=eg, fold_first=False, **settings).rule_counts == {}
    assert eg.classes_with_op("bnfold_weight") == []


def test_folding_first_lets_the_merges_that_carry_the_bias_fire():
    g = inception(2)
    settings = {
        "search": "saturate",
        "rules": "taso-inference",
        "cost_model": "recorded:h200",
        "node_limit": 2000,
    }
    first = optimize(g, fold_first=True, **settings)
    late = optimize(g, fold_first=False, **settings)
    assert counts(first).get("conv-bias-concat-split-shared-input", 0) >= 1, counts(first)
    assert counts(late).get("conv-bias-concat-split-shared-input", 0) == 0, counts(late)
    assert first.speedup_pct > late.speedup_pct
    ops = [n.op for n in first.graph.nodes]
    assert ops.count("conv2d") == 1 and "batchnorm" not in ops
    x = {"x": np.random.default_rng(1).standard_normal((1, 16, 8, 8)).astype(np.float32)}
    want, got = run_graph(g, x), run_graph(first.graph, x)
    for a, b in zip(want, got, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-4)


def test_a_rule_set_without_the_fold_rules_is_searched_as_it_was():
    g = inception(2)
    settings = {"search": "saturate", "iter_limit": 0, "rules": "taso", "cost_model": "recorded:h200"}
    assert optimize(g, fold_first=True, **settings).rule_counts == {}


def test_the_fold_first_rules_are_in_the_inference_set():
    names = {r.name for r in RULES}
    assert set(FOLD_FIRST) <= names


def test_fold_first_is_a_setting():
    with pytest.raises((ConfigError, TypeError)):
        optimize(inception(1), fold_firstt=True)
