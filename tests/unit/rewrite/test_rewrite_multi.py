"""Multi-pattern rewrites (TENSAT §2.4 semantics)."""

from __future__ import annotations

import numpy as np
import pytest

from tensor_eqsat.egraph import EGraph, find_cycle, from_graph
from tensor_eqsat.ir import Graph, run
from tensor_eqsat.rewrite import MultiRewrite, apply_rule, canonical_form, parse_pattern
from tensor_eqsat.rewrite.pattern import PatternError

_BODY = "(split axis=1 sizes=[(dim ?w1 1) (dim ?w2 1)] (matmul ?x (concat axis=1 ?w1 ?w2)))"
TARGETS = (f"(get index=0 {_BODY})", f"(get index=1 {_BODY})")
SOURCES = ("(matmul ?x ?w1)", "(matmul ?x ?w2)")


def merge_rule(symmetric: bool = True) -> MultiRewrite:
    return MultiRewrite.parse("matmul-merge", SOURCES, TARGETS, symmetric=symmetric)


def shared_input_graph(n: int = 2, widths=(3, 5, 2, 4)) -> Graph:
    g = Graph()
    x = g.input((6, 4), name="x")
    outs = [g.relu(g.matmul(x, g.weight((4, widths[i]), name=f"w{i}"))) for i in range(n)]
    g.output(*outs)
    return g


def newest_choice(eg: EGraph) -> dict:
    return {c.id: c.nodes[-1] for c in eg.classes()}


def test_two_matmuls_sharing_an_input_merge_over_a_concatenated_weight():
    g = shared_input_graph(2)
    eg = from_graph(g)
    report = apply_rule(eg, merge_rule())
    assert (report.matches, report.applied, report.nodes_added) == (1, 1, 5)
    eg.check()
    merged = eg.to_graph(newest_choice(eg))
    assert merged.op_counts() == {"concat": 1, "matmul": 1, "split": 1, "relu": 2}
    concat = next(n for n in merged.nodes if n.op == "concat")
    assert concat.shapes == ((4, 8),)
    for want, got in zip(run(g), run(merged), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_symmetric_rules_try_unordered_pairs_and_asymmetric_rules_the_product():
    g = shared_input_graph(3)
    sym = apply_rule(from_graph(g), merge_rule(symmetric=True))
    asym = apply_rule(from_graph(g), merge_rule(symmetric=False))
    assert (sym.matches, sym.applied) == (3, 3)
    assert (asym.matches, asym.applied) == (6, 6)


def test_shared_variables_must_bind_the_same_class():
    g = Graph()
    x = g.input((6, 4), name="x")
    y = g.input((6, 4), name="y")
    g.output(g.matmul(x, g.weight((4, 3))), g.matmul(y, g.weight((4, 5))))
    eg = from_graph(g)
    rule = merge_rule()
    assert rule.search(eg) == [] and not rule.has_match(eg)
    assert not apply_rule(eg, rule).changed


def test_shared_attribute_variables_must_agree():
    g = Graph()
    x = g.input((6, 4), name="x")
    g.output(
        g.matmul(x, g.weight((4, 3)), activation="relu"),
        g.matmul(x, g.weight((4, 5)), activation="relu"),
        g.matmul(x, g.weight((4, 2)), activation="tanh"),
    )
    rule = MultiRewrite.parse(
        "act-merge",
        ("(matmul activation=?a ?x ?w1)", "(matmul activation=?a ?x ?w2)"),
        tuple(t.replace("(matmul ?x", "(matmul activation=?a ?x") for t in TARGETS),
        symmetric=True,
    )
    pairs = rule.search(from_graph(g))
    assert len(pairs) == 1 and pairs[0].subst["a"] == "relu"


def test_pairs_in_the_same_class_are_skipped():
    g = Graph()
    x = g.input((6, 4), name="x")
    w = g.weight((4, 3))
    g.output(g.matmul(x, w))
    eg = from_graph(g)
    # One match only; pairing it with itself is never tried.
    assert merge_rule(symmetric=False).search(eg) == []


def test_shape_failures_reject_the_pair_before_adding_anything():
    g = Graph()
    x = g.input((1, 4, 8, 8), name="x")
    g.output(g.conv2d(x, g.weight((4, 4, 3, 3))), g.conv2d(x, g.weight((4, 4, 1, 1))))
    eg = from_graph(g)
    # (relu ?w1) hides the concat operand from the join's shape key: the pair is planned.
    body = "(split axis=1 sizes=[(dim ?w1 0) (dim ?w2 0)] (conv2d ?x (concat axis=0 (relu ?w1) ?w2)))"
    rule = MultiRewrite.parse(
        "conv-merge",
        ("(conv2d ?x ?w1)", "(conv2d ?x ?w2)"),
        (f"(get index=0 {body})", f"(get index=1 {body})"),
        symmetric=True,
    )
    n0 = eg.num_enodes
    report = apply_rule(eg, rule)
    assert (report.matches, report.rejected_shape, report.nodes_added) == (1, 1, 0)
    assert eg.num_enodes == n0


def test_the_join_drops_pairs_whose_concat_cannot_type_check_before_planning():
    # 3x3 and 1x1 kernels differ outside the concat axis: the pair is never built.
    g = Graph()
    x = g.input((1, 4, 8, 8), name="x")
    g.output(g.conv2d(x, g.weight((4, 4, 3, 3))), g.conv2d(x, g.weight((4, 4, 1, 1))))
    g.output(g.conv2d(x, g.weight((2, 4, 3, 3))))
    body = "(split axis=1 sizes=[(dim ?w1 0) (dim ?w2 0)] (conv2d ?x (concat axis=0 ?w1 ?w2)))"
    rule = MultiRewrite.parse(
        "conv-merge",
        ("(conv2d ?x ?w1)", "(conv2d ?x ?w2)"),
        (f"(get index=0 {body})", f"(get index=1 {body})"),
        symmetric=True,
    )
    eg = from_graph(g)
    pairs = rule.search(eg)
    assert [(p.subst["w1"], p.subst["w2"]) for p in pairs] and all(
        eg.data(p.subst["w1"]).shape[1:] == eg.data(p.subst["w2"]).shape[1:] for p in pairs
    )
    assert len(pairs) == 1
    report = apply_rule(eg, rule)
    assert (report.matches, report.rejected_shape, report.applied) == (1, 0, 1)
    # Without the shape key, the same pair applies and the other two are planned and rejected.
    loose = from_graph(g)
    rule._concat_keys = ()
    report = apply_rule(loose, rule)
    assert (report.matches, report.rejected_shape, report.applied) == (3, 2, 1)
    assert loose.content_hash() == eg.content_hash()


def test_pair_that_would_close_a_cycle_is_rejected():
    # The second matmul's weight operand depends on the first matmul: merging them would make the
    # first class depend on itself (both orders of the pair).
    g = Graph()
    x = g.input((4, 4), name="x")
    first = g.matmul(x, g.weight((4, 4), name="w"))
    g.output(g.matmul(x, g.relu(first)))
    eg = from_graph(g)
    report = apply_rule(eg, merge_rule(symmetric=False))
    assert (report.matches, report.rejected_cycle, report.applied, report.changed) == (2, 2, 0, False)
    # Without the filter both pairs apply and the e-graph becomes cyclic.
    loose = from_graph(g, cycle_filter=False)
    assert apply_rule(loose, merge_rule(symmetric=False)).applied == 2
    assert find_cycle(loose) is not None


def test_node_budget_stops_between_pairs():
    g = shared_input_graph(4)
    report = apply_rule(from_graph(g), merge_rule(), node_budget=6)
    assert report.budget_exhausted and report.applied == 2 and report.nodes_added == 10


def two_layer_graph() -> Graph:
    """Two inputs, each read by three matmuls: two sites of three pairs each."""
    g = Graph()
    outs = []
    for layer in range(2):
        x = g.input((6, 4), name=f"x{layer}")
        outs += [g.relu(g.matmul(x, g.weight((4, 3 + i), name=f"w{layer}{i}"))) for i in range(3)]
    g.output(*outs)
    return g


def merged_sites(eg: EGraph) -> set[str]:
    """The inputs read by a matmul over a concatenated weight."""
    concats = {c.id for c in eg.classes() if any(n.op == "concat" for n in c.nodes)}
    names = {c.id: str(n) for c in eg.classes() for n in c.nodes if n.op == "input"}
    return {
        names[n.children[0]]
        for c in eg.classes()
        for n in c.nodes
        if n.op == "matmul" and n.children[1] in concats
    }


def test_a_short_budget_spreads_over_the_sites_breadth_first():
    rule = merge_rule()
    assert rule.max_new_nodes == 5  # concat, matmul, split, two gets
    eg = from_graph(two_layer_graph())
    report = apply_rule(eg, rule, node_budget=10)  # room for 2 of the 6 pairs
    assert report.applied == 2 and report.budget_exhausted
    assert len(merged_sites(eg)) == 2  # one merge per site, not two in the first


def test_a_budget_that_holds_every_pair_keeps_the_pairs_order():
    rule = merge_rule()
    roomy, free = from_graph(two_layer_graph()), from_graph(two_layer_graph())
    a = apply_rule(roomy, rule, node_budget=30)
    b = apply_rule(free, rule)
    assert (a.applied, a.nodes_added) == (b.applied, b.nodes_added) == (6, 30)
    assert roomy.content_hash() == free.content_hash()
    order = [p.first.eclass for p in rule.search(from_graph(two_layer_graph()))]
    assert order == sorted(order)  # class order: both pairs of a site's first match come first


def test_conditions_see_both_sources():
    g = shared_input_graph(3, widths=(3, 3, 5, 0))
    rule = MultiRewrite.parse(
        "same-width", SOURCES, TARGETS, ["(== (dim ?w1 1) (dim ?w2 1))"], symmetric=True
    )
    pairs = rule.search(from_graph(g))
    # Classes: x=0, then (weight, matmul, relu) per branch: the 3-wide weights are 1 and 4.
    assert len(pairs) == 1 and {pairs[0].subst["w1"], pairs[0].subst["w2"]} == {1, 4}


def test_construction_errors():
    with pytest.raises(PatternError, match="2 sources and 2 targets"):
        MultiRewrite.parse("r", SOURCES, TARGETS[:1])
    with pytest.raises(PatternError, match=r"target 2 uses \?z"):
        MultiRewrite.parse("r", SOURCES, (TARGETS[0], "(relu ?z)"))
    with pytest.raises(PatternError, match="source 2 must be an op pattern"):
        MultiRewrite(
            "r", [parse_pattern(SOURCES[0]), parse_pattern("?y")], [parse_pattern(t) for t in TARGETS]
        )


def test_canonical_sources_are_searched_once_and_renamed_back():
    rule = MultiRewrite.parse(
        "renamed", ("(matmul ?p ?q)", "(matmul ?q ?r)"), ("(matmul ?p ?q)", "(matmul ?q ?r)")
    )
    assert rule.same_source and rule.shared_vars == ["q"]
    a, _ = canonical_form(parse_pattern("(conv2d activation=?a ?x ?w)"))
    b, _ = canonical_form(parse_pattern("(conv2d activation=?b ?y ?v)"))
    assert a == b
    # ?q is the right operand of the first matmul and the left operand of the second.
    g = Graph()
    x = g.input((4, 4), name="x")
    a_ = g.weight((4, 4), name="a")
    b_ = g.weight((4, 4), name="b")
    g.output(g.matmul(x, a_), g.matmul(a_, b_))
    pairs = rule.search(from_graph(g))
    assert [(p.subst["p"], p.subst["q"], p.subst["r"]) for p in pairs] == [(0, 1, 2)]
