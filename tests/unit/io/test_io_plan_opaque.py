"""Execution plan helpers and the opaque op's registry entry."""

from __future__ import annotations

import numpy as np
import pytest
from io_helpers import make_model
from onnx import helper

from tensor_eqsat.errors import ShapeError
from tensor_eqsat.io.onnx_import import import_onnx
from tensor_eqsat.io.plan import fold_weights, weight_only_nodes
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.interpreter import run
from tensor_eqsat.ir.ops import decode_shapes, encode_shapes, get_op
from tensor_eqsat.ir.serialize import dumps, loads
from tensor_eqsat.ir.types import OpKind


def _opaque_graph() -> Graph:
    m = make_model(
        [helper.make_node("Pad", ["x", "p"], ["y"], mode="edge")],
        {"x": (2, 3)},
        {"y": None},
        {"p": np.array([0, 1, 0, 1], np.int64)},
    )
    return import_onnx(m)


def test_opaque_attributes_shapes_and_cost_class():
    g = _opaque_graph()
    (node,) = [n for n in g.nodes if n.op == "opaque"]
    a = node.attr_dict()
    assert (a["op_type"], a["domain"]) == ("Pad", "")
    assert decode_shapes(a["input_shapes"]) == ((2, 3),)
    assert decode_shapes(a["output_shapes"]) == ((2, 5),)
    spec = get_op("opaque")
    assert spec.kind is OpKind.ELEMENTWISE  # a generic memory-bound op to the cost models
    assert spec.flop_count([(2, 3)], node.attrs) == 10
    with pytest.raises(ShapeError, match="imported for input shapes"):
        spec.infer_shapes([(3, 3)], node.attrs)


def test_opaque_runs_in_the_interpreter_and_survives_json():
    g = _opaque_graph()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    want = np.pad(x, ((0, 0), (1, 1)), mode="edge")
    np.testing.assert_array_equal(run(g, {"x": x})[0], want)
    np.testing.assert_array_equal(run(loads(dumps(g)), {"x": x})[0], want)


def test_shape_encoding_round_trips_and_rejects_garbage():
    shapes = [(1, 2, 3), (), (7,)]
    assert decode_shapes(encode_shapes(shapes)) == tuple(shapes)
    with pytest.raises(ValueError, match="malformed"):
        decode_shapes((3, 1))


def test_weight_only_nodes_and_folding_use_data_or_the_interpreter_draw():
    g = Graph()
    x = g.input((2, 2), name="x")
    a = g.weight((2, 2), name="a", data=np.eye(2, dtype=np.float32))
    b = g.weight((2, 2), name="b")
    ab = g.ewadd(a, b)
    g.output(g.matmul(x, ab))
    const = weight_only_nodes(g)
    assert const == {a.node, b.node, ab.node}
    values = fold_weights(g, const, seed=2)
    np.testing.assert_array_equal(values[ab.ref], np.eye(2, dtype=np.float32) + values[b.ref])
    from tensor_eqsat.ir.interpreter import leaf_values

    np.testing.assert_array_equal(values[b.ref], leaf_values(g, seed=2)["b"])


def test_imported_graph_with_opaque_nodes_is_costed_by_every_cost_model():
    pytest.importorskip("torch")
    from tensor_eqsat.cost.measured import MeasuredCostModel
    from tensor_eqsat.cost.roofline import RooflineCostModel

    g = _opaque_graph()
    (node,) = [n for n in g.nodes if n.op == "opaque"]
    roofline = RooflineCostModel()
    assert roofline.kernel_ms(node.spec, node.attrs, ((2, 3),)) > 0
    measured = MeasuredCostModel(device="cpu", persistent=False, repeats=3, warmup=1)
    assert measured.kernel_ms(node.spec, node.attrs, ((2, 3),)) > 0
