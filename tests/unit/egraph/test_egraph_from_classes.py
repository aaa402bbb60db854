"""EGraph.from_classes: bulk construction for importers (cycles and arbitrary ops allowed)."""

from __future__ import annotations

import pytest

from tensor_eqsat.egraph import EGraph, TensorAnalysis, TensorData, find_cycle


def test_cyclic_egraph_with_arbitrary_ops():
    # class 0: x ; class 1: f(0) | g(1)  (a self-loop, as egg e-graphs have)
    eg = EGraph.from_classes([[("x", (), [])], [("f", ("a", 1), [0]), ("g", (), [1])]], roots=[1])
    eg.check()
    assert eg.num_classes == 2 and eg.num_enodes == 3 and not eg.cycle_filter
    assert find_cycle(eg) == [1]
    assert [n.attrs for n in eg.nodes(1)] == [("a", 1), ()]


def test_identical_nodes_in_two_classes_unify_them_and_their_parents():
    eg = EGraph.from_classes(
        [
            [("x", (), [])],
            [("f", (), [0])],
            [("f", (), [0])],  # same node as class 1: the two classes are one
            [("h", (), [1])],
            [("h", (), [2])],  # congruent to class 3 once 1 = 2
        ],
        roots=[3, 4],
    )
    eg.check()
    assert eg.num_classes == 3 and eg.num_enodes == 3
    assert eg.find(1) == eg.find(2) and eg.roots[0] == eg.roots[1]


def test_tensor_analysis_values_are_computed_as_a_fixpoint():
    classes = [
        [("input", ((2, 3), "x"), [])],
        [("relu", (), [0]), ("relu", (), [1])],  # relu(itself) is harmless once relu(x) is typed
    ]
    eg = EGraph.from_classes(classes, roots=[1], analysis=TensorAnalysis())
    assert eg.data(1) == TensorData(((2, 3),), False)


def test_errors_name_the_class():
    with pytest.raises(ValueError, match="class 1 has no nodes"):
        EGraph.from_classes([[("x", (), [])], []])
    with pytest.raises(ValueError, match="class 0: node 'f' has child 5"):
        EGraph.from_classes([[("f", (), [5])]])
    with pytest.raises(ValueError, match=r"classes \[0\] never get an analysis value"):
        EGraph.from_classes([[("relu", (), [0])]], analysis=TensorAnalysis())
