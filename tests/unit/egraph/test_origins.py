"""Which rule application made each e-node (tensor_eqsat.egraph.origins), and the rules an
optimized graph holds (``OptimizeResult.rules_used``) against the rules that changed the e-graph
(``rule_counts``)."""

from __future__ import annotations

from tensor_eqsat.egraph import from_graph
from tensor_eqsat.egraph.origins import applications, merged_counts
from tensor_eqsat.ir import Graph
from tensor_eqsat.optimize import optimize
from tensor_eqsat.rewrite.rewrite import Rewrite, apply_rule
from tensor_eqsat.rules.sets import REAL_MODEL_SET, load_rule_set

COMM = Rewrite.parse("add-comm", "(ewadd ?x ?y)", "(ewadd ?y ?x)")


def _sum_graph() -> tuple[Graph, object]:
    g = Graph()
    a, b = g.input((2, 2), name="a"), g.input((2, 2), name="b")
    g.output(g.ewadd(a, b))
    return g, from_graph(g)


def test_an_application_is_counted_only_when_its_new_node_is_chosen():
    _, eg = _sum_graph()
    a, b = (eg.find(c) for c in eg.classes_with_op("input"))
    original = next(n for _, n in eg.enodes() if n.op == "ewadd")
    assert apply_rule(eg, COMM).changed
    swapped = next(n for _, n in eg.enodes() if n.op == "ewadd" and n != original)
    assert applications(eg, [original]) == {}
    assert applications(eg, [swapped]) == {"add-comm": 1}
    assert {a, b} == {eg.find(c) for c in swapped.children}


def test_a_copy_knows_what_made_its_nodes_and_diverges_on_its_own():
    _, eg = _sum_graph()
    apply_rule(eg, COMM)
    swapped = [n for _, n in eg.enodes() if n.op == "ewadd"][-1]
    twin = eg.copy()
    assert applications(twin, [swapped]) == {"add-comm": 1}
    apply_rule(twin, Rewrite.parse("to-mul", "(ewadd ?x ?y)", "(ewmul ?x ?y)"))
    mul = next(n for _, n in twin.enodes() if n.op == "ewmul")
    assert applications(twin, [mul, swapped]) == {"add-comm": 1, "to-mul": 1}
    assert applications(eg, [mul]) == {}  # the original never saw that application
    eg.assign(twin)  # a search state taken back (MCTS) takes its origins with it
    assert applications(eg, [mul]) == {"to-mul": 1}


def test_the_optimized_graph_names_only_the_rules_it_holds():
    # x@W1 + x@W2: the factoring x@(W1 + W2) wins; merging the two matmuls into one over
    # concat(W1, W2) changes the e-graph too, but the extraction does not choose it.
    g = Graph()
    x = g.input((8, 64), name="x")
    g.output(g.ewadd(g.matmul(x, g.weight((64, 64), name="w1")), g.matmul(x, g.weight((64, 64), name="w2"))))
    r = optimize(g, search="saturate", rules=REAL_MODEL_SET, time_budget=10, seed=0, target="h200")
    names = load_rule_set(r.settings.rules)
    fired = {names.by_id(i).name for i in r.rule_counts}
    assert "matmul-concat-split-shared-lhs" in fired
    assert [n.op for n in r.graph.nodes].count("matmul") == 1 and r.speedup_pct > 0
    assert r.rules_used == {"matmul-ewadd-factor-left-3": 1}
    assert "concat" not in [n.op for n in r.graph.nodes]


def test_a_merge_the_graph_holds_is_named_once_per_application():
    g = Graph()
    x = g.input((8, 64), name="x")
    g.output(g.matmul(x, g.weight((64, 64), name="w1")))
    g.output(g.matmul(x, g.weight((64, 64), name="w2")))
    r = optimize(g, search="mcts", rules=REAL_MODEL_SET, time_budget=10, seed=0, target="h200")
    assert [n.op for n in r.graph.nodes].count("matmul") == 1
    assert r.rules_used == {"matmul-concat-split-shared-lhs": 1}


def test_counts_of_several_results_add_up_by_rule():
    assert merged_counts({"a": 1}, {"a": 2, "b": 1}, {}) == {"a": 3, "b": 1}
