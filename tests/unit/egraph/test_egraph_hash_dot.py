"""Content hash (order independence) and DOT rendering."""

from __future__ import annotations

import pytest

from tensor_eqsat.egraph import EGraph, ENode, NoAnalysis, from_graph
from tensor_eqsat.ir import Graph
from tensor_eqsat.rewrite import Rewrite, apply_rule

FUSE = Rewrite.parse("fuse", "(relu (conv2d ?x ?w))", "(conv2d activation=relu ?x ?w)")
COMM = Rewrite.parse("comm", "(ewadd ?a ?b)", "(ewadd ?b ?a)")
RELU_IDEM = Rewrite.parse("relu-idem", "(relu (relu ?x))", "(relu ?x)")


def block() -> Graph:
    g = Graph()
    x = g.input((1, 4, 6, 6), name="x")
    y = g.relu(g.conv2d(x, g.weight((4, 4, 3, 3), name="w")))
    g.output(g.relu(g.relu(g.ewadd(y, x))))
    return g


def test_hash_is_the_same_whatever_the_order_of_rule_applications():
    a = from_graph(block())
    for rule in (FUSE, COMM, RELU_IDEM):
        apply_rule(a, rule)
    b = from_graph(block())
    for rule in (RELU_IDEM, COMM, FUSE):
        apply_rule(b, rule)
    assert a.content_hash() == b.content_hash()
    assert a.num_enodes == b.num_enodes and len(a.blacklist) == len(b.blacklist) == 1


def test_hash_sees_changes_and_the_blacklist():
    eg = from_graph(block())
    h0 = eg.content_hash()
    cp = eg.copy()
    assert cp.content_hash() == h0
    apply_rule(cp, COMM)
    assert cp.content_hash() != h0
    other = eg.copy()
    other.blacklist_node(other.nodes(other.roots[0])[0])
    assert other.content_hash() != h0
    assert eg.content_hash() == h0


def _class_hashes_by_the_general_loop(eg: EGraph) -> dict[int, int]:
    """Every class's hash by the general per-node loop (the reference for the one-node path)."""
    from tensor_eqsat.egraph.hashing import _node_sids

    sids = _node_sids(eg)
    h: dict[int, int] = {}
    for c in sorted(eg._class_nodes, key=eg._height.__getitem__):
        sigs = sorted(
            hash((sids[n], *[h[k] for k in eg._nodes[n][2]]))
            for n in eg._class_nodes[c]
            if n not in eg._blacklist
        )
        h[c] = hash(tuple(sigs))
    return h


def test_class_hashes_match_the_general_loop_with_blacklisted_one_node_classes():
    from tensor_eqsat.egraph.hashing import _dag_hashes

    eg = from_graph(block())
    for rule in (FUSE, COMM, RELU_IDEM):
        apply_rule(eg, rule)
    eg.blacklist_node(eg.nodes(eg.roots[0])[0])
    eg.rebuild()
    one_node = [c for c, ns in eg._class_nodes.items() if len(ns) == 1]
    assert len(one_node) < eg.num_classes and eg.blacklist  # both paths and a blacklist are used
    assert _dag_hashes(eg) == _class_hashes_by_the_general_loop(eg)


def test_hash_depends_on_names_and_attributes():
    def one(name: str, act: str) -> int:
        g = Graph()
        x = g.input((2, 2), name=name)
        g.output(g.matmul(x, x, activation=act))
        return from_graph(g).content_hash()

    assert one("x", "none") == one("x", "none")
    assert len({one("x", "none"), one("y", "none"), one("x", "relu")}) == 3


def test_dot_has_one_cluster_per_class_and_marks_blacklisted_nodes():
    eg = from_graph(block())
    apply_rule(eg, RELU_IDEM)
    text = eg.to_dot()
    assert text.startswith('digraph "egraph" {') and text.rstrip().endswith("}")
    assert text.count("subgraph cluster_") == eg.num_classes
    assert text.count("lhead=cluster_") == sum(len(n.children) for c in eg.classes() for n in c.nodes)
    assert text.count('style=dashed, color="grey"') == len(eg.blacklist) == 1
    assert "(1, 4, 6, 6)" in text and "style=bold" in text


def test_dot_refuses_big_egraphs():
    eg = EGraph(NoAnalysis())
    prev = eg.add(ENode("leaf", (), ()))
    for _ in range(10):
        prev = eg.add(ENode("f", (), (prev,)))
    with pytest.raises(ValueError, match="more than max_classes=5"):
        eg.to_dot(max_classes=5)
