"""onnxruntime sessions, runs and latency measurement."""

from __future__ import annotations

import numpy as np
import pytest
from io_helpers import make_model
from onnx import helper

from tensor_eqsat.errors import FormatError, TensorEqsatError
from tensor_eqsat.io.latency import compare_latency, measure_latency
from tensor_eqsat.io.runtime import input_specs, ort_session, run_onnx
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.interpreter import random_input


def _graph() -> Graph:
    g = Graph()
    x = g.input((1, 8, 8, 8), name="x")
    g.output(g.conv2d(x, g.weight((8, 8, 3, 3), name="w"), activation="relu"))
    return g


def test_run_onnx_fills_missing_inputs_with_the_interpreter_values():
    m = make_model([helper.make_node("Add", ["a", "b"], ["y"])], {"a": (3,), "b": (3,)}, {"y": None})
    a = np.ones(3, np.float32)
    (y,) = run_onnx(m, {"a": a}, seed=4)
    np.testing.assert_allclose(y, a + random_input("b", (3,), 4))
    with pytest.raises(TensorEqsatError, match="unknown inputs"):
        run_onnx(m, {"c": a})


def test_session_options_and_errors(tmp_path):
    sess = ort_session(_graph(), threads=1, optimization="disable")
    assert [i.name for i in sess.get_inputs()] == ["x"]
    with pytest.raises(TensorEqsatError, match="optimization"):
        ort_session(_graph(), optimization="max")
    with pytest.raises(TensorEqsatError, match="unknown device"):
        ort_session(_graph(), device="tpu")
    with pytest.raises(FormatError, match="no such file"):
        ort_session(tmp_path / "nope.onnx")


def test_input_specs_size_symbolic_dims_or_refuse_unnamed_ones():
    m = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": (2, 3)}, {"y": None})
    assert [(s.name, s.shape) for s in input_specs(m)] == [("x", (2, 3))]
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "n"
    assert input_specs(m)[0].shape == (1, 3)  # "n" is batch-like: hint 1
    assert input_specs(m, point={"n": 6})[0].shape == (6, 3)
    m.graph.input[0].type.tensor_type.shape.dim[0].Clear()
    with pytest.raises(FormatError, match="neither a size nor a name"):
        input_specs(m)


@pytest.mark.parametrize("backend", ["ort", "torch"])
def test_measure_latency_reports_consistent_statistics(backend):
    if backend == "torch":
        pytest.importorskip("torch")
    r = measure_latency(_graph(), backend=backend, runs=7, warmup=2)
    assert r.runs == 7 and len(r.times_ms) == 7 and r.threads == 1 and r.device == "cpu"
    assert r.min_ms <= r.q1_ms <= r.median_ms <= r.q3_ms <= r.max_ms
    assert r.median_ms == pytest.approx(sorted(r.times_ms)[3])
    assert "times_ms" not in r.to_dict() and len(r.to_dict(with_times=True)["times_ms"]) == 7


def test_compare_latency_alternates_and_gives_each_model_all_runs():
    g = _graph()
    h = Graph()
    x = h.input((1, 8, 8, 8), name="x")
    h.output(h.relu(h.conv2d(x, h.weight((8, 8, 3, 3), name="w"))))
    cmp = compare_latency(g, h, runs=6, warmup=1, blocks=3)
    assert cmp.original.runs == cmp.optimized.runs == 6
    assert cmp.speedup == pytest.approx(cmp.original.median_ms / cmp.optimized.median_ms)
    with pytest.raises(TensorEqsatError, match="runs >= blocks"):
        compare_latency(g, h, runs=2, blocks=3)
    with pytest.raises(TensorEqsatError, match="unknown backend"):
        measure_latency(g, backend="tvm")
