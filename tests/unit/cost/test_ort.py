"""The ONNX Runtime measured cost model: it must rank configurations as onnxruntime runs them."""

from __future__ import annotations

import pytest

from tensor_eqsat.cost import CostModelError, parse_cost_model
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.ops import get_op, op_names
from tensor_eqsat.ir.types import OpKind

pytest.importorskip("onnxruntime", reason="the ort cost model needs the 'onnx' extra")

from tensor_eqsat.cost.ort import OrtCostModel, input_roles, is_fused_epilogue, single_op_graph

FAST = dict(warmup=2, repeats=15, max_seconds=0.2)
SAME = ((1, 1), "same", "none")


def _model(tmp_path, **kw):
    return OrtCostModel(cache_path=tmp_path / "t.sqlite3", **{**FAST, **kw})


def test_spec_names_the_ort_model(tmp_path):
    m = parse_cost_model("measured:ort-cpu", cache_path=tmp_path / "t.sqlite3")
    assert isinstance(m, OrtCostModel) and m.spec == "measured:ort-cpu"
    assert "threads=1" in m.device_key and m.library.startswith("onnxruntime ")
    with pytest.raises(CostModelError, match="unknown device"):
        parse_cost_model("measured:ort-tpu")
    with pytest.raises(CostModelError, match="clock"):
        parse_cost_model("measured:ort-cpu", clock="wall")


def test_depthwise_is_far_cheaper_than_dense(tmp_path):
    m = _model(tmp_path)
    x = (1, 64, 28, 28)
    dense = m.op_cost("conv2d", SAME, (x, (64, 64, 3, 3)), False)
    depthwise = m.op_cost("conv2d", SAME, (x, (64, 1, 3, 3)), False)
    pointwise = m.op_cost("conv2d", SAME, (x, (64, 64, 1, 1)), False)
    # 64x fewer FLOPs; onnxruntime's depthwise kernel is far faster, never slower.
    assert depthwise * 4 < dense
    # a 1x1 conv enlarged to 3x3 (rule-created) costs what a 3x3 costs: more than the 1x1
    assert pointwise * 2 < dense


def test_gemm_shapes_rank_by_size(tmp_path):
    m = _model(tmp_path)
    small = m.op_cost("matmul", ("none",), ((16, 256), (256, 256)), False)
    large = m.op_cost("matmul", ("none",), ((256, 256), (256, 256)), False)
    assert small < large


def test_fused_epilogues_and_views(tmp_path):
    m = _model(tmp_path)
    x = (1, 32, 16, 16)
    assert is_fused_epilogue("ewadd", [x, (32, 1, 1)])
    assert m.op_cost("ewadd", (), (x, (32, 1, 1)), False) == 0.0
    assert m.op_cost("ewadd", (), (x, x), False) > 0.0
    # onnxruntime copies on Transpose; a reshape is free
    assert m.op_cost("transpose", ((1, 0),), ((64, 128),), False) > 0.0
    assert m.op_cost("reshape", ((128, 64),), ((64, 128),), False) == 0.0
    # folded weights stay free
    assert m.op_cost("transpose", ((1, 0),), ((64, 128),), True) == 0.0


def test_cache_is_keyed_by_threads_and_reused(tmp_path):
    m = _model(tmp_path)
    key = ("relu", (), ((1, 4096),), False)
    first = m.op_cost(*key)
    assert m.measured == 1
    again = _model(tmp_path)
    assert again.op_cost(*key) == first and again.measured == 0
    two = _model(tmp_path, threads=2)
    assert two.device_key != m.device_key
    two.op_cost(*key)
    assert two.measured == 1


CASES = {
    "ewadd": ((), ((2, 8), (2, 8))),
    "ewmul": ((), ((2, 8), (2, 8))),
    "relu": ((), ((2, 8),)),
    "tanh": ((), ((2, 8),)),
    "sigmoid": ((), ((2, 8),)),
    "smul": ((2.0,), ((2, 8),)),
    "sdiv": ((2.0,), ((2, 8),)),
    "gelu": (("none",), ((2, 8),)),
    "batchnorm": ((1e-5,), ((1, 4, 3, 3), (4,), (4,), (4,), (4,))),
    "softmax": ((1,), ((2, 8),)),
    "layernorm": ((1, 1e-5), ((2, 8), (8,), (8,))),
    "matmul": (("none",), ((4, 8), (8, 8))),
    "conv2d": (SAME, ((1, 4, 6, 6), (4, 4, 3, 3))),
    "poolmax": (((3, 3), (1, 1), "same", "none"), ((1, 4, 6, 6),)),
    "poolavg": (((3, 3), (1, 1), "same", "none"), ((1, 4, 6, 6),)),
    "concat": ((1,), ((2, 4), (2, 4))),
    "transpose": (((1, 0),), ((2, 8),)),
    "split": ((1, (4, 4)), ((2, 8),)),
    "silu": ((), ((2, 8),)),
    "hardsigmoid": ((), ((2, 8),)),
    "hardswish": ((), ((2, 8),)),
    "clip": ((0.0, 6.0), ((2, 8),)),
    "pow": ((2.0,), ((2, 8),)),
    "rsqrt": ((), ((2, 8),)),
    "pad": (((0, 1, 0, 2), "zero"), ((2, 8),)),
    "expand": (((4, 8),), ((1, 8),)),
    "mean": (((1,), True), ((2, 8),)),
    "cast": (("float16",), ((2, 8),)),
    "attention": ((0.5, 1.0, False, "nan"), ((2, 4, 4), (2, 4, 4), (2, 4, 4), (1, 4, 4))),
    "groupnorm": ((2, 1e-5), ((1, 4, 3, 3), (4,), (4,))),
}


def test_single_op_graphs_export_for_every_priced_op():
    from tensor_eqsat.io.onnx_export import export_onnx
    from tensor_eqsat.io.runtime import run_onnx

    m_kinds = (OpKind.LEAF, OpKind.VIEW, OpKind.WEIGHT_TRANSFORM)
    priced = {n for n in op_names() if get_op(n).kind not in m_kinds and n != "opaque"}
    assert priced - set(CASES) == set()
    for name, (attrs, shapes) in CASES.items():
        spec = get_op(name)
        canon = spec.make_attrs(**dict(zip(spec.attr_names, attrs, strict=True)))
        chain = 2 if len(spec.infer_shapes(shapes, canon)) == 1 else 1
        g = single_op_graph(spec, canon, shapes, chain=chain)
        assert run_onnx(export_onnx(g)), name


def test_input_roles():
    assert input_roles("matmul", [(2, 4, 8), (2, 8, 4)]) == ["input", "input"]
    assert input_roles("matmul", [(4, 8), (8, 4)]) == ["input", "weight"]
    g = single_op_graph(get_op("relu"), (), [(1, 8)], chain=2)
    assert isinstance(g, Graph) and [n.op for n in g.nodes] == ["input", "relu", "relu"]


def test_opaque_ops_on_bool_tensors_are_priced(tmp_path):
    # An attention mask as exporters write it: Equal makes a bool tensor that a Where reads.
    # Timing the Where as a chain (its own output fed back as the condition) or with float data
    # in its bool slot made onnxruntime refuse the timing model.
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from tensor_eqsat.io.onnx_import import import_onnx

    zero = helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])
    fill = helper.make_tensor("fill", TensorProto.FLOAT, [], [-1e4])
    graph = helper.make_graph(
        [
            helper.make_node("Equal", ["x", "zero"], ["mask"]),
            helper.make_node("Where", ["mask", "fill", "x"], ["masked"]),
            helper.make_node("Relu", ["masked"], ["y"]),
        ],
        "mask",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16])],
        [zero, fill],
    )
    g = import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert [n.op for n in g.nodes].count("opaque") == 2
    m = _model(tmp_path)
    assert m.graph_cost(g) > 0
