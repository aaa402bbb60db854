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
