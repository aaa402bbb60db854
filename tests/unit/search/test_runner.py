"""The saturation Runner on tensor e-graphs: multi-rule ordering, budgets, statistics."""

from __future__ import annotations

import pytest

from tensor_eqsat.egraph import find_cycle, from_graph
from tensor_eqsat.ir import Graph
from tensor_eqsat.rewrite import MultiRewrite, Rewrite
from tensor_eqsat.search.runner import Runner, RunnerConfig
from tensor_eqsat.search.stop import StopReason

_BODY = "(split axis=1 sizes=[(dim ?w1 1) (dim ?w2 1)] (matmul ?x (concat axis=1 ?w1 ?w2)))"
MERGE = MultiRewrite.parse(
    "matmul-merge",
    ("(matmul ?x ?w1)", "(matmul ?x ?w2)"),
    (f"(get index=0 {_BODY})", f"(get index=1 {_BODY})"),
    symmetric=True,
)
FUSE = Rewrite.parse("relu-fuse", "(relu (matmul ?x ?w))", "(matmul activation=relu ?x ?w)")
COMM = Rewrite.parse("ewadd-comm", "(ewadd ?a ?b)", "(ewadd ?b ?a)")
ASSOC = Rewrite.parse("ewadd-assoc", "(ewadd ?a (ewadd ?b ?c))", "(ewadd (ewadd ?a ?b) ?c)")


def graph(n: int = 3) -> Graph:
    g = Graph()
    x = g.input((8, 4), name="x")
    outs = [g.relu(g.matmul(x, g.weight((4, 2 + i)))) for i in range(n)]
    g.output(*outs)
    return g


def adds(n: int) -> Graph:
    g = Graph()
    xs = [g.input((2, 2), name=f"x{i}") for i in range(n)]
    acc = xs[0]
    for x in xs[1:]:
        acc = g.ewadd(x, acc)
    g.output(acc)
    return g


def test_multi_rules_run_first_and_only_in_the_first_k_iterations():
    eg = from_graph(graph(3))
    report = Runner([FUSE], [MERGE], k_multi=1).run(eg)
    first, second = report.iterations[0], report.iterations[1]
    assert first.applied == {"matmul-merge": 3, "relu-fuse": 3}
    # The merged matmuls are new matmul matches, but multi rules are done after iteration 0.
    assert "matmul-merge" not in second.matches
    assert report.stop_reason is StopReason.SATURATED
    assert report.applied == {"matmul-merge": 3, "relu-fuse": 3}
    eg.check()


def test_k_multi_zero_disables_multi_rules():
    eg = from_graph(graph(3))
    report = Runner([FUSE], [MERGE], k_multi=0).run(eg)
    assert "matmul-merge" not in report.applied


def test_node_multi_budget_is_shared_across_multi_iterations():
    eg = from_graph(graph(4))
    report = Runner([], [MERGE], k_multi=3, node_multi=7).run(eg)
    multi_added = report.iterations[0].enodes - from_graph(graph(4)).num_enodes
    # Each pair adds 5 e-nodes; after 2 pairs (10 >= 7) the budget is spent for good.
    assert multi_added == 10
    assert all("matmul-merge" not in it.applied for it in report.iterations[1:])


def test_node_limit_stops_growth():
    eg = from_graph(adds(8))
    report = Runner([COMM, ASSOC], node_limit=100).run(eg)
    assert report.stop_reason is StopReason.NODE_LIMIT
    assert eg.num_enodes >= 100 and report.enodes == eg.num_enodes
    assert find_cycle(eg) is None


@pytest.mark.parametrize("limit", [20, 37, 60, 100])
def test_node_limit_is_crossed_by_at_most_one_match(limit):
    # comm and assoc add at most 2 e-nodes per match; a whole iteration adds many more.
    eg = from_graph(adds(8))
    report = Runner([COMM, ASSOC], node_limit=limit).run(eg)
    assert report.stop_reason is StopReason.NODE_LIMIT
    assert limit <= eg.num_enodes <= limit + 1


def test_multi_rules_stop_at_the_node_limit_too():
    # Each merged pair adds 5 e-nodes; the limit leaves room for one pair, node_multi for all.
    eg = from_graph(graph(4))
    n0 = eg.num_enodes
    report = Runner([], [MERGE], node_limit=n0 + 3, node_multi=2000).run(eg)
    assert report.stop_reason is StopReason.NODE_LIMIT
    assert eg.num_enodes == n0 + 5


def test_iteration_statistics_are_filled():
    eg = from_graph(adds(4))
    report = Runner([COMM, ASSOC], iter_limit=3, node_limit=10**6).run(eg)
    assert report.stop_reason in (StopReason.ITERATION_LIMIT, StopReason.SATURATED)
    it = report.iterations[0]
    assert it.index == 0 and it.changed
    assert it.matches["ewadd-comm"] == 3 and it.applied["ewadd-comm"] == 3
    assert it.enodes == eg.num_enodes or len(report.iterations) > 1
    assert it.search_time > 0 and it.apply_time > 0 and it.total_time >= it.search_time
    assert report.seconds >= sum(i.total_time for i in report.iterations)


def test_config_object_and_overrides():
    cfg = RunnerConfig(node_limit=50, k_multi=2)
    r = Runner([COMM], config=cfg, iter_limit=4)
    assert r.config == RunnerConfig(node_limit=50, k_multi=2, iter_limit=4)
    assert RunnerConfig().node_limit == 2000
    with pytest.raises(TypeError):
        Runner([COMM], bogus=1)
