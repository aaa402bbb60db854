"""The accounting shared by every cost model: free ops, weight folding, taso_compat, caching."""

from __future__ import annotations

import pytest

from tensor_eqsat.cost import (
    CostModel,
    CostModelError,
    KernelCostModel,
    RooflineCostModel,
    UnitCostModel,
    cost_breakdown,
    graph_cost,
    weight_only_flags,
)
from tensor_eqsat.errors import GraphError, ShapeError
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.opspec import Attrs, OpSpec
from tensor_eqsat.ir.types import Shape

RELU: Attrs = ()
MATMUL: Attrs = ("none",)


class CountingModel(KernelCostModel):
    """Costs 1 ms per costed op and records every kernel_ms call."""

    spec = "counting"

    def __init__(self, **kw):
        super().__init__(**kw)
        self.calls: list[tuple[str, Attrs, tuple[Shape, ...]]] = []

    def kernel_ms(self, spec: OpSpec, attrs: Attrs, in_shapes: tuple[Shape, ...]) -> float:
        self.calls.append((spec.name, attrs, in_shapes))
        return 1.0


def test_models_satisfy_the_protocol():
    assert isinstance(UnitCostModel(), CostModel)
    assert isinstance(RooflineCostModel(), CostModel)


@pytest.mark.parametrize(
    ("op", "attrs", "shapes"),
    [
        ("reshape", ((4, 2),), ((2, 4),)),
        ("transpose", ((1, 0),), ((2, 4),)),
        ("split", (1, (1, 3)), ((2, 4),)),
        ("dropout", (0.0,), ((2, 4),)),
        ("noop", (), ((2, 4), (3,))),
        ("input", ((2, 4), "x"), ()),
        ("weight", ((2, 4), "w"), ()),
        ("get", (("index", 0),), ((2, 4),)),
    ],
)
def test_views_leaves_and_projection_are_free(op, attrs, shapes):
    m = CountingModel(weight_ops="count")
    assert m.op_cost(op, attrs, shapes, False) == 0.0
    assert m.op_cost(op, attrs, shapes, True) == 0.0
    assert m.calls == []


def test_projection_is_free_under_the_roofline_too():
    assert RooflineCostModel().op_cost("get", (("index", 1),), ((64, 64),), False) == 0.0


def test_fold_makes_weight_only_ops_free_and_count_prices_them():
    shapes = ((8, 16), (16, 4))
    fold = CountingModel()
    count = CountingModel(weight_ops="count")
    assert fold.op_cost("matmul", MATMUL, shapes, True) == 0.0
    assert fold.op_cost("matmul", MATMUL, shapes, False) == 1.0
    assert count.op_cost("matmul", MATMUL, shapes, True) == 1.0
    assert count.op_cost("matmul", MATMUL, shapes, False) == 1.0


def test_weight_transforms_on_weights_are_free_in_both_modes():
    for mode in ("fold", "count"):
        m = CountingModel(weight_ops=mode)
        assert m.op_cost("merge", (2, 4), ((64, 16, 3, 3),), True) == 0.0
        assert m.op_cost("enlarge", (), ((8, 8, 1, 1), (8, 8, 3, 3)), True) == 0.0
        # On activations they move memory like any copy.
        assert m.op_cost("merge", (2, 4), ((64, 16, 3, 3),), False) == 1.0


def test_taso_compat_makes_concats_free():
    shapes = ((1, 8, 4, 4), (1, 8, 4, 4))
    assert CountingModel().op_cost("concat", (1,), shapes, False) == 1.0
    assert CountingModel(taso_compat=True).op_cost("concat", (1,), shapes, False) == 0.0
    roof = RooflineCostModel()
    assert roof.op_cost("concat", (1,), shapes, False) > 0.0
    assert RooflineCostModel(taso_compat=True).op_cost("concat", (1,), shapes, False) == 0.0
    # taso_compat leaves every other op alone.
    assert RooflineCostModel(taso_compat=True).op_cost("relu", RELU, ((1, 8),), False) == roof.op_cost(
        "relu", RELU, ((1, 8),), False
    )


def test_cost_is_computed_once_per_configuration():
    m = CountingModel()
    for _ in range(3):
        m.op_cost("relu", RELU, ((4, 4),), False)
    m.op_cost("relu", RELU, [[4, 4]], False)  # unhashable spelling of the same shapes
    m.op_cost("relu", RELU, ((4, 5),), False)
    assert m.calls == [("relu", (), ((4, 4),)), ("relu", (), ((4, 5),))]
    assert m.cache_size == 2  # the list spelling shares the tuple's entry
    # all_weights is part of the key: count mode prices the weight-only instance separately.
    c = CountingModel(weight_ops="count")
    c.op_cost("relu", RELU, ((4, 4),), False)
    c.op_cost("relu", RELU, ((4, 4),), True)
    assert len(c.calls) == 2


def test_bad_configurations_raise_even_when_free():
    m = CountingModel()
    with pytest.raises(GraphError, match="unknown op 'nope'"):
        m.op_cost("nope", (), ((1,),), False)
    with pytest.raises(ShapeError, match="matmul"):
        m.op_cost("matmul", MATMUL, ((2, 3), (4, 5)), False)
    with pytest.raises(ShapeError, match="reshape"):
        m.op_cost("reshape", ((7,),), ((2, 4),), False)
    with pytest.raises(ShapeError, match="matmul"):
        m.op_cost("matmul", MATMUL, ((2, 3), (4, 5)), True)  # folded, still checked


def test_bad_weight_ops_is_rejected():
    with pytest.raises(CostModelError, match="weight_ops must be one of fold, count"):
        UnitCostModel(weight_ops="skip")


def _weight_chain() -> Graph:
    """x @ (w1 @ w2) + relu(x @ w3): one weight-only matmul, two activation matmuls."""
    g = Graph()
    x = g.input((4, 8), name="x")
    w1, w2, w3 = g.weight((8, 8)), g.weight((8, 8)), g.weight((8, 8))
    ww = g.matmul(w1, w2)
    y = g.ewadd(g.matmul(x, ww), g.relu(g.matmul(x, w3)))
    g.output(y)
    return g


def test_weight_only_flags_follow_dependencies():
    g = _weight_chain()
    flags = weight_only_flags(g)
    by_op = [(n.op, flags[n.id]) for n in g.nodes]
    assert by_op[:4] == [("input", False), ("weight", True), ("weight", True), ("weight", True)]
    assert by_op[4] == ("matmul", True)
    assert all(not f for op, f in by_op[5:])


def test_graph_cost_fold_vs_count():
    g = _weight_chain()
    assert UnitCostModel().graph_cost(g) == 4.0  # two activation matmuls, relu, ewadd; w1 @ w2 folds
    assert graph_cost(UnitCostModel(weight_ops="count"), g) == 5.0


def test_graph_cost_counts_live_nodes_only():
    g = Graph()
    x = g.input((4, 4))
    g.relu(x)  # dead: no output depends on it
    g.weight((1000, 1000))  # an unused bias, as TENSAT's .model files have
    g.output(g.sigmoid(x))
    assert UnitCostModel().graph_cost(g) == 1.0


def test_graph_without_outputs_is_an_error():
    g = Graph()
    g.relu(g.input((2,)))
    with pytest.raises(GraphError, match="no outputs"):
        UnitCostModel().graph_cost(g)


def test_breakdown_sums_to_the_graph_cost():
    g = Graph()
    x = g.input((1, 16, 32, 32))
    w = g.weight((16, 16, 3, 3))
    a = g.conv2d(x, w, activation="relu")
    b = g.conv2d(a, w)
    y = g.relu(g.ewadd(a, b))
    g.output(g.reshape(g.concat([y, a], axis=1), (1, 32 * 32 * 32)))
    m = RooflineCostModel()
    r = cost_breakdown(m, g)
    assert r.total_ms == pytest.approx(m.graph_cost(g))
    assert sum(r.by_op.values()) == pytest.approx(r.total_ms)
    assert sum(r.by_kind.values()) == pytest.approx(r.total_ms)
    assert r.count_by_op == {"conv2d": 2, "concat": 1, "ewadd": 1, "relu": 1, "reshape": 1}
    assert r.by_op["reshape"] == 0.0
    assert r.kernels == 5
    assert list(r.by_op.values()) == sorted(r.by_op.values(), reverse=True)
    d = r.to_dict()
    assert d["cost_ms"] == r.total_ms and d["by_op"] == r.by_op
