"""The op registry: which ops exist, their facts, FLOP and byte counts."""

from __future__ import annotations

import pytest

from tensor_eqsat.errors import GraphError
from tensor_eqsat.ir.ops import get_op, op_names
from tensor_eqsat.ir.opspec import AttrSpec, OpSpec, register
from tensor_eqsat.ir.types import OpKind

TENSAT_OPS = {
    "input", "weight", "ewadd", "ewmul", "smul", "transpose", "matmul", "conv2d", "enlarge", "dropout",
    "relu", "tanh", "sigmoid", "poolmax", "poolavg", "concat", "split", "merge", "reshape", "noop",
    "batchnorm",
}  # fmt: skip
TRANSFORMER_OPS = {"softmax", "layernorm", "gelu", "sdiv"}
ONNX_OPS = {"opaque"}  # an ONNX operator the IR does not model, run by onnxruntime
# today's inference graphs' ops, and what the inference rules introduce
INFERENCE_OPS = {
    "silu", "hardsigmoid", "hardswish", "clip", "pow", "rsqrt", "pad", "slice", "expand", "mean",
    "bnfold_weight", "bnfold_bias", "attention",
}  # fmt: skip
DTYPE_OPS = {"cast"}


def test_operator_set():
    names = op_names()
    assert len(names) == len(set(names)) == 40
    assert set(names) == TENSAT_OPS | TRANSFORMER_OPS | ONNX_OPS | INFERENCE_OPS | DTYPE_OPS


def test_views_are_exactly_the_free_ops():
    views = {n for n in op_names() if get_op(n).is_view}
    assert views == {"reshape", "transpose", "split", "dropout", "noop", "slice"}
    assert get_op("concat").kind is OpKind.MEMORY  # concat moves bytes (DESIGN.md decision 5)
    assert {n for n in op_names() if get_op(n).is_leaf} == {"input", "weight"}


def test_every_spec_is_complete():
    for name in op_names():
        spec = get_op(name)
        assert spec.name == name
        assert spec.doc, name
        assert callable(spec.infer) and callable(spec.compute) and callable(spec.flops)
        assert len(set(spec.attr_names)) == len(spec.attr_names), name
        for a in spec.attrs:
            assert a.kind in {"int", "float", "ints", "dims", "str", "bool", "enum"}, (name, a.name)
            if not a.required and a.kind == "enum":
                assert a.default in a.choices, (name, a.name)
        assert spec.variadic == (name in {"concat", "noop", "opaque", "attention"}), name


def test_get_op_unknown():
    with pytest.raises(GraphError, match="unknown op 'nope'"):
        get_op("nope")


def test_register_twice_is_refused():
    spec = get_op("relu")
    with pytest.raises(ValueError, match="op 'relu' registered twice"):
        register(
            OpSpec(
                name="relu",
                inputs=spec.inputs,
                attrs=(),
                infer=spec.infer,
                compute=spec.compute,
                flops=spec.flops,
                kind=spec.kind,
            )
        )


def test_attr_accessors():
    spec = get_op("conv2d")
    attrs = spec.make_attrs(stride=(2, 1), activation="relu")
    assert attrs == ((2, 1), "same", "relu")
    assert spec.attr(attrs, "stride") == (2, 1)
    assert spec.attr_dict(attrs) == {"stride": (2, 1), "padding": "same", "activation": "relu"}
    assert AttrSpec("k", "int").required and not AttrSpec("k", "int", default=0).required


# -- counts --------------------------------------------------------------------------------------


def flops(op: str, shapes, **attrs) -> int:
    spec = get_op(op)
    return spec.flop_count(shapes, spec.make_attrs(**attrs))


def nbytes(op: str, shapes, **attrs) -> int:
    spec = get_op(op)
    return spec.byte_count(shapes, spec.make_attrs(**attrs))


def test_conv2d_counts():
    # 2 * N * Cout * Ho * Wo * (Cin / groups) * kH * kW
    assert flops("conv2d", [(1, 64, 56, 56), (64, 64, 3, 3)]) == 2 * 64 * 56 * 56 * 64 * 9
    assert flops("conv2d", [(2, 8, 8, 8), (16, 2, 3, 3)], stride=(2, 2)) == 2 * 2 * 16 * 4 * 4 * 2 * 9
    assert flops("conv2d", [(1, 32, 10, 10), (32, 1, 3, 3)], padding="valid") == 2 * 32 * 8 * 8 * 9
    reads = 64 * 56 * 56 + 64 * 64 * 9
    assert nbytes("conv2d", [(1, 64, 56, 56), (64, 64, 3, 3)]) == 4 * (reads + 64 * 56 * 56)


def test_matmul_counts():
    assert flops("matmul", [(3, 4), (4, 5)]) == 2 * 3 * 5 * 4
    assert flops("matmul", [(2, 1, 3, 4), (5, 4, 6)]) == 2 * 2 * 5 * 3 * 6 * 4
    assert nbytes("matmul", [(3, 4), (4, 5)]) == 4 * (12 + 20 + 15)


def test_elementwise_and_pool_counts():
    assert flops("ewadd", [(2, 1, 4), (3, 1)]) == 2 * 3 * 4
    assert nbytes("ewadd", [(2, 1, 4), (3, 1)]) == 4 * (8 + 3 + 24)
    assert flops("relu", [(10,)]) == 10
    assert flops("poolmax", [(1, 2, 8, 8)], kernel=(3, 3), stride=(2, 2), padding="same") == 2 * 16 * 9


@pytest.mark.parametrize(
    ("op", "shapes", "attrs"),
    [
        ("reshape", [(2, 3)], {"shape": (6,)}),
        ("transpose", [(2, 3)], {"perm": (1, 0)}),
        ("split", [(2, 4)], {"axis": 1, "sizes": (1, 3)}),
        ("dropout", [(2, 3)], {}),
        ("noop", [(2, 3), (4,)], {}),
        ("input", [], {"shape": (5,), "name": "x"}),
    ],
)
def test_views_and_leaves_are_free(op, shapes, attrs):
    assert flops(op, shapes, **attrs) == 0
    assert nbytes(op, shapes, **attrs) == 0


def test_concat_moves_bytes_but_computes_nothing():
    assert flops("concat", [(2, 3), (2, 5)], axis=1) == 0
    assert nbytes("concat", [(2, 3), (2, 5)], axis=1) == 4 * 2 * (8 + 8)


def test_weight_transforms_compute_nothing():
    assert flops("merge", [(8, 2, 3, 3)], count=2, groups=4) == 0
    assert flops("enlarge", [(8, 2, 1, 1), (8, 2, 3, 3)]) == 0
