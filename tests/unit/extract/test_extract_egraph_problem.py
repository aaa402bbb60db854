"""The e-graph adapter, on a minimal stand-in exposing only the public e-graph API it uses."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import pytest

from tensor_eqsat.extract.egraph_problem import problem_from_egraph
from tensor_eqsat.extract.greedy_dag import GreedyDagExtractor
from tensor_eqsat.extract.problem import ExtractionError
from tensor_eqsat.ir.graph import Graph


class Node(NamedTuple):
    op: str
    attrs: tuple[Any, ...]
    children: tuple[int, ...]


class Data(NamedTuple):
    shapes: tuple[tuple[int, ...], ...]
    all_weights: bool


class Cls(NamedTuple):
    id: int
    nodes: tuple[Node, ...]
    data: Data


class FakeEGraph:
    """x (input), w (weight), t = transpose(w) (weight-only), y = matmul(x, t) or matmul2(x, t),
    s = split (tuple-valued), g = get(s), out = relu(y) + g."""

    def __init__(self) -> None:
        self.class_list = [
            Cls(10, (Node("input", ((2, 3), "x"), ()),), Data(((2, 3),), False)),
            Cls(11, (Node("weight", ((3, 3), "w"), ()),), Data(((3, 3),), True)),
            Cls(12, (Node("transpose", ((1, 0),), (11,)),), Data(((3, 3),), True)),
            Cls(
                13,
                (Node("matmul", ("none",), (10, 12)), Node("matmul2", (), (10, 12))),
                Data(((2, 3),), False),
            ),
            Cls(14, (Node("split", (1, (1, 2)), (13,)),), Data(((2, 1), (2, 2)), False)),
            Cls(15, (Node("get", (0,), (14,)),), Data(((2, 1),), False)),
            Cls(16, (Node("relu", (), (15,)),), Data(((2, 1),), False)),
        ]
        self.roots = [16]
        self.blacklist = frozenset({Node("matmul2", (), (10, 12))})
        self.chosen: Mapping[int, Any] | None = None

    def classes(self) -> list[Cls]:
        return self.class_list

    def to_graph(self, choice: Mapping[int, Any]) -> Graph:
        self.chosen = choice
        return Graph()


class RecordingCost:
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], tuple[Any, ...], bool]] = []

    def op_cost(self, op: str, attrs: Any, in_shapes: Sequence[Any], all_weights: bool) -> float:
        self.calls.append((op, attrs, tuple(in_shapes), all_weights))
        return {"transpose": 5.0, "matmul": 2.0, "matmul2": 1.0, "split": 0.0, "relu": 0.5}[op]


def test_costs_come_from_the_cost_model_with_child_shapes_and_weight_flags() -> None:
    eg = FakeEGraph()
    model = RecordingCost()
    ep = problem_from_egraph(eg, model)
    p = ep.problem
    assert p.class_keys == (10, 11, 12, 13, 14, 15, 16)
    assert p.node_cost == [0.0, 0.0, 5.0, 2.0, 1.0, 0.0, 0.0, 0.5]
    assert p.node_blacklisted == [False, False, False, False, True, False, False, False]
    assert p.node_op[4] == "matmul2" and p.node_keys[4] == (13, 1)
    assert p.class_nodes[3] == (3, 4)
    # Leaves and the get projection are never priced; the rest with their inputs' shapes.
    assert model.calls == [
        ("transpose", ((1, 0),), ((3, 3),), True),
        ("matmul", ("none",), ((2, 3), (3, 3)), False),
        ("matmul2", (), ((2, 3), (3, 3)), False),
        ("split", (1, (1, 2)), ((2, 3),), False),
        ("relu", (), ((2, 1),), False),
    ]


def test_result_maps_back_to_enodes_and_graph() -> None:
    eg = FakeEGraph()
    ep = problem_from_egraph(eg, RecordingCost())
    r = GreedyDagExtractor().extract(ep.problem)
    assert r.dag_cost() == pytest.approx(7.5)  # the cheaper matmul2 is blacklisted
    ep.to_graph(r)
    assert eg.chosen is not None
    assert eg.chosen[13] == Node("matmul", ("none",), (10, 12))
    assert set(eg.chosen) == {10, 11, 12, 13, 14, 15, 16}


def test_cache_prices_each_node_once() -> None:
    eg = FakeEGraph()
    model = RecordingCost()
    cache: dict[tuple[Any, ...], float] = {}
    problem_from_egraph(eg, model, cache=cache)
    problem_from_egraph(eg, model, cache=cache)
    assert len(model.calls) == 5 and len(cache) == 5


def test_tuple_class_read_without_projection_is_rejected() -> None:
    eg = FakeEGraph()
    eg.class_list[6] = Cls(16, (Node("relu", (), (14,)),), Data(((2, 1),), False))
    with pytest.raises(ExtractionError, match="reads a multi-output class without a 'get' projection"):
        problem_from_egraph(eg, RecordingCost())


def test_unknown_child_and_missing_roots_are_rejected() -> None:
    eg = FakeEGraph()
    eg.class_list[6] = Cls(16, (Node("relu", (), (99,)),), Data(((2, 1),), False))
    with pytest.raises(ExtractionError, match="unknown child e-class 99"):
        problem_from_egraph(eg, RecordingCost())
    eg = FakeEGraph()
    eg.roots = []
    with pytest.raises(ExtractionError, match="no roots"):
        problem_from_egraph(eg, RecordingCost())
    eg.roots = [42]
    with pytest.raises(ExtractionError, match="root e-class 42 is not an e-class"):
        problem_from_egraph(eg, RecordingCost())


def test_bad_cost_from_the_model_is_rejected() -> None:
    class Negative(RecordingCost):
        def op_cost(self, op: str, attrs: Any, in_shapes: Sequence[Any], all_weights: bool) -> float:
            return -1.0 if op == "relu" else 1.0

    with pytest.raises(ExtractionError, match=r"relu.*cost model returned -1\.0"):
        problem_from_egraph(FakeEGraph(), Negative())


def test_empty_class_is_rejected() -> None:
    eg = FakeEGraph()
    eg.class_list[0] = Cls(10, (), Data(((2, 3),), False))
    with pytest.raises(ExtractionError, match="e-class 10 has no e-nodes"):
        problem_from_egraph(eg, RecordingCost())


def test_result_of_another_problem_is_rejected() -> None:
    ep1 = problem_from_egraph(FakeEGraph(), RecordingCost())
    ep2 = problem_from_egraph(FakeEGraph(), RecordingCost())
    with pytest.raises(ExtractionError, match="different extraction problem"):
        ep1.choice(GreedyDagExtractor().extract(ep2.problem))


def test_node_keys_name_class_and_position() -> None:
    from tensor_eqsat.cost.roofline import RooflineCostModel
    from tensor_eqsat.egraph import from_graph
    from tensor_eqsat.extract.egraph_problem import problem_from_egraph
    from tensor_eqsat.ir import Graph

    g = Graph()
    a = g.input((2, 2), name="a")
    b = g.input((2, 2), name="b")
    g.output(g.relu(g.ewadd(a, b)))
    eg = from_graph(g)
    s = eg.add(eg.nodes(eg.roots[0])[0])  # present already: nothing new
    assert s == eg.roots[0]
    p = problem_from_egraph(eg, RooflineCostModel()).problem
    keys = p.node_keys
    expected = [(cls.id, pos) for cls in eg.classes() for pos in range(len(cls.nodes))]
    assert list(keys) == expected and len(keys) == p.num_nodes
    assert keys[-1] == expected[-1] and list(keys[1:3]) == expected[1:3]
    with pytest.raises(IndexError):
        keys[p.num_nodes]
