"""A rewrite applies only where its two sides have the same dtypes (DESIGN.md decision 17)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tensor_eqsat.egraph import EGraph, ENode
from tensor_eqsat.egraph.convert import from_graph
from tensor_eqsat.ir import opspec
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.interpreter import run
from tensor_eqsat.rewrite.rewrite import Rewrite, apply_rule


@pytest.fixture
def to_half(monkeypatch):
    """An op ``to_half`` that rounds its input to float16 (an op overriding the dtype rule),
    registered for the test only."""
    relu = opspec.lookup("relu")
    spec = dataclasses.replace(
        relu,
        name="to_half",
        compute=lambda x, a: (np.asarray(x[0]),),
        infer_dtype=lambda dtypes, a, n: ("float16",),
        doc="test op: round to float16",
    )
    monkeypatch.setitem(opspec._REGISTRY, "to_half", spec)
    return spec


@pytest.mark.parametrize(("dtype", "applies"), [("float16", True), ("float32", False), ("bfloat16", False)])
def test_a_rule_applies_only_where_both_sides_keep_the_dtype(to_half, dtype, applies):
    # (to_half ?x) => ?x is sound exactly where ?x is float16 already.
    rule = Rewrite.parse("drop-cast", "(to_half ?x)", "?x")
    eg = EGraph()
    x = eg.add(ENode("input", ((2, 2), "x", dtype), ()))
    eg.roots = [eg.add(ENode("to_half", (), (x,)))]
    report = apply_rule(eg, rule)
    assert report.applied == int(applies)
    assert report.rejected_shape == int(not applies)
    assert eg.find(eg.roots[0]) != eg.find(x) or applies
    assert eg.data(eg.roots[0]).dtypes == ("float16",)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_taso_rules_apply_in_reduced_precision_and_keep_the_dtype(dtype):
    g = Graph()
    x = g.input((4, 8), name="x", dtype=dtype)
    w1, w2 = g.weight((8, 8), name="w1", dtype=dtype), g.weight((8, 8), name="w2", dtype=dtype)
    g.output(g.ewadd(g.matmul(x, w1), g.matmul(x, w2)))
    eg = from_graph(g)
    # x W1 + x W2 = x (W1 + W2): one matmul.
    rule = Rewrite.parse("distribute", "(ewadd (matmul ?x ?a) (matmul ?x ?b))", "(matmul ?x (ewadd ?a ?b))")
    assert apply_rule(eg, rule).applied == 1
    eg.rebuild()
    root = eg.find(eg.roots[0])
    choice = {c.id: next(n for n in c.nodes if n not in eg.blacklist) for c in eg.classes()}
    choice[root] = next(n for c in eg.classes() if c.id == root for n in c.nodes if n.op == "matmul")
    out = eg.to_graph(choice)
    assert out.op_counts() == {"ewadd": 1, "matmul": 1}
    assert {d for n in out.nodes for d in n.dtypes} == {dtype}
    (a,), (b,) = run(g), run(out)
    assert np.abs(a.astype(np.float32) - b.astype(np.float32)).max() < 0.1
