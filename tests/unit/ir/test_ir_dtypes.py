"""Dtypes in the IR: inference with the shapes, rounding, the interpreter, JSON, casting."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tensor_eqsat.egraph import EGraph, ENode, MergeConflict, TensorAnalysis, TensorData
from tensor_eqsat.errors import FormatError, GraphError
from tensor_eqsat.ir.cast import cast_graph, precision
from tensor_eqsat.ir.dtypes import DType, DTypeError, round_bf16, round_fp16, round_to, round_values
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.interpreter import random_input, random_weight, run
from tensor_eqsat.ir.serialize import dumps, loads, to_dict


def mlp(dtype: str = "float32") -> Graph:
    g = Graph()
    x = g.input((4, 8), name="x", dtype=dtype)
    w = g.weight((8, 16), name="w", dtype=dtype)
    b = g.weight((16,), name="b", dtype=dtype, data=np.linspace(-1, 1, 16, dtype=np.float32))
    y = g.relu(g.ewadd(g.matmul(x, w), b))
    g.output(g.softmax(y, axis=-1))
    return g


@pytest.mark.parametrize("text", ["bf16", "bfloat16", "BF16"])
def test_parse_names_and_short_names(text):
    assert DType.parse(text) is DType.BFLOAT16
    with pytest.raises(ValueError, match=r"unknown dtype .fp8.*bfloat16 \(bf16\)"):
        DType.parse("fp8")


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_every_tensor_takes_the_leaves_dtype(dtype):
    g = mlp(dtype)
    assert {d for n in g.nodes for d in n.dtypes} == {dtype}
    g.validate()
    assert precision(g) is DType(dtype)


def test_floating_inputs_of_different_dtypes_are_refused():
    g = Graph()
    x = g.input((2, 2), dtype="fp16")
    y = g.input((2, 2), dtype="bf16")
    with pytest.raises(DTypeError, match="ewadd: inputs have different dtypes: float16, bfloat16"):
        g.ewadd(x, y)


def test_validate_catches_a_stored_dtype_that_inference_disagrees_with():
    g = mlp("float16")
    node = g.nodes[-1]
    g.nodes[-1] = type(node)(node.id, node.op, node.attrs, node.inputs, node.shapes, ("float32",))
    with pytest.raises(GraphError, match=r"stored dtypes \('float32',\) != inferred \('float16',\)"):
        g.validate()


def test_round_bf16_matches_torch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).standard_normal(10_000).astype(np.float32) * 1e3
    x[:4] = [np.inf, -np.inf, 3.4e38, 1e-40]
    want = torch.from_numpy(x).to(torch.bfloat16).float().numpy()
    np.testing.assert_array_equal(round_bf16(x), want)
    assert np.isnan(round_bf16(np.array([np.nan], np.float32)))[0]


@pytest.mark.parametrize(("dtype", "storage"), [("float16", np.float16), ("bfloat16", np.float32)])
def test_the_interpreter_rounds_every_value_to_its_dtype(dtype, storage):
    (out,) = run(mlp(dtype))
    assert out.dtype == storage
    np.testing.assert_array_equal(out, round_to(out.astype(np.float32), dtype))
    (ref,) = run(mlp("float32"))
    eps = DType(dtype).unit_roundoff
    assert 0 < np.abs(out.astype(np.float32) - ref).max() < 64 * eps


def test_weight_transforms_compute_in_float32_and_round_once():
    g = Graph()
    x = g.input((3,), name="x", dtype="fp16")
    values = (1.0, 2**-11, 2**-11)
    w = [g.weight((3,), name=f"w{i}", dtype="fp16", data=np.full(3, v)) for i, v in enumerate(values)]
    folded = g.ewadd(g.ewadd(w[0], w[1]), w[2])  # weight-only: 1 + 2**-10 exactly, if rounded once
    g.output(g.ewmul(x, folded))
    (out,) = run(g, {"x": np.ones(3, np.float32)})
    # Rounding after each ewadd would give 1.0 twice (2**-11 is half an ulp of 1 in float16: ties to even).
    np.testing.assert_array_equal(out, np.full(3, 1 + 2**-10, np.float16))


def test_random_values_are_the_float32_draws_rounded():
    g = mlp("bfloat16")
    (out,) = run(g, seed=3)
    f = cast_graph(g, "float32")
    x = round_bf16(random_input("x", (4, 8), 3))
    w = round_bf16(random_weight("w", (8, 16), 3))
    (ref,) = run(f, {"x": x}, {"w": w}, seed=3)
    assert np.abs(out - ref).max() < 0.05


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_json_round_trips_dtypes_and_weight_data(dtype):
    g = mlp(dtype)
    h = loads(dumps(g))
    assert [n.dtypes for n in h.nodes] == [n.dtypes for n in g.nodes]
    np.testing.assert_array_equal(h.weight_data["b"], g.weight_data["b"])
    assert h.weight_data["b"].dtype == g.weight_data["b"].dtype == DType(dtype).storage_dtype
    assert to_dict(g)["weights"]["b"]["dtype"] == dtype


def test_version_1_files_load_as_float32():
    data = to_dict(mlp("float32"))
    data["version"] = 1
    for node in data["nodes"]:
        node["attrs"].pop("dtype", None)
    for w in data["weights"].values():
        w.pop("dtype")
    g = loads(json.dumps(data))
    assert {d for n in g.nodes for d in n.dtypes} == {"float32"}


def test_weight_data_of_another_dtype_than_its_weight_is_refused():
    data = to_dict(mlp("float16"))
    data["weights"]["b"]["dtype"] = "float32"
    data["weights"]["b"]["data"] = to_dict(mlp("float32"))["weights"]["b"]["data"]
    with pytest.raises(FormatError, match="weight 'b' data is float32, the weight float16"):
        loads(json.dumps(data))


def test_cast_graph_keeps_names_and_values():
    g = mlp("float32")
    h = cast_graph(g, "fp16")
    assert precision(h) is DType.FLOAT16
    assert h.weight_data["b"].dtype == np.float16
    back = cast_graph(h, "float32")
    np.testing.assert_array_equal(back.weight_data["b"], h.weight_data["b"].astype(np.float32))


def test_the_analysis_carries_dtypes_and_refuses_to_merge_different_ones():
    a = TensorAnalysis()
    x = a.make("input", ((2, 3), "x", "bfloat16"), [])
    w = a.make("weight", ((3, 4), "w", "bfloat16"), [])
    assert a.make("matmul", ("none",), [x, w]) == TensorData(((2, 4),), False, ("bfloat16",))
    old = a.make("input", ((2, 3), "y"), [])  # a tuple written before dtypes: float32
    assert old.dtypes == ("float32",)
    with pytest.raises(MergeConflict, match="different dtypes"):
        a.merge(x, old)
    eg = EGraph(TensorAnalysis())
    f16 = eg.add(ENode("input", ((2, 2), "a", "float16"), ()))
    f32 = eg.add(ENode("input", ((2, 2), "b", "float32"), ()))
    with pytest.raises(DTypeError):
        eg.add(ENode("ewadd", (), (f16, f32)))


def test_an_opaque_node_has_the_dtypes_its_payload_declares():
    pytest.importorskip("onnx")
    import base64

    from onnx import TensorProto, helper

    from tensor_eqsat.ir.ops import encode_shapes

    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT16)
    graph = helper.make_graph(
        [node],
        "cast",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    payload = base64.b64encode(model.SerializeToString()).decode()
    g = Graph()
    x = g.input((2, 3), name="x")
    (y,) = g.add(
        "opaque",
        [x],
        op_type="Cast",
        payload=payload,
        input_shapes=encode_shapes([(2, 3)]),
        output_shapes=encode_shapes([(2, 3)]),
    )
    assert y.dtype == "float16"
    z = g.relu(y)  # a float16 op after the cast
    g.output(z)
    (out,) = run(g, {"x": np.array([[1, -2, 3], [4, 5, -6]], np.float32)})
    assert out.dtype == np.float16 and out.tolist() == [[1, 0, 3], [4, 5, 0]]


def _odd_values() -> np.ndarray:
    """Normal values, float16 subnormals and overflows, ties, signed zeros, NaN, infinity, and
    random bit patterns (every exponent), over several rounding chunks."""
    rng = np.random.default_rng(7)
    edges = [np.nan, np.inf, -np.inf, 0.0, -0.0, 65504, 65519.99, 65520, -65520, 6.1035156e-05]
    edges += [6.1035152e-05, 2.0**-25, -(2.0**-25), 3 * 2.0**-25, 2.0**-24 * 1.5, 1e-40, 3.4e38]
    return np.concatenate(
        [
            np.array(edges, np.float32),
            rng.standard_normal(300_000).astype(np.float32),
            (rng.standard_normal(300_000) * 1e-6).astype(np.float32),
            rng.integers(0, 2**32, 300_000, dtype=np.uint64).astype(np.uint32).view(np.float32),
        ]
    )


def test_round_fp16_is_the_cast_bit_for_bit():
    x = _odd_values()
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).astype(np.float32)
    got = round_fp16(x)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got.view(np.uint32)[~nan], want.view(np.uint32)[~nan])
    assert round_fp16(np.zeros((0, 3), np.float32)).shape == (0, 3)
    assert round_fp16(np.float32(1.00048828125)).shape == ()


def test_round_bf16_over_several_chunks_matches_torch():
    torch = pytest.importorskip("torch")
    x = _odd_values()
    want = torch.from_numpy(x).to(torch.bfloat16).float().numpy()
    got = round_bf16(x)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got.view(np.uint32)[~nan], want.view(np.uint32)[~nan])


def test_round_values_keeps_float32_storage():
    x = np.array([1.00048828125, 1.01171875], np.float32)
    assert round_values(x, "fp16").dtype == np.float32
    np.testing.assert_array_equal(round_values(x, "bf16"), round_bf16(x))
    np.testing.assert_array_equal(round_values(x, "fp16"), x.astype(np.float16).astype(np.float32))
    np.testing.assert_array_equal(round_values(x, "fp32"), x)
