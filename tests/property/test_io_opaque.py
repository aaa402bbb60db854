"""Property test for the opaque op: for random shapes, the shapes ONNX inference recorded at
import equal what its onnxruntime semantics computes, and the values equal numpy's."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

from tensor_eqsat.io.onnx_import import import_onnx  # noqa: E402

dims = st.integers(1, 5)
shapes = st.lists(dims, min_size=1, max_size=4).map(tuple)

# ONNX ops the IR does not model, with their numpy meaning.
CASES = {
    "Exp": (lambda shape: ({}, []), lambda x, a: np.exp(x)),
    "ReduceSum": (
        lambda shape: ({"keepdims": 1}, [np.array([len(shape) - 1], np.int64)]),
        lambda x, a: x.sum(axis=-1, keepdims=True),
    ),
    "Pad": (
        lambda shape: ({"mode": "edge"}, [np.array([1] * len(shape) + [0] * len(shape), np.int64)]),
        lambda x, a: np.pad(x, [(1, 0)] * x.ndim, mode="edge"),
    ),
}


@given(st.sampled_from(sorted(CASES)), shapes, st.integers(0, 3))
def test_opaque_shapes_and_values(op, shape, seed):
    make, reference = CASES[op]
    attrs, consts = make(shape)
    names = [f"c{i}" for i in range(len(consts))]
    graph = helper.make_graph(
        [helper.make_node(op, ["x", *names], ["y"], **attrs)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(c, n) for c, n in zip(consts, names, strict=True)],
    )
    g = import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    (node,) = [n for n in g.nodes if n.op == "opaque"]
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    (out,) = node.spec.evaluate([x], node.attrs)
    assert node.shapes == (out.shape,)
    assert node.spec.infer_shapes([shape], node.attrs) == node.shapes
    np.testing.assert_allclose(out, reference(x, attrs), rtol=1e-5, atol=1e-6)
