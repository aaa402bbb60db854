"""deliver() refuses, before any work, what the machine cannot do within the call: weights that
do not fit in memory, an ONNX output that cannot be written within the time budget."""

from __future__ import annotations

import sys
import time

import pytest

from tensor_eqsat import Graph, deliver
from tensor_eqsat.errors import ResourceError


def _wide(side: int) -> Graph:
    g = Graph()
    x = g.input((1, side), name="x")
    g.output(g.matmul(g.matmul(x, g.weight((side, side), name="w1")), g.weight((side, side), name="w2")))
    return g


def test_an_onnx_output_that_cannot_be_written_within_the_budget_is_refused_up_front(tmp_path, monkeypatch):
    pytest.importorskip("onnx")
    module = sys.modules["tensor_eqsat.deliver"]
    # 2 x 4 MB of weights at 100 kB/s: 80 s to write, with a 5 s budget.
    monkeypatch.setattr(module, "EXPORT_BYTES_PER_S", 100e3)
    monkeypatch.setattr(module, "optimize", lambda *a, **k: pytest.fail("the search started"))
    t0 = time.perf_counter()
    with pytest.raises(
        ResourceError, match=r"writing graph as ONNX makes and exports 8 MB of weights, about 84 s"
    ):
        deliver(_wide(1024), output=tmp_path / "x.onnx", time_budget=5, target="a100", search="saturate")
    assert time.perf_counter() - t0 < 3
    assert list(tmp_path.iterdir()) == []


def test_graph_json_output_or_no_budget_is_not_refused(tmp_path, monkeypatch):
    module = sys.modules["tensor_eqsat.deliver"]
    monkeypatch.setattr(module, "EXPORT_BYTES_PER_S", 100e3)
    d = deliver(_wide(256), output=tmp_path / "x.json", time_budget=20, target="a100", search="saturate",
                node_limit=60, final_extractor="greedy-dag")  # fmt: skip
    assert d.output is not None and d.output.is_file()


def test_the_json_without_a_search_result_has_the_head_of_every_result(tmp_path):
    from tensor_eqsat import zoo

    d = deliver(zoo.get("vgg"), search="auto", time_budget=1.0, output=tmp_path / "vgg.json")
    assert d.result is None and "time budget too small" in d.message
    data = d.to_dict()
    assert data["target"] == d.target.name and data["cost_model"] == d.config.cost_model_spec()
    assert data["original_cost_ms"] is None and data["optimized_cost_ms"] is None
    assert data["stop_reason"] == "time limit" and data["kept_original"] is True
    assert data["delivery"]["time_budget"] == 1.0 and data["delivery"]["output"] == str(tmp_path / "vgg.json")


def test_the_default_auto_budget_is_reported_not_null():
    d = deliver(_wide(64), search="auto", target="a100", node_limit=60, final_extractor="greedy-dag")
    assert d.config.time_budget is None
    assert d.to_dict()["delivery"]["time_budget"] == 60.0


def test_the_budget_too_small_message_names_how_to_skip_the_check(tmp_path):
    from tensor_eqsat import zoo

    d = deliver(zoo.get("vgg"), search="auto", time_budget=1.0)
    assert "time budget too small" in d.message
    assert "--no-check" in d.message and "check=False" in d.message
