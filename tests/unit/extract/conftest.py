"""Crafted e-graphs for the extraction tests."""

from __future__ import annotations

import pytest

from tensor_eqsat.extract.problem import ExtractionProblem, ProblemBuilder


def residual_block() -> ExtractionProblem:
    """The paper's Figure 4: add(conv1(x), conv2(conv1(x))); conv1 is shared."""
    b = ProblemBuilder()
    b.add_node("x", "input", cost=0.0)
    b.add_node("w1", "weight", cost=0.0)
    b.add_node("w2", "weight", cost=0.0)
    b.add_node("conv1", "conv2d", ["x", "w1"], cost=2.0)
    b.add_node("conv2", "conv2d", ["conv1", "w2"], cost=3.0)
    b.add_node("add", "ewadd", ["conv1", "conv2"], cost=0.5)
    return b.build(roots=["add"])


def appendix_case() -> ExtractionProblem:
    """The paper's appendix failure case, unit costs: true cost 7, OCF 8, tree 15.

    Classes 5 and 6 each read classes 3 and 4, which both read 2, which reads the input 1; the
    concat 7 reads 5 and 6. The history of 5 (and 6) holds 3 with 3 and 4 with only 1 (3 and 4
    overlap in 1 and 2), so its largest constituent is 3, not 4: the concat subtracts 3 of the
    shared 4.
    """
    b = ProblemBuilder()
    for cls, op, ch in [
        ("1", "input", []),
        ("2", "relu", ["1"]),
        ("3", "conv2d", ["2"]),
        ("4", "conv2d", ["2"]),
        ("5", "ewadd", ["3", "4"]),
        ("6", "ewmul", ["3", "4"]),
        ("7", "concat", ["5", "6"]),
    ]:
        b.add_node(cls, op, ch, cost=1.0)
    return b.build(roots=["7"])


def cyclic_split_concat() -> ExtractionProblem:
    """A TENSAT-style cycle: class a = relu(x) or split0(cat); cat = concat(a, b).

    The split alias is free, so choosing it for ``a`` would be cheapest if cycles were allowed;
    every valid extraction must break the cycle through ``a -> cat -> a``.
    """
    b = ProblemBuilder()
    b.add_node("x", "input", cost=0.0)
    b.add_node("a", "relu", ["x"], cost=1.0)
    b.add_node("a", "split0", ["cat"], cost=0.0)
    b.add_node("b", "tanh", ["x"], cost=1.0)
    b.add_node("cat", "concat", ["a", "b"], cost=0.25)
    b.add_node("out", "ewadd", ["a", "cat"], cost=0.5)
    return b.build(roots=["out"])


def shared_vs_cheap() -> ExtractionProblem:
    """Greedy per class picks each child's cheapest sub-DAG; the ILP shares one merged conv.

    ``p`` and ``q`` can each be a private conv (cost 3) or a split of one wide conv (cost 4)
    that both can share: greedy-dag pays 3 + 3, the optimum 4.
    """
    b = ProblemBuilder()
    b.add_node("x", "input", cost=0.0)
    b.add_node("wide", "conv2d", ["x"], cost=4.0)
    b.add_node("p", "conv2d", ["x"], cost=3.0)
    b.add_node("p", "split0", ["wide"], cost=0.0)
    b.add_node("q", "conv2d", ["x"], cost=3.0)
    b.add_node("q", "split1", ["wide"], cost=0.0)
    b.add_node("out", "concat", ["p", "q"], cost=0.0)
    return b.build(roots=["out"])


@pytest.fixture
def residual() -> ExtractionProblem:
    return residual_block()


@pytest.fixture
def appendix() -> ExtractionProblem:
    return appendix_case()


@pytest.fixture
def cyclic() -> ExtractionProblem:
    return cyclic_split_concat()


@pytest.fixture
def sharing() -> ExtractionProblem:
    return shared_vs_cheap()
