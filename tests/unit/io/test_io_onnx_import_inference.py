"""ONNX import of the ops of today's inference graphs: Clip, Pow, HardSigmoid, HardSwish,
1/Sqrt (rsqrt), x*Sigmoid(x) (SiLU), ReduceMean, Pad, Slice and Expand map to their IR ops
exactly (the interpreter matches onnxruntime), and every form that is not exactly an IR op stays
opaque."""

from __future__ import annotations

import numpy as np
import pytest
from io_helpers import check_import, make_model
from onnx import helper

from tensor_eqsat.io.onnx_export import export_onnx
from tensor_eqsat.io.onnx_import import UnsupportedOpError, import_onnx
from tensor_eqsat.io.runtime import run_onnx
from tensor_eqsat.ir.interpreter import run

N = helper.make_node
F32 = np.float32
I64 = np.int64


def attrs_of(g, op):
    return [n.attr_dict() for n in g.nodes if n.op == op]


# -- element-wise ---------------------------------------------------------------------------------


def test_clip_with_constant_bounds_is_clip_and_relu6_matches():
    m = make_model(
        [N("Clip", ["x", "lo", "hi"], ["y"])],
        {"x": (2, 5)},
        {"y": None},
        {"lo": np.array(0.0, F32), "hi": np.array(6.0, F32)},
    )
    g = check_import(m)
    assert g.op_counts() == {"clip": 1}
    assert attrs_of(g, "clip")[0] == {"min": 0.0, "max": 6.0}


def test_clip_with_a_missing_or_non_constant_bound_stays_opaque():
    one_sided = make_model(
        [N("Clip", ["x", "lo"], ["y"])], {"x": (2, 5)}, {"y": None}, {"lo": np.array(0.0, F32)}
    )
    assert check_import(one_sided).op_counts() == {"opaque": 1}
    dynamic = make_model(
        [N("Clip", ["x", "lo", "x2"], ["y"])], {"x": (2, 5), "lo": (), "x2": ()}, {"y": None}
    )
    assert check_import(dynamic).op_counts() == {"opaque": 1}
    with pytest.raises(UnsupportedOpError, match="min and max"):
        import_onnx(one_sided, strict=True)


@pytest.mark.parametrize(
    "exponent", [np.array(2.0, F32), np.array([3.0], F32), np.array(2, I64), np.array(0.5, F32)]
)
def test_pow_by_a_constant_scalar_is_pow(exponent):
    m = make_model(
        [N("Abs", ["x"], ["a"]), N("Pow", ["a", "e"], ["y"])], {"x": (3, 4)}, {"y": None}, {"e": exponent}
    )
    g = check_import(m)
    assert g.op_counts() == {"opaque": 1, "pow": 1}  # Abs is not modelled
    assert attrs_of(g, "pow")[0]["exponent"] == float(exponent.reshape(-1)[0])


def test_pow_by_a_tensor_exponent_stays_opaque():
    m = make_model(
        [N("Pow", ["x", "e"], ["y"])], {"x": (3, 4)}, {"y": None}, {"e": np.full((3, 4), 2.0, F32)}
    )
    assert check_import(m).op_counts() == {"opaque": 1}


def test_hardsigmoid_as_pytorch_exports_it_and_hardswish():
    m = make_model(
        [N("HardSigmoid", ["x"], ["h"], alpha=1.0 / 6.0, beta=0.5), N("HardSwish", ["h"], ["y"])],
        {"x": (2, 16)},
        {"y": None},
        opset=17,
    )
    g = check_import(m)
    assert g.op_counts() == {"hardsigmoid": 1, "hardswish": 1}


def test_hardsigmoid_with_onnx_default_alpha_stays_opaque():
    m = make_model([N("HardSigmoid", ["x"], ["y"])], {"x": (2, 16)}, {"y": None})
    assert check_import(m).op_counts() == {"opaque": 1}


@pytest.mark.parametrize("form", ["reciprocal", "div"])
def test_one_over_sqrt_is_rsqrt(form):
    nodes = [N("Abs", ["x"], ["a"]), N("Sqrt", ["a"], ["s"])]
    inits = {}
    if form == "reciprocal":
        nodes.append(N("Reciprocal", ["s"], ["y"]))
    else:
        nodes.append(N("Div", ["one", "s"], ["y"]))
        inits["one"] = np.array(1.0, F32)
    g = check_import(make_model(nodes, {"x": (3, 4)}, {"y": None}, inits))
    assert g.op_counts() == {"opaque": 1, "rsqrt": 1}


def test_sqrt_read_otherwise_stays_opaque():
    m = make_model(
        [N("Sqrt", ["x"], ["s"]), N("Reciprocal", ["s"], ["r"]), N("Add", ["s", "r"], ["y"])],
        {"x": (3, 4)},
        {"y": None},
    )
    g = import_onnx(m)
    assert g.op_counts() == {"opaque": 2, "ewadd": 1}
    two = make_model(
        [N("Sqrt", ["x"], ["s"]), N("Div", ["two", "s"], ["y"])],
        {"x": (3, 4)},
        {"y": None},
        {"two": np.array(2.0, F32)},
    )
    assert import_onnx(two).op_counts() == {"opaque": 2}


@pytest.mark.parametrize("order", [("x", "s"), ("s", "x")])
def test_x_times_sigmoid_x_is_silu(order):
    m = make_model([N("Sigmoid", ["x"], ["s"]), N("Mul", list(order), ["y"])], {"x": (2, 8)}, {"y": None})
    g = check_import(m)
    assert g.op_counts() == {"silu": 1}


def test_sigmoid_with_another_reader_or_of_another_tensor_is_not_silu():
    m = make_model(
        [N("Sigmoid", ["x"], ["s"]), N("Mul", ["x", "s"], ["m"]), N("Add", ["m", "s"], ["y"])],
        {"x": (2, 8)},
        {"y": None},
    )
    assert check_import(m).op_counts() == {"sigmoid": 1, "ewmul": 1, "ewadd": 1}
    other = make_model(
        [N("Sigmoid", ["x"], ["s"]), N("Mul", ["z", "s"], ["y"])], {"x": (2, 8), "z": (2, 8)}, {"y": None}
    )
    assert check_import(other).op_counts() == {"sigmoid": 1, "ewmul": 1}


# -- extent ---------------------------------------------------------------------------------------


def test_reduce_mean_axes_as_attribute_and_as_input():
    old = make_model(
        [N("ReduceMean", ["x"], ["y"], axes=[-1], keepdims=1)], {"x": (2, 3, 4)}, {"y": None}, opset=13
    )
    g = check_import(old)
    assert attrs_of(g, "mean") == [{"axes": (2,), "keepdims": True}]
    new = make_model(
        [N("ReduceMean", ["x", "ax"], ["y"], keepdims=0)],
        {"x": (2, 3, 4)},
        {"y": None},
        {"ax": np.array([0, 2], I64)},
        opset=18,
    )
    g = check_import(new)
    assert attrs_of(g, "mean") == [{"axes": (0, 2), "keepdims": False}]
    everything = make_model([N("ReduceMean", ["x"], ["y"])], {"x": (2, 3, 4)}, {"y": None}, opset=18)
    assert attrs_of(check_import(everything), "mean") == [{"axes": (0, 1, 2), "keepdims": True}]


def test_reduce_mean_with_empty_axes_as_noop():
    m = make_model(
        [N("ReduceMean", ["x"], ["m"], noop_with_empty_axes=1), N("Relu", ["m"], ["y"])],
        {"x": (2, 3)},
        {"y": None},
        opset=18,
    )
    assert check_import(m).op_counts() == {"relu": 1}


@pytest.mark.parametrize(
    ("pads", "value", "fill"),
    [
        ([0, 0, 1, 0, 0, 0, 1, 2], None, "zero"),
        ([0, 0, 0, 1, 0, 0, 2, 0], np.array(-np.inf, F32), "neg_inf"),
        ([0, 1, 0, 0, 0, 0], np.array(0.0, F32), "zero"),
    ],
)
def test_constant_pad_is_pad(pads, value, fill):
    rank = len(pads) // 2
    shape = (1, 2, 3, 3)[:rank]
    inputs = ["x", "p"] + ([] if value is None else ["v"])
    inits = {"p": np.array(pads, I64)}
    if value is not None:
        inits["v"] = value
    g = check_import(make_model([N("Pad", inputs, ["y"])], {"x": shape}, {"y": None}, inits))
    assert attrs_of(g, "pad") == [{"pads": tuple(pads), "fill": fill}]


def test_pad_with_axes_input():
    m = make_model(
        [N("Pad", ["x", "p", "", "ax"], ["y"])],
        {"x": (1, 2, 3, 3)},
        {"y": None},
        {"p": np.array([1, 0, 2, 1], I64), "ax": np.array([-1, 2], I64)},
        opset=18,
    )
    g = check_import(m)
    assert attrs_of(g, "pad") == [{"pads": (0, 0, 0, 1, 0, 0, 1, 2), "fill": "zero"}]


@pytest.mark.parametrize(
    ("pads", "value", "mode"),
    [
        ([0, 0, 1, 1, 0, 0, 1, 1], 1.5, "constant"),
        ([0, 0, -1, 0, 0, 0, 1, 0], 0.0, "constant"),
        ([0, 0, 1, 1, 0, 0, 1, 1], 0.0, "edge"),
    ],
)
def test_other_pads_stay_opaque(pads, value, mode):
    m = make_model(
        [N("Pad", ["x", "p", "v"], ["y"], mode=mode)],
        {"x": (1, 2, 3, 3)},
        {"y": None},
        {"p": np.array(pads, I64), "v": np.array(value, F32)},
    )
    assert check_import(m).op_counts() == {"opaque": 1}


@pytest.mark.parametrize(
    ("starts", "ends", "axes", "steps", "want"),
    [
        ([1], [4], [1], [2], [{"axis": 1, "start": 1, "end": 4, "step": 2}]),
        ([-3], [100], [-1], None, [{"axis": 2, "start": 3, "end": 6, "step": 1}]),
        (
            [0, 1],
            [1, -1],
            [0, 2],
            None,
            [{"axis": 0, "start": 0, "end": 1, "step": 1}, {"axis": 2, "start": 1, "end": 5, "step": 1}],
        ),
        ([0], [2**62], [1], None, []),  # the whole axis: no op at all
    ],
)
def test_constant_slice_is_a_chain_of_slices(starts, ends, axes, steps, want):
    inputs = ["x", "s", "e", "a"] + ([] if steps is None else ["st"])
    inits = {"s": np.array(starts, I64), "e": np.array(ends, I64), "a": np.array(axes, I64)}
    if steps is not None:
        inits["st"] = np.array(steps, I64)
    nodes = [N("Slice", inputs, ["t"]), N("Relu", ["t"], ["y"])]
    g = check_import(make_model(nodes, {"x": (2, 5, 6)}, {"y": None}, inits))
    assert attrs_of(g, "slice") == want
    assert g.op_counts() == {"relu": 1, **({"slice": len(want)} if want else {})}


def test_slice_with_a_negative_step_stays_opaque():
    inits = {
        "s": np.array([4], I64),
        "e": np.array([0], I64),
        "a": np.array([1], I64),
        "st": np.array([-1], I64),
    }
    m = make_model([N("Slice", ["x", "s", "e", "a", "st"], ["y"])], {"x": (2, 5)}, {"y": None}, inits)
    assert check_import(m).op_counts() == {"opaque": 1}


@pytest.mark.parametrize(
    ("shape", "target", "ops"),
    [
        ((3, 1), [3, 5], {"expand": 1}),
        ((3, 1), [2, 1, 4], {"reshape": 1, "expand": 1}),  # rank grows: size-1 dims prepended
        ((3, 4), [1, 4], {"relu": 1}),  # no growth: the tensor itself
    ],
)
def test_expand_with_a_constant_shape(shape, target, ops):
    nodes = [N("Expand", ["x", "t"], ["e"]), N("Relu", ["e"], ["y"])]
    if "relu" not in ops:
        nodes = [N("Expand", ["x", "t"], ["y"])]
    g = check_import(make_model(nodes, {"x": shape}, {"y": None}, {"t": np.array(target, I64)}))
    assert g.op_counts() == ops


# -- a Llama-style RMSNorm as torch exports it ------------------------------------------------------


def test_rmsnorm_pattern_imports_without_opaque_nodes():
    nodes = [
        N("Pow", ["x", "two"], ["sq"]),
        N("ReduceMean", ["sq", "ax"], ["ms"], keepdims=1),
        N("Add", ["ms", "eps"], ["v"]),
        N("Sqrt", ["v"], ["r"]),
        N("Reciprocal", ["r"], ["inv"]),
        N("Mul", ["x", "inv"], ["n"]),
        N("Mul", ["n", "w"], ["y"]),
    ]
    inits = {
        "two": np.array(2.0, F32),
        "ax": np.array([-1], I64),
        "eps": np.array(1e-6, F32),
        "w": np.linspace(0.5, 1.5, 8).astype(F32),
    }
    m = make_model(nodes, {"x": (2, 3, 8)}, {"y": None}, inits, opset=18)
    g = check_import(m)
    assert g.op_counts() == {"pow": 1, "mean": 1, "ewadd": 1, "rsqrt": 1, "ewmul": 2}
    back = export_onnx(g)
    feed = {"x": np.random.default_rng(0).standard_normal((2, 3, 8)).astype(F32)}
    np.testing.assert_allclose(run_onnx(back, feed)[0], run(g, feed)[0], rtol=1e-5, atol=1e-6)
