"""Helpers for the io tests: build small ONNX models and compare them with imported graphs.

Test modules import it by name (pytest puts this directory on sys.path).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tensor_eqsat.io.onnx_import import import_onnx  # noqa: E402
from tensor_eqsat.ir.graph import Graph  # noqa: E402
from tensor_eqsat.ir.interpreter import random_input, run  # noqa: E402


def make_model(
    nodes: Sequence[Any],
    inputs: Mapping[str, Sequence[int]],
    outputs: Mapping[str, Sequence[int] | None],
    inits: Mapping[str, np.ndarray] | None = None,
    opset: int = 17,
) -> Any:
    """A checked ONNX model from nodes, float input/output shapes (None: unknown) and initializers."""
    graph = helper.make_graph(
        list(nodes),
        "test",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v)) for k, v in inputs.items()],
        [
            helper.make_tensor_value_info(k, TensorProto.FLOAT, None if v is None else list(v))
            for k, v in outputs.items()
        ],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    m = onnx.shape_inference.infer_shapes(m)  # fills in the outputs declared without a shape
    onnx.checker.check_model(m)
    return m


def ort_outputs(model: Any, feed: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return [np.asarray(o) for o in sess.run(None, dict(feed))]


def feed_for(model: Any, seed: int = 0) -> dict[str, np.ndarray]:
    inits = {t.name for t in model.graph.initializer}
    out = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        shape = tuple(d.dim_value for d in vi.type.tensor_type.shape.dim)
        out[vi.name] = random_input(vi.name, shape, seed)
    return out


def check_import(model: Any, *, rtol: float = 1e-5, atol: float = 1e-5, **kw: Any) -> Graph:
    """Import ``model`` and assert the interpreter matches onnxruntime on random inputs."""
    g = import_onnx(model, **kw)
    feed = feed_for(model)
    want = ort_outputs(model, feed)
    got = run(g, feed)
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
    return g


def rand(*shape: int, seed: int = 1, positive: bool = False) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if positive:
        return rng.uniform(0.5, 1.5, size=shape).astype(np.float32)
    return rng.standard_normal(shape).astype(np.float32)


# -- one small graph per op (every registered op but the leaves) --------------------------------


def _bin(op):
    def build(g):
        x = g.input((2, 3, 4), name="x")
        y = g.input((3, 1), name="y")
        return g.add(op, [x, y])[0]

    return build


def _unary(op, **kw):
    def build(g):
        return g.add(op, [g.input((2, 6), name="x")], **kw)[0]

    return build


def _conv(g):
    x = g.input((1, 4, 9, 8), name="x")
    a = g.conv2d(x, g.weight((6, 4, 3, 3), name="w"), stride=(2, 2), padding="same", activation="relu")
    return g.conv2d(a, g.weight((6, 3, 1, 1), name="wg"), padding="valid", activation="sigmoid")


def _pool(op):
    def build(g):
        x = g.input((1, 2, 8, 7), name="x")
        a = g.add(op, [x], kernel=(3, 3), stride=(2, 2), padding="same", activation="tanh")[0]
        return g.add(op, [a], kernel=(2, 2), stride=(1, 1), padding="valid")[0]

    return build


def _enlarge(g):
    # Weight-only (folded into an initializer) and on an activation (an ONNX Pad).
    x = g.input((1, 2, 6, 6), name="x")
    w = g.enlarge(g.weight((3, 2, 1, 1), name="w1"), g.weight((3, 2, 3, 3), name="w3"))
    y = g.conv2d(x, w)
    return g.enlarge(y, g.weight((1, 1, 9, 8), name="ref"))


def _merge(g):
    # Weight-only (folded) and on an activation (Tile * mask in ONNX).
    x = g.input((1, 4, 5, 5), name="x")
    w = g.weight((4, 2, 3, 3), name="w")
    y = g.conv2d(x, g.merge(w, count=2, groups=2))
    return g.noop(y, g.merge(g.input((4, 2, 3, 3), name="z"), count=2, groups=2))


def _opaque(g):
    m = make_model([helper.make_node("Exp", ["x"], ["y"])], {"x": (2, 3)}, {"y": None}, {})
    inner = import_onnx(m)
    x = g.input((2, 3), name="x")
    node = next(n for n in inner.nodes if n.op == "opaque")
    return g.add("opaque", [x], **node.attr_dict())[0]


def _batchnorm(g):
    x = g.input((2, 3, 4, 4), name="x")
    s, b, m, v = (g.weight((3,), name=n) for n in ("s", "b", "m", "v"))
    return g.batchnorm(x, s, b, m, v, eps=1e-3)


def _layernorm(g):
    x = g.input((2, 3, 4), name="x")
    return g.layernorm(x, g.weight((3, 4), name="s"), g.weight((3, 4), name="b"), axis=1)


def _matmul(g):
    x = g.input((2, 3, 4), name="x")
    return g.matmul(x, g.weight((4, 5), name="w"), activation="relu")


def _split(g):
    parts = g.split(g.input((2, 7), name="x"), axis=1, sizes=(3, 4))
    return g.concat([parts[1], parts[0]], axis=1)


def _bnfold_weight(g):
    # Weight-only (folded into an initializer) and on an activation (Add, Sqrt, Div, Reshape, Mul).
    x = g.input((1, 3, 4, 4), name="x")
    s, v = g.weight((5,), name="s"), g.weight((5,), name="v")
    y = g.conv2d(x, g.add("bnfold_weight", [g.weight((5, 3, 1, 1), name="w"), s, v], axis=0)[0])
    z = g.add("bnfold_weight", [g.input((2, 5), name="z"), s, v], axis=1, eps=1e-3)[0]
    return g.noop(y, z)


def _bnfold_bias(g):
    s, b, m = (g.input((4,), name=n) for n in ("s", "b", "m"))
    return g.add("bnfold_bias", [s, b, m, g.weight((4,), name="v")], eps=1e-3)[0]


def _attention(g):
    q, kt, v = g.input((2, 3, 4), name="q"), g.input((2, 4, 5), name="kt"), g.input((2, 5, 6), name="v")
    masked = g.add("attention", [q, kt, v, g.weight((1, 3, 5), name="mask")], scale=0.5, divisor=2.0)[0]
    return g.noop(masked, g.add("attention", [q, kt, v], causal=True)[0])


def _groupnorm(g):
    x = g.input((2, 6, 3, 3), name="x")
    return g.add("groupnorm", [x, g.weight((6,), name="s"), g.weight((6,), name="b")], groups=3, eps=1e-3)[0]


BUILDERS = {
    "ewadd": _bin("ewadd"),
    "ewmul": _bin("ewmul"),
    "smul": _unary("smul", scalar=-2.5),
    "sdiv": _unary("sdiv", divisor=3.0),
    "relu": _unary("relu"),
    "tanh": _unary("tanh"),
    "sigmoid": _unary("sigmoid"),
    "gelu": _unary("gelu", approximate="tanh"),
    "batchnorm": _batchnorm,
    "softmax": _unary("softmax", axis=0),
    "layernorm": _layernorm,
    "matmul": _matmul,
    "conv2d": _conv,
    "poolmax": _pool("poolmax"),
    "poolavg": _pool("poolavg"),
    "enlarge": _enlarge,
    "merge": _merge,
    "concat": _split,
    "split": _split,
    "reshape": _unary("reshape", shape=(3, 4)),
    "transpose": _unary("transpose", perm=(1, 0)),
    "dropout": _unary("dropout", rate=0.25),
    "noop": lambda g: g.noop(g.relu(g.input((3,), name="x")), g.weight((2,), name="w")),
    "opaque": _opaque,
    "silu": _unary("silu"),
    "hardsigmoid": _unary("hardsigmoid"),
    "hardswish": _unary("hardswish"),
    "clip": _unary("clip", min=-0.5, max=0.75),
    "pow": _unary("pow", exponent=2.0),
    "rsqrt": lambda g: g.add("rsqrt", [g.sigmoid(g.input((3, 4), name="x"))])[0],
    "pad": lambda g: g.add("pad", [g.input((1, 2, 3, 3), name="x")], pads=(0, 0, 1, 0, 0, 0, 1, 2))[0],
    "slice": _unary("slice", axis=1, start=1, end=4, step=2),
    "expand": lambda g: g.add("expand", [g.input((3, 1), name="x")], shape=(3, 5))[0],
    "mean": _unary("mean", axes=(1,), keepdims=True),
    "cast": _unary("cast", dtype="float16"),
    "bnfold_weight": _bnfold_weight,
    "bnfold_bias": _bnfold_bias,
    "attention": _attention,
    "groupnorm": _groupnorm,
}
