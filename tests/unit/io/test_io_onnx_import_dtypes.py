"""ONNX import of float16 and bfloat16 models: tensors and initializers keep their dtype, the
interpreter matches onnxruntime within the dtype's tolerance, and Cast between float dtypes (the
IR has no cast op) stays opaque with the payload's exact types."""

from __future__ import annotations

import numpy as np
import pytest
from io_helpers import ort_outputs
from onnx import TensorProto, helper, numpy_helper

from tensor_eqsat.io.onnx_import import import_onnx
from tensor_eqsat.ir.dtypes import tolerance
from tensor_eqsat.ir.interpreter import run

N = helper.make_node
H = TensorProto.FLOAT16


def _model(nodes, inputs, outputs, inits, opset=18):
    graph = helper.make_graph(
        nodes,
        "t",
        [helper.make_tensor_value_info(k, e, list(s)) for k, (e, s) in inputs.items()],
        [helper.make_tensor_value_info(k, e, None) for k, e in outputs.items()],
        [numpy_helper.from_array(v, k) if isinstance(v, np.ndarray) else v for k, v in inits.items()],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _close(got, want, dtype):
    tol = tolerance(dtype)
    scale = float(np.max(np.abs(want.astype(np.float32))))
    err = np.abs(got.astype(np.float32) - want.astype(np.float32))
    assert np.all(err <= tol.atol + tol.rtol * scale), float(err.max())


def test_float16_inputs_and_initializers_import_in_float16():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 4)).astype(np.float16)
    b = rng.standard_normal(4).astype(np.float16)
    nodes = [
        N("MatMul", ["x", "w"], ["m"]),
        N("Add", ["m", "b"], ["a"]),
        N("Clip", ["a", "lo", "hi"], ["c"]),
        N("Sub", ["c", "b"], ["y"]),
    ]
    inits = {"w": w, "b": b, "lo": np.array(0, np.float16), "hi": np.array(6, np.float16)}
    m = _model(nodes, {"x": (H, (3, 8))}, {"y": H}, inits)
    g = import_onnx(m)
    assert "opaque" not in g.op_counts()
    assert {n.dtypes[0] for n in g.nodes} == {"float16"}
    assert g.weight_data["w"].dtype == np.float16
    np.testing.assert_array_equal(g.weight_data["w"], w)
    x = rng.standard_normal((3, 8)).astype(np.float16)
    want = ort_outputs(m, {"x": x})[0]
    got = run(g, {"x": x})[0]
    assert got.dtype == np.float16
    _close(got, want, "float16")


def test_cast_between_float_dtypes_is_a_cast_op():
    nodes = [
        N("Cast", ["x"], ["f"], to=TensorProto.FLOAT),
        N("Relu", ["f"], ["r"]),
        N("Cast", ["r"], ["y"], to=H),
        N("Cast", ["y"], ["z"], to=H),  # to its own type: nothing
    ]
    m = _model(nodes, {"x": (H, (2, 5))}, {"z": H}, {})
    g = import_onnx(m)
    assert g.op_counts() == {"cast": 2, "relu": 1}
    relu = next(n for n in g.nodes if n.op == "relu")
    assert relu.dtypes == ("float32",)
    assert g.dtype_of(g.outputs[0]) == "float16"
    x = np.linspace(-2, 2, 10, dtype=np.float16).reshape(2, 5)
    np.testing.assert_array_equal(run(g, {"x": x})[0], ort_outputs(m, {"x": x})[0])


def test_bfloat16_initializers_import_in_bfloat16():
    bf = helper.make_tensor("w", TensorProto.BFLOAT16, [2, 3], [1.0, -2.5, 0.15625, 3.0, 0.5, -1.0])
    nodes = [N("Mul", ["x", "w"], ["y"])]
    m = _model(nodes, {"x": (TensorProto.BFLOAT16, (2, 3))}, {"y": TensorProto.BFLOAT16}, {"w": bf})
    g = import_onnx(m)
    assert g.op_counts() == {"ewmul": 1}
    w = next(n for n in g.nodes if n.op == "weight")
    assert w.dtypes == ("bfloat16",)
    np.testing.assert_array_equal(
        g.weight_data["w"], np.array([[1.0, -2.5, 0.15625], [3.0, 0.5, -1.0]], np.float32)
    )
    x = np.full((2, 3), 2.0, np.float32)
    np.testing.assert_array_equal(run(g, {"x": x})[0], 2.0 * g.weight_data["w"])


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_layernorm_without_bias_gets_a_zero_bias_of_the_input_dtype(dtype):
    elem = H if dtype == np.float16 else TensorProto.FLOAT
    nodes = [N("LayerNormalization", ["x", "s"], ["y"], axis=-1)]
    m = _model(nodes, {"x": (elem, (2, 4))}, {"y": elem}, {"s": np.ones(4, dtype)})
    g = import_onnx(m)
    assert g.op_counts() == {"layernorm": 1}
    assert {n.dtypes[0] for n in g.nodes} == {np.dtype(dtype).name}
