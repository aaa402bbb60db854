"""The greedy extractors on crafted e-graphs: the paper's examples, egg's quirks, cycles, blacklist."""

from __future__ import annotations

import pytest

from tensor_eqsat.extract.greedy_dag import GreedyDagExtractor
from tensor_eqsat.extract.greedy_ocf import GreedyOcfExtractor, _full, combine
from tensor_eqsat.extract.greedy_tree import GreedyTreeExtractor
from tensor_eqsat.extract.problem import ClassOrder, ExtractionError, ExtractionProblem, ProblemBuilder
from tensor_eqsat.extract.registry import ExtractorKind, Optimality, extract, make_extractor, parse_kind

GREEDY = [GreedyTreeExtractor(), GreedyOcfExtractor(), GreedyDagExtractor()]


def test_residual_block_tree_counts_shared_conv_twice(residual: ExtractionProblem) -> None:
    tree = GreedyTreeExtractor().extract(residual)
    ocf = GreedyOcfExtractor().extract(residual)
    dag = GreedyDagExtractor().extract(residual)
    assert tree.reported_cost == pytest.approx(7.5)  # 0.5 + 2 + (3 + 2)
    assert ocf.reported_cost == pytest.approx(5.5)
    assert dag.reported_cost == pytest.approx(5.5)
    for r in (tree, ocf, dag):
        r.check()
        assert r.dag_cost() == pytest.approx(5.5)


def test_residual_block_order_of_children_does_not_matter_for_ocf() -> None:
    # Case 2 of the paper (shared conv met first) instead of case 1 (met second).
    b = ProblemBuilder()
    b.add_node("x", "input", cost=0.0)
    b.add_node("conv1", "conv2d", ["x"], cost=2.0)
    b.add_node("conv2", "conv2d", ["conv1"], cost=3.0)
    b.add_node("add", "ewadd", ["conv2", "conv1"], cost=0.5)
    assert GreedyOcfExtractor().extract(b.build(roots=["add"])).reported_cost == pytest.approx(5.5)


def test_paper_appendix_failure_case(appendix: ExtractionProblem) -> None:
    """Unit costs: the true cost is 7, the paper's cost function returns 8, egg's tree cost 15."""
    tree = GreedyTreeExtractor().extract(appendix)
    ocf = GreedyOcfExtractor().extract(appendix)
    dag = GreedyDagExtractor().extract(appendix)
    assert tree.reported_cost == 15.0
    assert ocf.reported_cost == 8.0
    assert dag.reported_cost == 7.0
    assert {tree.dag_cost(), ocf.dag_cost(), dag.dag_cost()} == {7.0}
    assert tree.tree_cost() == 15.0


def test_ocf_history_of_class_5_has_largest_constituent_3(appendix: ExtractionProblem) -> None:
    # The paper's explanation: "the maximum constituent cost of e-classes 5 and 6 is 3, not 4".
    hist: dict[int, dict[int, float]] = {}
    costs: list[float] = [0.0] * appendix.num_classes
    for c in range(appendix.num_classes):  # classes are numbered children first here
        h, costs[c] = combine(hist, costs, appendix.node_children[c], 1.0)
        hist[c] = _full(h)
    assert costs == [1.0, 2.0, 3.0, 3.0, 5.0, 5.0, 8.0]
    assert max(hist[4].values()) == 3.0
    assert hist[4] == {0: 1.0, 1: 2.0, 2: 3.0, 3: 1.0}


def test_ocf_counts_a_repeated_child_once() -> None:
    b = ProblemBuilder()
    b.add_node("x", "input", cost=0.0)
    b.add_node("c", "conv", ["x"], cost=2.0)
    b.add_node("sq", "ewmul", ["c", "c"], cost=1.0)
    p = b.build(roots=["sq"])
    assert GreedyOcfExtractor().extract(p).reported_cost == 3.0
    assert GreedyTreeExtractor().extract(p).reported_cost == 5.0


def test_ocf_zero_cost_first_child_does_not_count_as_history() -> None:
    # A weight (cost 0, empty history) first: the conv is then treated as the first child.
    b = ProblemBuilder()
    b.add_node("w", "weight", cost=0.0)
    b.add_node("x", "input", cost=0.0)
    b.add_node("c", "conv", ["x"], cost=2.0)
    b.add_node("d", "relu", ["c"], cost=1.0)
    b.add_node("m", "matmul", ["w", "c", "d"], cost=1.0)
    assert GreedyOcfExtractor().extract(b.build(roots=["m"])).reported_cost == 4.0


def test_ocf_stale_history_makes_it_order_dependent_like_egg() -> None:
    """A class that switches to a node with an empty history keeps its old stored history.

    ``k`` first gets relu(j) (history {j: 2}); once ``late`` has a cost, cheap(late) wins with an
    empty history, which the authors' code never stores, so {j: 2} stays. Pricing ``p`` =
    add(k, j) then starts from that stale history and counts j as already paid: 1.5 instead of
    the true 3.5. Visiting ``late`` before ``k`` (children first) never creates the stale entry.
    """
    b = ProblemBuilder()
    b.add_node("x", "input", cost=0.0)
    b.add_node("j", "conv", ["x"], cost=2.0)
    b.add_node("k", "relu", ["j"], cost=1.0)
    b.add_node("k", "cheap", ["late"], cost=0.5)
    b.add_node("p", "ewadd", ["k", "j"], cost=1.0)
    b.add_node("late", "weight", cost=0.0)
    p = b.build(roots=["p"])
    egg_like = GreedyOcfExtractor(order=ClassOrder.PROBLEM).extract(p)
    children_first = GreedyOcfExtractor(order=ClassOrder.CHILDREN_FIRST).extract(p)
    assert egg_like.reported_cost == 1.5
    assert children_first.reported_cost == 3.5
    assert egg_like.stats["sweeps"] == 3 and children_first.stats["sweeps"] == 2
    for r in (egg_like, children_first):
        r.check()
        assert p.node_op[r.choices[p.class_index("k")]] == "cheap"
        assert r.dag_cost() == 3.5


@pytest.mark.parametrize("ex", GREEDY, ids=lambda e: e.name)
def test_cheapest_of_several_leaves_wins(ex) -> None:  # type: ignore[no-untyped-def]
    b = ProblemBuilder()
    for op, cost in [("a", 42.0), ("b", 30.0), ("c", 61.0), ("d", 82.0)]:
        b.add_node("x", op, cost=cost)
    p = b.build(roots=["x"])
    r = ex.extract(p)
    assert p.node_op[r.choices[0]] == "b" and r.reported_cost == 30.0


def test_first_cheapest_node_wins_ties() -> None:
    b = ProblemBuilder()
    b.add_node("x", "input", cost=0.0)
    b.add_node("y", "first", ["x"], cost=1.0)
    b.add_node("y", "second", ["x"], cost=1.0)
    p = b.build(roots=["y"])
    for ex in GREEDY:
        assert p.node_op[ex.extract(p).choices[1]] == "first"


@pytest.mark.parametrize("ex", GREEDY, ids=lambda e: e.name)
def test_greedy_extractors_break_the_split_concat_cycle(ex, cyclic: ExtractionProblem) -> None:  # type: ignore[no-untyped-def]
    r = ex.extract(cyclic)
    r.check()
    assert cyclic.node_op[r.choices[cyclic.class_index("a")]] == "relu"
    assert r.dag_cost() == pytest.approx(2.75)


@pytest.mark.parametrize("ex", GREEDY, ids=lambda e: e.name)
def test_greedy_extractors_respect_the_blacklist(ex) -> None:  # type: ignore[no-untyped-def]
    b = ProblemBuilder()
    b.add_node("x", "input", cost=0.0)
    b.add_node("y", "cheap", ["x"], cost=0.1, blacklisted=True)
    b.add_node("y", "dear", ["x"], cost=5.0)
    p = b.build(roots=["y"])
    r = ex.extract(p)
    r.check()
    assert p.node_op[r.choices[1]] == "dear"


@pytest.mark.parametrize("ex", GREEDY, ids=lambda e: e.name)
def test_no_valid_extraction_raises_naming_the_root(ex) -> None:  # type: ignore[no-untyped-def]
    b = ProblemBuilder()
    b.add_node("a", "loop", ["b"])
    b.add_node("b", "loop", ["a"])
    p = b.build(roots=["a"])
    with pytest.raises(
        ExtractionError, match=rf"{ex.name}: no valid extraction for root class\(es\) \['a'\]"
    ):
        ex.extract(p)


def test_greedy_dag_is_exact_where_greedy_tree_is_not() -> None:
    """Tree cost prefers a private conv; DAG cost sees that the shared one is already paid."""
    b = ProblemBuilder()
    b.add_node("x", "input", cost=0.0)
    b.add_node("h", "conv", ["x"], cost=4.0)
    b.add_node("g", "conv_private", ["x"], cost=3.0)
    b.add_node("g", "relu", ["h"], cost=0.5)
    b.add_node("out", "ewadd", ["h", "g"], cost=0.1)
    p = b.build(roots=["out"])
    tree = GreedyTreeExtractor().extract(p)
    dag = GreedyDagExtractor().extract(p)
    assert p.node_op[tree.choices[2]] == "conv_private"
    assert tree.dag_cost() == pytest.approx(7.1)
    # greedy-dag still picks per class: g alone costs 3 (private) < 4.5 (relu over h).
    assert dag.dag_cost() == pytest.approx(7.1)
    assert dag.reported_cost == pytest.approx(dag.dag_cost())


def test_greedy_dag_misses_sharing_across_siblings(sharing: ExtractionProblem) -> None:
    r = GreedyDagExtractor().extract(sharing)
    assert r.dag_cost() == pytest.approx(6.0) == pytest.approx(r.reported_cost)


def test_multiple_roots_share_their_common_part() -> None:
    b = ProblemBuilder()
    b.add_node("x", "input", cost=0)
    b.add_node("h", "conv", ["x"], cost=2)
    b.add_node("o1", "relu", ["h"], cost=1)
    b.add_node("o2", "tanh", ["h"], cost=1)
    p = b.build(roots=["o1", "o2"])
    assert GreedyDagExtractor().extract(p).reported_cost == 4.0
    assert GreedyOcfExtractor().extract(p).reported_cost == 4.0
    assert GreedyTreeExtractor().extract(p).reported_cost == 6.0


def test_registry_names_and_optimality() -> None:
    assert [k.value for k in ExtractorKind] == ["greedy-tree", "greedy-ocf", "greedy-dag", "ilp"]
    assert ExtractorKind.GREEDY_TREE.optimality is Optimality.TREE
    assert ExtractorKind.ILP.optimality is Optimality.DAG
    assert make_extractor("greedy-ocf").name == "greedy-ocf"
    assert parse_kind(ExtractorKind.ILP) is ExtractorKind.ILP
    with pytest.raises(ValueError, match="unknown extractor 'greedy' \\(known: greedy-tree, greedy-ocf"):
        make_extractor("greedy")


def test_extract_defaults_to_greedy_dag(residual: ExtractionProblem) -> None:
    assert extract(residual).extractor == "greedy-dag"


def test_greedy_dag_rejects_bad_rounds() -> None:
    with pytest.raises(ValueError, match="max_rounds"):
        GreedyDagExtractor(max_rounds=0)
