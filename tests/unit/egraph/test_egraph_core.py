"""EGraph basics: hash-consing, union/rebuild, congruence, analysis propagation, copies."""

from __future__ import annotations

import pytest

from tensor_eqsat.egraph import EClass, EGraph, ENode, MergeConflict, NoAnalysis, TensorData
from tensor_eqsat.errors import ShapeError


def leaf(eg: EGraph, name: str) -> int:
    return eg.add(ENode(name, (), ()))


def test_add_hash_conses_and_canonicalizes_children():
    eg = EGraph(NoAnalysis())
    a, b = leaf(eg, "a"), leaf(eg, "b")
    f1 = eg.add(ENode("f", (), (a, b)))
    assert eg.add(ENode("f", (), (a, b))) == f1
    assert eg.num_enodes == 3 and eg.num_classes == 3
    eg.union(a, b)
    # Before rebuild, add canonicalizes children and still finds nothing for f(a, a).
    f2 = eg.add(ENode("f", (), (a, a)))
    eg.rebuild()
    assert eg.find(f1) == eg.find(f2)
    assert eg.num_enodes == 3
    eg.check()


def test_congruence_propagates_upwards():
    eg = EGraph(NoAnalysis())
    a, b = leaf(eg, "a"), leaf(eg, "b")
    fa, fb = eg.add(ENode("f", (), (a,))), eg.add(ENode("f", (), (b,)))
    gfa, gfb = eg.add(ENode("g", (), (fa,))), eg.add(ENode("g", (), (fb,)))
    assert eg.find(gfa) != eg.find(gfb)
    eg.union(a, b)
    eg.rebuild()
    assert eg.find(gfa) == eg.find(gfb) and eg.find(fa) == eg.find(fb)
    assert eg.num_classes == 3 and eg.num_enodes == 4
    eg.check()


def test_union_is_idempotent_and_reports_change():
    eg = EGraph(NoAnalysis())
    a, b = leaf(eg, "a"), leaf(eg, "b")
    assert eg.union(a, b) is True
    assert eg.union(b, a) is False
    assert eg.union(a, a) is False


def test_class_nodes_keep_insertion_order_after_union():
    eg = EGraph(NoAnalysis())
    x = leaf(eg, "x")
    n1 = eg.add(ENode("f", (), (x,)))
    n2 = eg.add(ENode("g", (), (x,)))
    n3 = eg.add(ENode("h", (), (x,)))
    eg.union(n3, n1)
    eg.union(n2, n1)
    assert [n.op for n in eg.nodes(n1)] == ["f", "g", "h"]


def test_tensor_analysis_shapes_and_all_weights_propagate():
    eg = EGraph()
    x = eg.add(ENode("input", ((2, 3), "x"), ()))
    w = eg.add(ENode("weight", ((3, 4), "w"), ()))
    v = eg.add(ENode("weight", ((2, 4), "v"), ()))
    m = eg.add(ENode("matmul", ("none",), (x, w)))
    top = eg.add(ENode("relu", (), (m,)))
    assert eg.data(m) == TensorData(((2, 4),), False)
    assert eg.data(w).all_weights and not eg.data(x).all_weights
    # Declaring the matmul equal to a weight makes it, and everything above it, weight-only.
    eg.union(m, v)
    eg.rebuild()
    assert eg.data(m).all_weights and eg.data(top).all_weights
    eg.check()


def test_ill_typed_node_raises_without_changing_the_egraph():
    eg = EGraph()
    x = eg.add(ENode("input", ((2, 3), "x"), ()))
    before = (eg.num_enodes, eg.num_classes, eg.version)
    with pytest.raises(ShapeError, match="matmul"):
        eg.add(ENode("matmul", ("none",), (x, x)))
    assert (eg.num_enodes, eg.num_classes, eg.version) == before


def test_union_of_different_shapes_raises_and_leaves_classes_apart():
    eg = EGraph()
    x = eg.add(ENode("input", ((2, 3), "x"), ()))
    y = eg.add(ENode("input", ((3, 2), "y"), ()))
    with pytest.raises(MergeConflict, match="different shapes"):
        eg.union(x, y)
    assert eg.find(x) != eg.find(y)
    eg.check()


def test_tuple_valued_class_needs_get():
    eg = EGraph()
    x = eg.add(ENode("input", ((4, 6), "x"), ()))
    s = eg.add(ENode("split", (1, (2, 4)), (x,)))
    assert eg.data(s).shapes == ((4, 2), (4, 4)) and eg.data(s).is_tuple
    g1 = eg.add(ENode("get", (1,), (s,)))
    assert eg.data(g1).shape == (4, 4)
    with pytest.raises(ShapeError, match="select one with get"):
        eg.add(ENode("relu", (), (s,)))
    with pytest.raises(ShapeError, match="out of range"):
        eg.add(ENode("get", (2,), (s,)))


def test_classes_snapshot_and_indexing():
    eg = EGraph(NoAnalysis())
    a = leaf(eg, "a")
    f = eg.add(ENode("f", (), (a,)))
    classes = eg.classes()
    assert [c.id for c in classes] == [a, f]
    assert eg[f] == EClass(f, (ENode("f", (), (a,)),), None)
    assert eg.classes() is classes  # cached until a change
    eg.add(ENode("g", (), (a,)))
    assert eg.classes() is not classes
    assert eg.classes_with_op("f") == [f]
    assert f in eg and 99 not in eg


def test_copy_is_independent():
    eg = EGraph(NoAnalysis())
    a, b = leaf(eg, "a"), leaf(eg, "b")
    fa = eg.add(ENode("f", (), (a,)))
    fb = eg.add(ENode("f", (), (b,)))
    eg.roots = [fa, fb]
    cp = eg.copy()
    cp.union(a, b)
    cp.add(ENode("g", (), (a,)))
    cp.rebuild()
    assert cp.find(fa) == cp.find(fb)
    assert eg.find(fa) != eg.find(fb)
    assert eg.num_enodes == 4 and cp.num_enodes == 4  # f(a), f(b) merged; g added
    assert eg.lookup(ENode("g", (), (a,))) is None
    eg.check()
    cp.check()
    # And the other way round: changing the original leaves the copy alone.
    eg.add(ENode("h", (), (b,)))
    assert cp.lookup(ENode("h", (), (b,))) is None


def test_roots_are_canonical_and_validated():
    eg = EGraph(NoAnalysis())
    a, b = leaf(eg, "a"), leaf(eg, "b")
    eg.roots = [b, a]
    eg.union(a, b)
    assert eg.roots == [eg.find(b), eg.find(a)]
    with pytest.raises(ValueError, match="not an e-class"):
        eg.roots = [7]


def test_blacklist_api():
    eg = EGraph(NoAnalysis())
    a = leaf(eg, "a")
    f = ENode("f", (), (a,))
    eg.add(f)
    assert not eg.is_blacklisted(f) and eg.blacklist == frozenset()
    eg.blacklist_node(f)
    assert eg.is_blacklisted(f) and eg.blacklist == frozenset({f})
    with pytest.raises(KeyError, match="not in the e-graph"):
        eg.blacklist_node(ENode("g", (), (a,)))


def test_version_changes_only_on_change():
    eg = EGraph(NoAnalysis())
    a = leaf(eg, "a")
    v = eg.version
    assert leaf(eg, "a") == a and eg.version == v
    eg.rebuild()
    assert eg.version == v
    leaf(eg, "b")
    assert eg.version != v


def test_check_detects_a_broken_invariant():
    eg = EGraph(NoAnalysis())
    a = leaf(eg, "a")
    eg.add(ENode("f", (), (a,)))
    eg._num_enodes += 1
    with pytest.raises(AssertionError, match="node count"):
        eg.check()


def test_egraphs_and_rules_pickle_for_worker_processes():
    import pickle

    from tensor_eqsat.ir import Graph
    from tensor_eqsat.rewrite import MultiRewrite, Rewrite, apply_rule

    g = Graph()
    x = g.input((4, 4), name="x")
    g.output(g.relu(g.matmul(x, g.weight((4, 2)))), g.matmul(x, g.weight((4, 3))))
    eg = EGraph.from_graph(g)
    fuse = Rewrite.parse("fuse", "(relu (matmul ?x ?w))", "(matmul activation=relu ?x ?w)")
    body = "(split axis=1 sizes=[(dim ?a 1) (dim ?b 1)] (matmul ?x (concat axis=1 ?a ?b)))"
    merge = MultiRewrite.parse(
        "merge",
        ("(matmul ?x ?a)", "(matmul ?x ?b)"),
        (f"(get index=0 {body})", f"(get index=1 {body})"),
        symmetric=True,
    )
    eg2, fuse2, merge2 = pickle.loads(pickle.dumps((eg, fuse, merge)))
    assert str(fuse2) == str(fuse) and str(merge2) == str(merge)
    assert eg2.content_hash() == eg.content_hash()
    for e in (eg, eg2):
        apply_rule(e, fuse)
        apply_rule(e, merge2)
        e.check()
    assert eg2.content_hash() == eg.content_hash() and eg2.num_enodes == eg.num_enodes


def test_class_table_flattens_the_classes_in_their_order():
    eg = EGraph(NoAnalysis())
    a, b = leaf(eg, "a"), leaf(eg, "b")
    f = eg.add(ENode("f", (), (a, b)))
    g = eg.add(ENode("g", (), (a,)))
    eg.union(f, g)  # pending until the table rebuilds
    ids, counts, nodes, datas = eg.class_table()
    classes = eg.classes()
    assert ids == [c.id for c in classes] and len(ids) == 3
    assert counts == [len(c.nodes) for c in classes] and sorted(counts) == [1, 1, 2]
    assert nodes == [n for c in classes for n in c.nodes]
    assert datas == [c.data for c in classes]
