"""ExtractionProblem and ProblemBuilder: layout, derived facts, validation."""

from __future__ import annotations

import math

import pytest

from tensor_eqsat.errors import TensorEqsatError
from tensor_eqsat.extract.problem import (
    ClassOrder,
    ExtractionError,
    ExtractionProblem,
    ProblemBuilder,
    strongly_connected_components,
)


def test_builder_numbers_classes_in_first_appearance_order(residual: ExtractionProblem) -> None:
    p = residual
    assert p.class_keys == ("x", "w1", "w2", "conv1", "conv2", "add")
    assert p.num_nodes == 6
    assert p.node_children[p.num_nodes - 1] == (3, 4)
    assert p.class_nodes[3] == (3,)
    assert p.roots == (5,)
    assert p.class_key(5) == "add"
    assert p.class_index("conv2") == 4


def test_class_nodes_follow_insertion_order_across_interleaving() -> None:
    b = ProblemBuilder()
    b.add_node("a", "x", cost=0)
    b.add_node("b", "f", ["a"])
    b.add_node("a", "y", cost=0)
    p = b.build(roots=["b"])
    assert p.class_nodes == ((0, 2), (1,))
    assert p.node_op == ["x", "f", "y"]


def test_forward_references_and_cycles_are_allowed(cyclic: ExtractionProblem) -> None:
    p = cyclic
    a, cat = p.class_index("a"), p.class_index("cat")
    assert p.has_cycles
    assert p.scc.comp[a] == p.scc.comp[cat]
    assert p.scc.cyclic[a] and p.scc.cyclic[cat]
    assert not p.scc.cyclic[p.class_index("x")]


def test_child_sets_parents_and_reachability() -> None:
    b = ProblemBuilder()
    b.add_node("x", "input", cost=0)
    b.add_node("y", "ewadd", ["x", "x"])
    b.add_node("z", "relu", ["y"])
    b.add_node("dead", "relu", ["x"])
    p = b.build(roots=["z"])
    assert p.node_children[1] == (0, 0)
    assert p.child_sets[1] == (0,)
    assert p.parent_nodes[0] == [1, 3]
    assert p.parent_classes[0] == [1, 3]
    assert sorted(p.reachable_classes()) == [0, 1, 2]


def test_scc_order_puts_children_first(residual: ExtractionProblem) -> None:
    p = residual
    pos = {c: i for i, c in enumerate(p.scc.order)}
    for n, ch in enumerate(p.node_children):
        for k in ch:
            assert pos[k] < pos[p.node_class[n]]
    assert not p.has_cycles
    assert list(ClassOrder.PROBLEM.classes(p)) == list(range(p.num_classes))
    assert list(ClassOrder.CHILDREN_FIRST.classes(p)) == p.scc.order


def test_blacklisted_nodes_do_not_make_cycles() -> None:
    b = ProblemBuilder()
    b.add_node("a", "x", cost=0)
    b.add_node("a", "loop", ["b"], blacklisted=True)
    b.add_node("b", "f", ["a"])
    p = b.build(roots=["b"])
    assert not p.has_cycles


def test_self_loop_is_cyclic() -> None:
    b = ProblemBuilder()
    b.add_node("a", "x", cost=0)
    b.add_node("a", "id", ["a"])
    assert b.build(roots=["a"]).scc.cyclic == [True]


def test_tarjan_on_two_cycles_and_a_tail() -> None:
    comp, components = strongly_connected_components([[1], [0, 2], [3], [2, 4], []])
    assert comp[0] == comp[1] and comp[2] == comp[3] and comp[4] not in (comp[0], comp[2])
    # Reverse topological: {4} before {2, 3} before {0, 1}.
    assert [sorted(m) for m in components] == [[4], [2, 3], [0, 1]]


@pytest.mark.parametrize(
    ("cost", "message"),
    [(math.nan, "finite"), (math.inf, "finite"), (-1.0, ">= 0")],
)
def test_bad_costs_are_rejected_naming_the_node(cost: float, message: str) -> None:
    b = ProblemBuilder()
    b.add_node("a", "conv2d", cost=cost, key="n7")
    with pytest.raises(ExtractionError, match=rf"node 'n7' \(conv2d\) in class 'a'.*{message}"):
        b.build(roots=["a"])


def test_child_class_without_nodes_is_rejected() -> None:
    b = ProblemBuilder()
    b.add_node("a", "relu", ["ghost"], key="r")
    with pytest.raises(ExtractionError, match="node 'r' \\(relu\\): child class 'ghost' has no e-nodes"):
        b.build(roots=["a"])


def test_bad_roots_are_rejected() -> None:
    b = ProblemBuilder()
    b.add_node("a", "x")
    with pytest.raises(ExtractionError, match="root class 'z' has no e-nodes"):
        b.build(roots=["z"])
    with pytest.raises(ExtractionError, match="no root classes"):
        b.build(roots=[])


def test_direct_construction_validates_indices() -> None:
    with pytest.raises(ExtractionError, match="class index 3 out of range"):
        ExtractionProblem(class_keys=["a"], node_class=[3], node_children=[()], node_cost=[1.0], roots=[0])
    with pytest.raises(ExtractionError, match="child class index 5 out of range"):
        ExtractionProblem(class_keys=["a"], node_class=[0], node_children=[(5,)], node_cost=[1.0], roots=[0])
    with pytest.raises(ExtractionError, match="class 'b' has no e-nodes"):
        ExtractionProblem(
            class_keys=["a", "b"], node_class=[0], node_children=[()], node_cost=[1.0], roots=[0]
        )
    with pytest.raises(ExtractionError, match="node_cost has 2 entries for 1 nodes"):
        ExtractionProblem(
            class_keys=["a"], node_class=[0], node_children=[()], node_cost=[1.0, 2.0], roots=[0]
        )
    with pytest.raises(ExtractionError, match="root classes repeat"):
        ExtractionProblem(class_keys=["a"], node_class=[0], node_children=[()], node_cost=[1.0], roots=[0, 0])


def test_extraction_error_is_a_project_error() -> None:
    assert issubclass(ExtractionError, TensorEqsatError)
