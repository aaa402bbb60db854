"""The guard's runtime exports a graph once, however often it prepares it (issue 44: the guard
prepared BERT's original four times, 6.9 s each to export on a loaded CPU)."""

from __future__ import annotations

import pytest

pytest.importorskip("onnxruntime")

from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.target.runtime import OrtRuntime


def test_a_graph_prepared_twice_is_exported_once(monkeypatch):
    import tensor_eqsat.io.onnx_export as onnx_export

    calls = []
    real = onnx_export.export_onnx
    monkeypatch.setattr(onnx_export, "export_onnx", lambda g, **kw: calls.append(g) or real(g, **kw))
    g = Graph()
    g.output(g.relu(g.matmul(g.input((1, 8), name="x"), g.weight((8, 8), name="w"))))
    rt = OrtRuntime()
    rt.prepare(g)()
    rt.prepare(g)()
    assert calls == [g]
    rt.prepare(g, seed=1)()  # other weights: exported again
    assert len(calls) == 2
