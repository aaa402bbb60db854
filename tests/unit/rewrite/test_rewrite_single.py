"""Single-pattern rewrites on tensor e-graphs: construction checks, CheckApply, reports."""

from __future__ import annotations

import numpy as np
import pytest

from tensor_eqsat.egraph import EGraph, ENode, find_cycle, from_graph
from tensor_eqsat.ir import Graph, run
from tensor_eqsat.rewrite import Rewrite, apply_rule, parse_pattern
from tensor_eqsat.rewrite.pattern import PatternError


def conv_relu_graph() -> Graph:
    g = Graph()
    x = g.input((1, 4, 8, 8), name="x")
    w = g.weight((4, 4, 3, 3), name="w")
    g.output(g.relu(g.conv2d(x, w)))
    return g


def test_construction_validates_variables():
    with pytest.raises(PatternError, match=r"right-hand side uses \?z"):
        Rewrite.parse("r", "(ewadd ?x ?y)", "(ewadd ?x ?z)")
    with pytest.raises(PatternError, match=r"attribute \?a"):
        Rewrite.parse("r", "(relu ?x)", "(matmul activation=?a ?x ?x)")
    with pytest.raises(PatternError, match=r"condition 1 uses unbound \?q"):
        Rewrite.parse("r", "(relu ?x)", "(tanh ?x)", ["(== (dim ?q 0) 1)"])
    with pytest.raises(PatternError, match="must be an op pattern"):
        Rewrite("r", parse_pattern("?x"), parse_pattern("(relu ?x)"))
    with pytest.raises(PatternError, match="both a tensor and an attribute"):
        Rewrite.parse("r", "(conv2d activation=?x ?x ?w)", "(conv2d ?x ?w)")
    with pytest.raises(PatternError, match="rule r: left-hand side: column"):
        Rewrite.parse("r", "(relu ?x", "(tanh ?x)")


def test_conv_relu_fusion_adds_one_node_and_keeps_semantics():
    g = conv_relu_graph()
    eg = from_graph(g)
    rule = Rewrite.parse("fuse", "(relu (conv2d ?x ?w))", "(conv2d activation=relu ?x ?w)")
    report = apply_rule(eg, rule)
    assert (report.matches, report.applied, report.nodes_added, report.changed) == (1, 1, 1, True)
    root = eg.nodes(eg.roots[0])
    assert [n.op for n in root] == ["relu", "conv2d"]
    fused = eg.to_graph({c.id: c.nodes[-1] for c in eg.classes()})
    assert fused.op_counts() == {"conv2d": 1}
    assert np.allclose(run(g)[0], run(fused)[0], atol=1e-5)
    again = apply_rule(eg, rule)
    assert (again.matches, again.applied, again.changed) == (1, 0, False)
    eg.check()


def test_check_apply_skips_matches_whose_rhs_does_not_type_check():
    g = Graph()
    a = g.input((2, 3), name="a")
    b = g.weight((3, 4), name="b")
    c = g.input((3, 3), name="c")
    g.output(g.matmul(a, b), g.matmul(c, c))
    eg = from_graph(g)
    n0 = eg.num_enodes
    swap = Rewrite.parse("swap", "(matmul ?x ?y)", "(matmul ?y ?x)")
    report = apply_rule(eg, swap)
    # (2,3)x(3,4) cannot be swapped; (3,3)x(3,3) swaps to itself.
    assert (report.matches, report.rejected_shape, report.applied, report.nodes_added) == (2, 1, 0, 0)
    assert eg.num_enodes == n0


def test_attribute_expression_failures_reject_the_match():
    g = Graph()
    x = g.input((2, 6), name="x")
    g.output(g.relu(x))
    eg = from_graph(g)
    # sizes must be >= 1: (sub (dim ?x 1) 6) is 0, an invalid attribute value.
    rule = Rewrite.parse(
        "bad-split", "(relu ?x)", "(relu (get index=0 (split axis=1 sizes=[6 (sub (dim ?x 1) 6)] ?x)))"
    )
    report = apply_rule(eg, rule)
    assert report.rejected_shape == 1 and not report.changed


def test_conditions_filter_matches():
    g = Graph()
    a = g.input((2, 3), name="a")
    b = g.input((3, 3), name="b")
    g.output(g.relu(a), g.relu(b))
    eg = from_graph(g)
    square = Rewrite.parse("square-only", "(relu ?x)", "(tanh ?x)", ["(== (dim ?x 0) (dim ?x 1))"])
    assert [m.eclass for m in square.search(eg)] == [eg.roots[1]]
    assert square.has_match(eg)
    report = apply_rule(eg, square)
    assert report.matches == 1 and report.nodes_added == 1

    def never(egraph, eclass, subst):
        return False

    assert not Rewrite.parse("never", "(relu ?x)", "(tanh ?x)", [never]).has_match(eg)


def test_node_budget_and_match_limit_stop_early():
    g = Graph()
    xs = [g.input((2, 2), name=f"x{i}") for i in range(6)]
    g.output(*(g.ewadd(xs[i], xs[i + 1]) for i in range(5)))
    eg = from_graph(g)
    comm = Rewrite.parse("comm", "(ewadd ?a ?b)", "(ewadd ?b ?a)")
    r = apply_rule(eg.copy(), comm, match_limit=2)
    assert (r.matches, r.nodes_added) == (2, 2)
    r = apply_rule(eg, comm, node_budget=3)
    assert r.budget_exhausted and (r.matches, r.nodes_added) == (3, 3)


def test_rhs_existing_class_unions_without_new_nodes():
    g = Graph()
    a = g.input((2, 2), name="a")
    b = g.input((2, 2), name="b")
    g.output(g.ewadd(a, b), g.ewadd(b, a))
    eg = from_graph(g)
    r = apply_rule(eg, Rewrite.parse("comm", "(ewadd ?x ?y)", "(ewadd ?y ?x)"))
    assert r.nodes_added == 0 and r.applied == 1 and r.changed
    assert eg.roots[0] == eg.roots[1]


def test_stale_match_on_a_node_blacklisted_meanwhile_is_skipped():
    g = conv_relu_graph()
    eg = from_graph(g)
    rule = Rewrite.parse("fuse", "(relu (conv2d ?x ?w))", "(conv2d activation=relu ?x ?w)")
    matches = rule.search(eg)
    conv = eg.nodes(eg.roots[0])[0].children[0]
    eg.blacklist_node(eg.nodes(conv)[0])
    report = rule.apply(eg, matches)
    assert report.rejected_stale == 1 and not report.changed


def test_identity_rule_unioning_with_a_descendant_stays_acyclic():
    """split(concat(a, b)) -> a unions a class with its own descendant."""
    g = Graph()
    a = g.input((2, 3), name="a")
    b = g.input((2, 5), name="b")
    p, q = g.split(g.concat([a, b], axis=1), axis=1, sizes=(3, 5))
    g.output(g.relu(p), g.relu(q))
    eg = from_graph(g)
    lhs = "(get index={i} (split axis=1 sizes=[(dim ?a 1) (dim ?b 1)] (concat axis=1 ?a ?b)))"
    r0 = Rewrite.parse("split0", lhs.format(i=0), "?a")
    r1 = Rewrite.parse("split1", lhs.format(i=1), "?b")
    assert apply_rule(eg, r0).changed and apply_rule(eg, r1).changed
    assert find_cycle(eg) is None
    eg.check()
    # Extraction through non-blacklisted nodes now reads the inputs directly.
    choice = {}
    for c in eg.classes():
        usable = [n for n in c.nodes if n not in eg.blacklist]
        choice[c.id] = usable[0]
    out = eg.to_graph(choice)
    assert out.op_counts() == {"relu": 2}
    for x, y in zip(run(g), run(out), strict=True):
        assert np.array_equal(x, y)


def test_rhs_using_its_own_target_class_is_rejected_by_the_cycle_filter():
    def build(cycle_filter: bool) -> EGraph:
        eg = EGraph(cycle_filter=cycle_filter)
        x = eg.add(ENode("input", ((2, 2), "x"), ()))
        eg.roots = [eg.add(ENode("relu", (), (x,)))]
        return eg

    # relu(x) => relu(relu(x)): the inner relu(x) is the matched class itself, so the new outer
    # relu would be a node of that class pointing at it.
    grow = Rewrite.parse("grow", "(relu ?x)", "(relu (relu ?x))")
    eg = build(True)
    report = apply_rule(eg, grow)
    assert (report.rejected_cycle, report.nodes_added, report.changed) == (1, 0, False)
    assert find_cycle(eg) is None
    loose = build(False)
    report = apply_rule(loose, grow)
    assert report.nodes_added == 1 and find_cycle(loose) == [loose.roots[0]]


def test_unsound_rule_raises_naming_the_rule_and_adds_nothing():
    from tensor_eqsat.egraph import MergeConflict

    g = Graph()
    a = g.input((2, 3), name="a")
    b = g.input((3, 2), name="b")
    g.output(g.matmul(a, b))
    eg = from_graph(g)
    n0, v0 = eg.num_enodes, eg.version
    # (2,3)x(3,2) is (2,2) but the swapped product is (3,3): the rule is wrong, not the match.
    with pytest.raises(MergeConflict, match="rule swap: right-hand side does not fit e-class 2"):
        apply_rule(eg, Rewrite.parse("swap", "(matmul ?x ?y)", "(matmul ?y ?x)"))
    assert (eg.num_enodes, eg.version) == (n0, v0)
