"""Graph <-> EGraph conversion."""

from __future__ import annotations

import numpy as np
import pytest

from tensor_eqsat.egraph import EGraph, ENode, from_graph
from tensor_eqsat.errors import GraphError
from tensor_eqsat.ir import Graph, run


def first_choice(eg: EGraph) -> dict[int, ENode]:
    return {c.id: c.nodes[0] for c in eg.classes()}


def block_graph() -> Graph:
    g = Graph()
    x = g.input((1, 8, 6, 6), name="x")
    w = g.weight((8, 8, 3, 3), name="w", data=np.full((8, 8, 3, 3), 0.01, dtype=np.float32))
    y = g.conv2d(x, w, activation="relu")
    a, b = g.split(y, axis=1, sizes=(3, 5))
    z = g.concat([g.relu(b), a], axis=1)
    g.output(g.ewadd(z, y), b)
    return g


def test_round_trip_preserves_values_names_and_weight_data():
    g = block_graph()
    eg = EGraph.from_graph(g)
    eg.check()
    assert len(eg.roots) == 2
    g2 = eg.to_graph(first_choice(eg))
    g2.validate()
    assert sorted(g2.name_of(n.id) for n in g2.inputs() + g2.weights()) == ["w", "x"]
    assert np.array_equal(g2.weight_data["w"], g.weight_data["w"])
    for p, q in zip(run(g, seed=3), run(g2, seed=3), strict=True):
        assert np.array_equal(p, q)


def test_split_becomes_tuple_class_with_get_projections():
    eg = from_graph(block_graph())
    splits = [c for c in eg.classes() if c.nodes[0].op == "split"]
    assert len(splits) == 1 and splits[0].data.is_tuple
    gets = [c for c in eg.classes() if c.nodes[0].op == "get"]
    assert sorted(c.nodes[0].attrs for c in gets) == [(0,), (1,)]


def test_identical_nodes_share_a_class():
    g = Graph()
    x = g.input((2, 2), name="x")
    g.output(g.ewadd(g.relu(x), g.relu(x)))
    eg = from_graph(g)
    assert eg.num_classes == 3
    g2 = eg.to_graph(first_choice(eg))
    assert g2.op_counts() == {"relu": 1, "ewadd": 1}
    assert np.array_equal(run(g)[0], run(g2)[0])


def test_same_output_twice_keeps_both_roots():
    g = Graph()
    x = g.input((2, 2), name="x")
    r = g.relu(x)
    g.output(r, r)
    eg = from_graph(g)
    assert eg.roots == [eg.roots[0]] * 2
    assert len(eg.to_graph(first_choice(eg)).outputs) == 2


def test_to_graph_errors_name_the_class():
    g = block_graph()
    eg = from_graph(g)
    choice = first_choice(eg)
    root = eg.roots[0]
    missing = dict(choice)
    del missing[root]
    with pytest.raises(GraphError, match=f"e-class {root} is needed"):
        eg.to_graph(missing)
    wrong = dict(choice)
    wrong[root] = choice[eg.roots[1]]
    with pytest.raises(GraphError, match="is not in e-class"):
        eg.to_graph(wrong)


def test_to_graph_rejects_a_cyclic_choice():
    eg = EGraph(cycle_filter=False)
    x = eg.add(ENode("input", ((2, 2), "x"), ()))
    r = eg.add(ENode("relu", (), (x,)))
    eg.union(r, x)  # relu(x) = x: the class now holds relu(itself)
    eg.rebuild()
    eg.roots = [r]
    c = eg.find(r)
    with pytest.raises(GraphError, match="cyclic"):
        eg.to_graph({c: ENode("relu", (), (c,))})
    assert eg.to_graph({c: ENode("input", ((2, 2), "x"), ())}).op_counts(include_leaves=True) == {"input": 1}
