"""An ONNX model that lists one output twice (valid ONNX; onnxruntime returns it twice) is
optimized and written with its outputs as they were."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tensor_eqsat import deliver  # noqa: E402


def _model(path):
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32), "w2")
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("MatMul", ["h", "w2"], ["y"])]
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])
    graph = helper.make_graph(nodes, "g", [x], [y, y], [w1, w2])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_an_output_listed_twice_is_written_listed_twice(tmp_path):
    src = _model(tmp_path / "dup.onnx")
    out = tmp_path / "opt.onnx"
    d = deliver(
        src, output=out, target="a100", search="saturate", node_limit=60, final_extractor="greedy-dag"
    )
    assert d.ok and d.output == out
    assert d.result is not None and d.result.speedup_pct > 0 and not d.kept_original
    session = ort.InferenceSession(str(out))
    assert [o.name for o in session.get_outputs()] == ["y", "y"]
    x = np.ones((1, 16), np.float32)
    got = session.run(None, {"x": x})
    expected = ort.InferenceSession(str(src)).run(None, {"x": x})
    assert len(got) == 2 and all(
        np.allclose(a, b, rtol=1e-4, atol=1e-4) for a, b in zip(got, expected, strict=True)
    )


def test_two_tensors_under_one_output_name_are_still_refused():
    from tensor_eqsat import Graph
    from tensor_eqsat.errors import GraphError
    from tensor_eqsat.io.onnx_export import export_onnx

    g = Graph()
    x = g.input((1, 4), name="x")
    g.output(g.relu(x))
    g.output(g.tanh(x))
    with pytest.raises(GraphError, match="output names are not unique"):
        export_onnx(g, output_names=["y", "y"])
