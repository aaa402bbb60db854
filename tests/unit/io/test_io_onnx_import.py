"""ONNX import: every mapped operator matches onnxruntime, and the mapping is the one documented."""

from __future__ import annotations

import math

import numpy as np
import pytest
from io_helpers import check_import, make_model, rand
from onnx import TensorProto, helper, numpy_helper

from tensor_eqsat.errors import FormatError
from tensor_eqsat.io.onnx_export import export_onnx
from tensor_eqsat.io.onnx_import import UnsupportedOpError, import_onnx
from tensor_eqsat.io.runtime import run_onnx
from tensor_eqsat.ir.interpreter import run

N = helper.make_node


def ops(g):
    return g.op_counts()


def attrs_of(g, op):
    return [n.attr_dict() for n in g.nodes if n.op == op]


# -- Conv ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "kernel", "stride", "pads", "padding"),
    [
        (8, 3, 1, [1, 1, 1, 1], "same"),
        (8, 3, 2, [0, 0, 1, 1], "same"),  # TASO/TF SAME on an even size: extra pad after
        (7, 3, 2, [1, 1, 1, 1], "same"),
        (8, 3, 1, [0, 0, 0, 0], "valid"),
        (8, 1, 1, [0, 0, 0, 0], "same"),  # 1x1: SAME and VALID coincide; TASO calls it SAME
    ],
)
def test_conv_pads_that_match_same_or_valid_map_to_them(size, kernel, stride, pads, padding):
    m = make_model(
        [N("Conv", ["x", "w"], ["y"], pads=pads, strides=[stride, stride])],
        {"x": (1, 3, size, size)},
        {"y": None},
        {"w": rand(4, 3, kernel, kernel)},
    )
    g = check_import(m)
    assert ops(g) == {"conv2d": 1}
    assert attrs_of(g, "conv2d")[0]["padding"] == padding


def test_conv_with_pytorch_style_pads_gets_an_explicit_pad():
    # stride 2, pad 1 on an even size: not TASO's SAME (which pads (0, 1)), so a pad + VALID conv.
    m = make_model(
        [N("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], strides=[2, 2])],
        {"x": (1, 3, 8, 8)},
        {"y": None},
        {"w": rand(4, 3, 3, 3)},
    )
    g = check_import(m)
    assert ops(g) == {"pad": 1, "conv2d": 1}
    assert attrs_of(g, "pad") == [{"pads": (0, 0, 1, 1, 0, 0, 1, 1), "fill": "zero"}]
    assert attrs_of(g, "conv2d")[0]["padding"] == "valid"
    assert ops(import_onnx(m, strict=True)) == {"pad": 1, "conv2d": 1}  # no opaque node left


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
def test_conv_auto_pad(auto_pad):
    m = make_model(
        [N("Conv", ["x", "w"], ["y"], auto_pad=auto_pad, strides=[2, 2])],
        {"x": (1, 2, 8, 8)},
        {"y": None},
        {"w": rand(3, 2, 3, 3)},
    )
    g = check_import(m)
    expected = {"SAME_UPPER": {"conv2d": 1}, "VALID": {"conv2d": 1}, "SAME_LOWER": {"pad": 1, "conv2d": 1}}
    assert ops(g) == expected[auto_pad]


def test_grouped_conv_with_bias_and_relu():
    # With a bias the relu cannot be fused (it follows the bias add).
    m = make_model(
        [N("Conv", ["x", "w", "b"], ["c"], group=2, pads=[1, 1, 1, 1]), N("Relu", ["c"], ["y"])],
        {"x": (2, 4, 6, 6)},
        {"y": (2, 6, 6, 6)},
        {"w": rand(6, 2, 3, 3), "b": rand(6)},
    )
    g = check_import(m)
    assert ops(g) == {"conv2d": 1, "ewadd": 1, "relu": 1}
    w = next(n for n in g.nodes if n.op == "weight" and n.shapes[0] == (6, 1, 1))
    assert g.name_of(w.id) == "b"


@pytest.mark.parametrize("act", ["Relu", "Sigmoid", "Tanh"])
def test_activation_is_fused_into_a_bias_free_conv(act):
    m = make_model(
        [N("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), N(act, ["c"], ["y"])],
        {"x": (1, 3, 5, 5)},
        {"y": None},
        {"w": rand(2, 3, 3, 3)},
    )
    g = check_import(m)
    assert ops(g) == {"conv2d": 1}
    assert attrs_of(g, "conv2d")[0]["activation"] == act.lower()


def test_activation_is_not_fused_when_the_conv_output_has_another_reader():
    m = make_model(
        [
            N("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
            N("Relu", ["c"], ["r"]),
            N("Add", ["c", "r"], ["y"]),
        ],
        {"x": (1, 3, 5, 5)},
        {"y": None},
        {"w": rand(3, 3, 3, 3)},
    )
    g = check_import(m)
    assert ops(g) == {"conv2d": 1, "relu": 1, "ewadd": 1}
    assert attrs_of(g, "conv2d")[0]["activation"] == "none"


def test_activation_is_not_fused_when_the_conv_output_is_a_graph_output():
    m = make_model(
        [N("Conv", ["x", "w"], ["c"]), N("Relu", ["c"], ["y"])],
        {"x": (1, 3, 5, 5)},
        {"c": None, "y": None},
        {"w": rand(3, 3, 1, 1)},
    )
    g = check_import(m)
    assert ops(g) == {"conv2d": 1, "relu": 1}


def test_dilated_conv_stays_opaque_and_is_an_error_under_strict():
    m = make_model(
        [N("Conv", ["x", "w"], ["y"], dilations=[2, 2], pads=[2, 2, 2, 2])],
        {"x": (1, 2, 8, 8)},
        {"y": None},
        {"w": rand(2, 2, 3, 3)},
    )
    g = check_import(m)
    assert ops(g) == {"opaque": 1}
    assert attrs_of(g, "opaque")[0]["op_type"] == "Conv"
    with pytest.raises(UnsupportedOpError, match=r"node 0 \(Conv\).*dilations"):
        import_onnx(m, strict=True)


def test_conv1d_stays_opaque():
    m = make_model([N("Conv", ["x", "w"], ["y"])], {"x": (1, 2, 8)}, {"y": None}, {"w": rand(3, 2, 3)})
    assert ops(check_import(m)) == {"opaque": 1}


# -- Gemm / MatMul -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("trans_a", "trans_b", "alpha", "beta", "with_c"),
    [
        (0, 0, 1.0, 1.0, True),
        (0, 1, 1.0, 1.0, True),
        (1, 0, 0.5, 2.0, True),
        (1, 1, 2.0, 0.0, True),
        (0, 1, 1.0, 1.0, False),
    ],
)
def test_gemm_exact_semantics(trans_a, trans_b, alpha, beta, with_c):
    a_shape = (5, 3) if trans_a else (3, 5)
    b_shape = (4, 5) if trans_b else (5, 4)
    inputs = ["a", "b", "c"] if with_c else ["a", "b"]
    inits = {"b": rand(*b_shape)}
    if with_c:
        inits["c"] = rand(4)
    m = make_model(
        [N("Gemm", inputs, ["y"], transA=trans_a, transB=trans_b, alpha=alpha, beta=beta)],
        {"a": a_shape},
        {"y": None},
        inits,
    )
    g = check_import(m)
    assert ops(g)["matmul"] == 1
    assert ("smul" in ops(g)) == (alpha != 1.0)
    assert ("ewadd" in ops(g)) == (with_c and beta != 0.0)


def test_gemm_with_activation_input_c_and_relu_fusion_without_c():
    m = make_model(
        [N("Gemm", ["a", "b", "c"], ["t"], beta=0.5), N("Gemm", ["t", "b2"], ["u"]), N("Relu", ["u"], ["y"])],
        {"a": (2, 3), "b": (3, 4), "c": (2, 4)},
        {"y": None},
        {"b2": rand(4, 4)},
    )
    g = check_import(m)
    assert [a["activation"] for a in attrs_of(g, "matmul")] == ["none", "relu"]


@pytest.mark.parametrize(
    ("a", "b"),
    [((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (3, 4, 5)), ((4,), (4, 5)), ((2, 3, 4), (4,)), ((4,), (4,))],
)
def test_matmul_broadcasting_and_vectors(a, b):
    m = make_model([N("MatMul", ["a", "b"], ["y"])], {"a": a, "b": b}, {"y": None})
    g = check_import(m)
    assert ops(g)["matmul"] == 1


# -- element-wise -----------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["Add", "Mul", "Sub"])
@pytest.mark.parametrize(("sa", "sb"), [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 4))])
def test_binary_broadcasting_between_activations(op, sa, sb):
    m = make_model([N(op, ["a", "b"], ["y"])], {"a": sa, "b": sb}, {"y": None})
    check_import(m, rtol=0, atol=0)  # exact: Sub is a + (-b)


def test_constant_operands():
    c = rand(4)
    m = make_model(
        [
            N("Mul", ["x", "half"], ["m"]),  # one-element constant: smul
            N("Sub", ["m", "c"], ["s"]),  # minus a constant: + (-c)
            N("Sub", ["c", "s"], ["t"]),  # constant minus: (-s) + c
            N("Div", ["t", "three"], ["d"]),  # division by a constant: sdiv
            N("Mul", ["d", "c"], ["y"]),  # tensor constant: ewmul with a weight
        ],
        {"x": (2, 4)},
        {"y": None},
        {"half": np.array([0.5], np.float32), "c": c, "three": np.array(3.0, np.float32)},
    )
    g = check_import(m, rtol=0, atol=0)
    assert ops(g) == {"smul": 2, "ewadd": 2, "sdiv": 1, "ewmul": 1}
    assert {a["scalar"] for a in attrs_of(g, "smul")} == {0.5, -1.0}
    assert attrs_of(g, "sdiv")[0]["divisor"] == 3.0


def test_mul_by_a_scalar_that_widens_the_shape_is_not_smul():
    m = make_model(
        [N("Mul", ["x", "c"], ["y"])], {"x": (3,)}, {"y": None}, {"c": np.ones((2, 1), np.float32)}
    )
    assert ops(check_import(m)) == {"ewmul": 1}


def test_div_by_a_varying_constant_or_an_activation_stays_opaque():
    m = make_model(
        [N("Div", ["x", "c"], ["t"]), N("Div", ["t", "x"], ["y"])],
        {"x": (2, 3)},
        {"y": None},
        {"c": np.array([1.0, 2.0, 3.0], np.float32)},
    )
    g = check_import(m)
    assert ops(g) == {"opaque": 2}
    with pytest.raises(UnsupportedOpError, match="Div"):
        import_onnx(m, strict=True)


def test_sum_neg_identity_cast():
    m = make_model(
        [
            N("Sum", ["a", "b", "a"], ["s"]),
            N("Neg", ["s"], ["n"]),
            N("Identity", ["n"], ["i"]),
            N("Cast", ["i"], ["y"], to=TensorProto.FLOAT),
        ],
        {"a": (3,), "b": (3,)},
        {"y": None},
    )
    assert ops(check_import(m)) == {"ewadd": 2, "smul": 1}


@pytest.mark.parametrize(("op", "ir"), [("Relu", "relu"), ("Sigmoid", "sigmoid"), ("Tanh", "tanh")])
def test_unary(op, ir):
    m = make_model([N(op, ["x"], ["y"])], {"x": (2, 5)}, {"y": None})
    assert ops(check_import(m)) == {ir: 1}


# -- GELU -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_op(approximate):
    m = make_model([N("Gelu", ["x"], ["y"], approximate=approximate)], {"x": (3, 7)}, {"y": None}, opset=20)
    g = check_import(m)
    assert attrs_of(g, "gelu") == [{"approximate": approximate}]


def _erf_gelu(variant: str):
    half = np.array(0.5, np.float32)
    one = np.array(1.0, np.float32)
    inits = {"half": half, "one": one}
    if variant == "mul_inv_sqrt2":
        scale = [N("Mul", ["x", "inv"], ["d"])]
        inits["inv"] = np.array(1 / math.sqrt(2), np.float32)
    else:
        scale = [N("Div", ["x", "sqrt2"], ["d"])]
        inits["sqrt2"] = np.array(math.sqrt(2), np.float32)
    head = [*scale, N("Erf", ["d"], ["e"]), N("Add", ["e", "one"], ["s"])]
    tails = {
        "x_s_half": [N("Mul", ["x", "s"], ["m"]), N("Mul", ["m", "half"], ["y"])],
        "x_half_s": [N("Mul", ["x", "half"], ["m"]), N("Mul", ["m", "s"], ["y"])],
        "s_half_x": [N("Mul", ["s", "half"], ["m"]), N("Mul", ["x", "m"], ["y"])],
        "mul_inv_sqrt2": [N("Mul", ["half", "x"], ["m"]), N("Mul", ["s", "m"], ["y"])],
    }
    return make_model(head + tails[variant], {"x": (4, 6)}, {"y": None}, inits)


@pytest.mark.parametrize("variant", ["x_s_half", "x_half_s", "s_half_x", "mul_inv_sqrt2"])
def test_erf_gelu_pattern_becomes_one_gelu(variant):
    g = check_import(_erf_gelu(variant))
    assert ops(g) == {"gelu": 1}
    assert attrs_of(g, "gelu") == [{"approximate": "none"}]


def test_erf_gelu_pattern_is_left_alone_when_an_intermediate_is_read_elsewhere():
    m = _erf_gelu("x_s_half")
    m.graph.output.append(helper.make_tensor_value_info("e", TensorProto.FLOAT, None))
    g = check_import(m)
    assert "gelu" not in ops(g)
    assert attrs_of(g, "opaque")[0]["op_type"] == "Erf"


# -- pools ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pads", "stride", "expect"),
    [
        ([1, 1, 1, 1], 1, {"poolmax": 1}),
        ([0, 0, 1, 1], 2, {"poolmax": 1}),
        ([1, 1, 1, 1], 2, {"pad": 1, "poolmax": 1}),  # -inf padding, then VALID
    ],
)
def test_maxpool(pads, stride, expect):
    m = make_model(
        [N("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], pads=pads, strides=[stride, stride])],
        {"x": (1, 2, 8, 8)},
        {"y": None},
    )
    assert ops(check_import(m)) == expect


@pytest.mark.parametrize(
    ("pads", "stride", "include", "expect"),
    [
        ([1, 1, 1, 1], 1, 0, {"poolavg": 1}),
        ([0, 0, 0, 0], 2, 0, {"poolavg": 1}),
        ([1, 1, 1, 1], 1, 1, {"pad": 1, "poolavg": 1}),  # padding counted: pad(0) + VALID
        ([1, 1, 1, 1], 2, 0, {"opaque": 1}),  # excluded padding that is not SAME: kept whole
    ],
)
def test_averagepool(pads, stride, include, expect):
    m = make_model(
        [
            N(
                "AveragePool",
                ["x"],
                ["y"],
                kernel_shape=[3, 3],
                pads=pads,
                strides=[stride, stride],
                count_include_pad=include,
            )
        ],
        {"x": (1, 2, 8, 8)},
        {"y": None},
    )
    g = check_import(m)
    assert ops(g) == expect


def test_pool_ceil_mode_is_kept_when_it_changes_nothing_and_opaque_otherwise():
    same = make_model(
        [N("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)],
        {"x": (1, 1, 8, 8)},
        {"y": None},
    )
    assert ops(check_import(same)) == {"poolmax": 1}
    odd = make_model(
        [N("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)],
        {"x": (1, 1, 7, 7)},
        {"y": None},
    )
    assert ops(check_import(odd)) == {"opaque": 1}


@pytest.mark.parametrize("include", [0, 1])
def test_ceil_mode_average_pool_with_one_window_over_the_whole_map_is_the_spatial_mean(include):
    # HF EfficientNet's final AvgPool2d(1280, ceil_mode=True) on a 7x7 map: one clipped window.
    m = make_model(
        [
            N(
                "AveragePool",
                ["x"],
                ["y"],
                kernel_shape=[16, 16],
                strides=[16, 16],
                ceil_mode=1,
                count_include_pad=include,
            )
        ],
        {"x": (2, 3, 7, 5)},
        {"y": None},
    )
    g = check_import(m)  # (the IR interpreter against onnxruntime)
    assert ops(g) == {"mean": 1}
    assert attrs_of(g, "mean")[0] == {"axes": (2, 3), "keepdims": True}


@pytest.mark.parametrize(
    ("kernel", "strides", "pads"),
    [
        ((16, 4), (16, 4), (0, 0, 0, 0)),  # the whole height but two windows across
        ((16, 16), (16, 16), (1, 1, 1, 1)),  # padded
        ((6, 6), (6, 6), (0, 0, 0, 0)),  # windows that do not cover the map
    ],
)
def test_other_ceil_mode_average_pools_are_not_the_mean(kernel, strides, pads):
    m = make_model(
        [
            N(
                "AveragePool",
                ["x"],
                ["y"],
                kernel_shape=list(kernel),
                strides=list(strides),
                pads=list(pads),
                ceil_mode=1,
            )
        ],
        {"x": (1, 2, 7, 7)},
        {"y": None},
    )
    assert "mean" not in ops(check_import(m))


def test_global_pools_and_fused_relu():
    m = make_model(
        [N("GlobalAveragePool", ["x"], ["a"]), N("GlobalMaxPool", ["x"], ["b"]), N("Relu", ["b"], ["c"])],
        {"x": (2, 3, 5, 4)},
        {"a": None, "c": None},
    )
    g = check_import(m)
    assert ops(g) == {"poolavg": 1, "poolmax": 1}
    assert attrs_of(g, "poolmax")[0]["activation"] == "relu"


def test_maxpool_indices_output_is_opaque():
    m = make_model(
        [N("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2], strides=[2, 2])],
        {"x": (1, 1, 4, 4)},
        {"y": None},
    )
    g = check_import(m)
    assert ops(g) == {"opaque": 1}


# -- shape ops --------------------------------------------------------------------------------------


def test_concat_split_with_sizes_and_equal_parts():
    m = make_model(
        [
            N("Concat", ["a", "w"], ["c"], axis=-1),
            N("Split", ["c", "sizes"], ["s0", "s1"], axis=1),
            N("Split", ["s0"], ["t0", "t1"], axis=0),
        ],
        {"a": (4, 3)},
        {"s1": None, "t0": None, "t1": None},
        {"w": rand(4, 2), "sizes": np.array([1, 4], np.int64)},
    )
    g = check_import(m)
    assert ops(g) == {"concat": 1, "split": 2}
    assert [a["sizes"] for a in attrs_of(g, "split")] == [(1, 4), (2, 2)]


def test_split_num_outputs_opset18():
    m = make_model(
        [N("Split", ["x"], ["a", "b", "c"], axis=0, num_outputs=3)],
        {"x": (7, 2)},
        {"a": None, "b": None, "c": None},
        opset=18,
    )
    g = check_import(m)
    assert attrs_of(g, "split")[0]["sizes"] == (3, 3, 1)


def test_reshape_flatten_squeeze_unsqueeze_transpose_become_views():
    m = make_model(
        [
            N("Reshape", ["x", "shape"], ["r"]),
            N("Flatten", ["r"], ["f"], axis=1),
            N("Unsqueeze", ["f", "axes"], ["u"]),
            N("Squeeze", ["u", "axes"], ["q"]),
            N("Transpose", ["q"], ["y"]),
        ],
        {"x": (2, 3, 4)},
        {"y": None},
        {"shape": np.array([0, -1, 2], np.int64), "axes": np.array([-1], np.int64)},
    )
    g = check_import(m, rtol=0, atol=0)
    assert ops(g) == {"reshape": 4, "transpose": 1}
    assert attrs_of(g, "reshape")[0]["shape"] == (2, 6, 2)
    assert attrs_of(g, "transpose")[0]["perm"] == (1, 0)


def test_gather_with_constant_scalar_or_range_indices_becomes_split():
    m = make_model(
        [
            N("Gather", ["x", "i"], ["a"], axis=1),
            N("Gather", ["x", "r"], ["b"], axis=0),
            N("Gather", ["x", "p"], ["c"]),
        ],
        {"x": (4, 3, 2)},
        {"a": None, "b": None, "c": None},
        {"i": np.array(-1, np.int64), "r": np.array([1, 2], np.int64), "p": np.array([2, 0], np.int64)},
    )
    g = check_import(m, rtol=0, atol=0)
    assert ops(g) == {"split": 2, "reshape": 1, "opaque": 1}  # the permuted gather stays opaque


# -- normalization, softmax, dropout ----------------------------------------------------------------


def test_batchnorm():
    m = make_model(
        [N("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3)],
        {"x": (2, 3, 4, 4)},
        {"y": None},
        {"s": rand(3), "b": rand(3), "m": rand(3), "v": rand(3, positive=True)},
    )
    g = check_import(m)
    assert attrs_of(g, "batchnorm")[0]["eps"] == pytest.approx(1e-3)


@pytest.mark.parametrize("axis", [-1, 1])
def test_softmax(axis):
    m = make_model([N("Softmax", ["x"], ["y"], axis=axis)], {"x": (2, 3, 4)}, {"y": None})
    g = check_import(m)
    assert attrs_of(g, "softmax")[0]["axis"] == axis % 3


def test_layernorm_with_bias_without_bias_and_broadcast_scale():
    m = make_model(
        [
            N("LayerNormalization", ["x", "s", "b"], ["a"], axis=-1, epsilon=1e-6),
            N("LayerNormalization", ["a", "s2"], ["y"], axis=1),
        ],
        {"x": (2, 3, 4)},
        {"y": None},
        {"s": rand(4), "b": rand(4), "s2": rand(1, 4)},
    )
    g = check_import(m, rtol=1e-4, atol=1e-4)
    assert [a["axis"] for a in attrs_of(g, "layernorm")] == [2, 1]


def test_dropout_is_inference_identity_and_training_mode_is_opaque():
    m = make_model(
        [N("Dropout", ["x", "r"], ["y"])], {"x": (2, 3)}, {"y": None}, {"r": np.array(0.1, np.float32)}
    )
    g = check_import(m, rtol=0, atol=0)
    assert attrs_of(g, "dropout") == [{"rate": pytest.approx(0.1)}]
    mask = make_model([N("Dropout", ["x"], ["y", "mask"])], {"x": (2, 3)}, {"y": None})
    mask.graph.output.append(helper.make_tensor_value_info("mask", TensorProto.BOOL, [2, 3]))
    g = import_onnx(mask)
    assert ops(g) == {"opaque": 1}


# -- constants, folding, opaque ---------------------------------------------------------------------


def test_constant_node_and_initializers_become_weights_with_data():
    c = rand(2, 3)
    m = make_model(
        [
            N("Constant", [], ["k"], value=helper.make_tensor("v", TensorProto.FLOAT, [2, 3], c.ravel())),
            N("Add", ["x", "k"], ["y"]),
        ],
        {"x": (2, 3)},
        {"y": None},
    )
    g = check_import(m)
    (w,) = g.weights()
    np.testing.assert_array_equal(g.weight_data[g.name_of(w.id)], c)


def test_shape_arithmetic_is_folded_into_constants():
    # Reshape(x, Concat(Shape(x)[0:1], [-1])): a shape computed at run time, folded at import.
    m = make_model(
        [
            N("Shape", ["x"], ["s"]),
            N("Gather", ["s", "zero"], ["n"], axis=0),
            N("Unsqueeze", ["n", "axes"], ["n1"]),
            N("Concat", ["n1", "minus1"], ["target"], axis=0),
            N("Reshape", ["x", "target"], ["y"]),
        ],
        {"x": (2, 3, 4)},
        {"y": None},
        {"zero": np.array(0, np.int64), "axes": np.array([0], np.int64), "minus1": np.array([-1], np.int64)},
    )
    g = check_import(m)
    assert ops(g) == {"reshape": 1}
    assert attrs_of(g, "reshape")[0]["shape"] == (2, 12)


def test_weight_only_subgraphs_are_folded_at_import():
    m = make_model(
        [N("Transpose", ["w"], ["wt"]), N("MatMul", ["x", "wt"], ["y"])],
        {"x": (2, 3)},
        {"y": None},
        {"w": rand(4, 3)},
    )
    g = check_import(m)
    assert ops(g) == {"matmul": 1}


def test_unknown_op_is_opaque_with_embedded_int_constants():
    m = make_model(
        [N("Pad", ["x", "pads"], ["p"], mode="reflect"), N("Exp", ["p"], ["e"]), N("Relu", ["e"], ["y"])],
        {"x": (1, 2, 4, 4)},
        {"y": None},
        {"pads": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)},
    )
    g = check_import(m)
    assert ops(g) == {"opaque": 2, "relu": 1}
    pad = attrs_of(g, "opaque")[0]
    assert pad["op_type"] == "Pad" and pad["domain"] == ""
    assert g.nodes[-1].shapes == ((1, 2, 6, 6),)
    with pytest.raises(UnsupportedOpError, match=r"node 0 \(Pad\).*not modelled"):
        import_onnx(m, strict=True)


def test_opaque_ops_with_non_float_outputs_flow_into_other_opaque_ops():
    m = make_model(
        [
            N("ArgMax", ["x"], ["i"], axis=1, keepdims=1),
            N("Cast", ["i"], ["f"], to=TensorProto.FLOAT),
            N("Add", ["f", "x"], ["y"]),
        ],
        {"x": (3, 4)},
        {"y": None},
    )
    g = check_import(m)
    assert ops(g) == {"opaque": 2, "ewadd": 1}


def test_large_float_constants_of_opaque_ops_become_weights():
    big = rand(100)
    m = make_model([N("Max", ["x", "big"], ["y"])], {"x": (100,)}, {"y": None}, {"big": big})
    g = check_import(m)
    assert [g.name_of(w.id) for w in g.weights()] == ["big"]


# -- names, shapes, errors ----------------------------------------------------------------------


def test_names_of_inputs_and_weights_are_kept_and_unused_inputs_remain():
    m = make_model(
        [N("MatMul", ["x", "w"], ["y"])], {"x": (2, 3), "unused": (1,)}, {"y": None}, {"w": rand(3, 4)}
    )
    g = import_onnx(m)
    assert [g.name_of(n.id) for n in g.inputs()] == ["x", "unused"]
    assert [g.name_of(n.id) for n in g.weights()] == ["w"]


def test_symbolic_dims_import_as_symbols_or_take_input_shapes():
    m = make_model([N("Relu", ["x"], ["y"])], {"x": ("batch", 3)}, {"y": None})
    g = import_onnx(m)
    (batch,) = g.symbols().values()
    assert (batch.name, batch.hint, batch.lo, batch.hi) == ("batch", 1, 1, None)
    assert str(g.nodes[-1].shapes[0][0]) == "batch"
    assert import_onnx(m, hints={"batch": 8}).symbols()["batch"].hint == 8
    with pytest.raises(FormatError, match=r"--shapes names unknown symbols \['seq'\]"):
        import_onnx(m, hints={"seq": 8})
    # A dim with neither a size nor a name is refused, naming the input and the option.
    m.graph.input[0].type.tensor_type.shape.dim[0].Clear()
    with pytest.raises(FormatError, match=r"'x' has a dim 0 with neither a size nor a name") as info:
        import_onnx(m)
    assert "--input-shape NAME=D0,D1" in info.value.cli_text()
    assert "input_shapes" not in info.value.cli_text()
    g = import_onnx(m, input_shapes={"x": (4, 3)})
    assert g.nodes[-1].shapes == ((4, 3),)
    with pytest.raises(FormatError, match="unknown inputs"):
        import_onnx(m, input_shapes={"nope": (1,)})


def test_non_float_inputs_feed_opaque_nodes():
    # Token ids index an embedding table (Gather), a mask is cast to float: both nodes become
    # opaque, the float32 tensors they produce are modelled, and the input types survive.
    table = numpy_helper.from_array(np.arange(40, dtype=np.float32).reshape(10, 4), "table")
    graph = helper.make_graph(
        [
            N("Gather", ["table", "ids"], ["emb"]),
            N("Cast", ["mask"], ["m"], to=TensorProto.FLOAT),
            N("Unsqueeze", ["m", "ax"], ["m2"]),
            N("Mul", ["emb", "m2"], ["y0"]),
            N("Relu", ["y0"], ["y"]),
        ],
        "g",
        [
            helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 3]),
            helper.make_tensor_value_info("mask", TensorProto.BOOL, [2, 3]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4])],
        [table, numpy_helper.from_array(np.array([-1], dtype=np.int64), "ax")],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    g = import_onnx(m)
    assert g.op_counts() == {"opaque": 2, "reshape": 1, "ewmul": 1, "relu": 1}
    from tensor_eqsat.io.inputs import InputInfo, graph_inputs, make_feed, model_inputs

    assert graph_inputs(g) == {"ids": InputInfo(TensorProto.INT64, 10), "mask": InputInfo(TensorProto.BOOL)}
    assert model_inputs(m) == graph_inputs(g)
    feed = make_feed({"ids": (2, 3), "mask": (2, 3)}, graph_inputs(g), seed=1)
    assert feed["ids"].dtype == np.int64 and feed["ids"].min() >= 0 and feed["ids"].max() < 10
    assert feed["mask"].dtype == np.bool_
    table_data = np.arange(40, dtype=np.float32).reshape(10, 4)
    want = np.maximum(table_data[feed["ids"]] * feed["mask"][..., None], 0)
    (got,) = run(g, feed)
    np.testing.assert_array_equal(got, want)
    out = export_onnx(g)
    assert [(i.name, i.type.tensor_type.elem_type) for i in out.graph.input] == [
        ("ids", TensorProto.INT64),
        ("mask", TensorProto.BOOL),
    ]
    (ort_out,) = run_onnx(out, feed)
    np.testing.assert_array_equal(ort_out, want)
    # Missing inputs get valid data in the interpreter too (ids within the table).
    (again,) = run(g)
    assert again.shape == (2, 3, 4)
    # And in PyTorch execution (--measure-backend torch), given or not.
    pytest.importorskip("torch")
    from tensor_eqsat.io.torch_exec import TorchProgram, run_torch

    (by_torch,) = run_torch(g, feed)
    np.testing.assert_array_equal(by_torch, want)
    prog = TorchProgram(g)
    assert str(prog.random_inputs(0)["ids"].dtype) == "torch.int64"
    (out_t,) = prog(prog.random_inputs(0))
    assert tuple(out_t.shape) == (2, 3, 4)


def test_truncated_and_garbage_files_name_the_file(tmp_path):
    m = make_model([N("Relu", ["x"], ["y"])], {"x": (3,)}, {"y": None}, {})
    data = m.SerializeToString()
    bad = tmp_path / "truncated.onnx"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(FormatError, match=r"truncated\.onnx"):
        import_onnx(bad)
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\xff\x00not a model at all")
    with pytest.raises(FormatError, match=r"junk\.onnx"):
        import_onnx(junk)
    with pytest.raises(FormatError, match="no such file"):
        import_onnx(tmp_path / "missing.onnx")


def test_inconsistent_shapes_are_a_clear_error():
    graph = helper.make_graph(
        [N("Add", ["a", "b"], ["y"])],
        "g",
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 4]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(FormatError, match="inconsistent shapes"):
        import_onnx(m)
    # A declared output shape that contradicts the computation.
    graph = helper.make_graph(
        [N("Relu", ["a"], ["y"])],
        "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(FormatError, match="inconsistent shapes"):
        import_onnx(m)


def test_invalid_model_is_a_clear_error():
    graph = helper.make_graph(
        [N("Relu", ["nowhere"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(FormatError, match="invalid ONNX model"):
        import_onnx(m)


def test_old_opset_is_converted():
    m = make_model(
        [N("Split", ["x"], ["a", "b"], axis=0, split=[1, 2]), N("Softmax", ["b"], ["y"], axis=1)],
        {"x": (3, 4)},
        {"a": None, "y": None},
        opset=11,
    )
    g = check_import(m)
    assert attrs_of(g, "split")[0]["sizes"] == (1, 2)


def test_imported_graph_runs_like_the_model_with_other_inputs():
    m = make_model(
        [N("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), N("Relu", ["c"], ["y"])],
        {"x": (1, 2, 5, 5)},
        {"y": None},
        {"w": rand(3, 2, 3, 3), "b": rand(3)},
    )
    g = import_onnx(m)
    from io_helpers import ort_outputs

    x = rand(1, 2, 5, 5, seed=9)
    np.testing.assert_allclose(run(g, {"x": x})[0], ort_outputs(m, {"x": x})[0], rtol=1e-5, atol=1e-5)


def test_models_over_the_protobuf_limit_go_through_a_skeleton_and_external_data(monkeypatch, tmp_path):
    # The 2 GiB limit is simulated by lowering the thresholds to a few hundred bytes.
    import tensor_eqsat.io.onnx_files as files_mod
    import tensor_eqsat.io.onnx_import as import_mod
    from tensor_eqsat.io.onnx_export import export_onnx
    from tensor_eqsat.io.runtime import run_onnx

    monkeypatch.setattr(import_mod, "LARGE_MODEL_BYTES", 2000)
    monkeypatch.setattr(import_mod, "DETACH_BYTES", 1000)
    monkeypatch.setattr(files_mod, "LARGE_MODEL_BYTES", 2000)
    detached = []
    original = import_mod.Importer._detach_large_initializers

    def spy(self, model):
        out = original(self, model)
        detached.extend(self.detached)
        return out

    monkeypatch.setattr(import_mod.Importer, "_detach_large_initializers", spy)
    m = make_model(
        [N("MatMul", ["x", "w"], ["h"]), N("Reshape", ["h", "s"], ["y"])],
        {"x": (2, 32)},
        {"y": None},
        {"w": rand(32, 32), "s": np.array([4, 16], np.int64)},
    )
    g = check_import(m)
    assert detached == ["w"]  # the weight was detached for checking, and still imported with data
    assert [g.name_of(w.id) for w in g.weights()] == ["w"]
    path = tmp_path / "big.onnx"
    model = export_onnx(g, path)
    assert (tmp_path / "big.onnx.data").is_file()
    assert model.graph.initializer[0].raw_data  # the in-memory model keeps its data
    np.testing.assert_allclose(run_onnx(path)[0], run(g)[0], rtol=1e-6)
