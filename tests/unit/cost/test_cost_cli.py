"""``tensor-eqsat cost``: text and JSON output, options, errors."""

from __future__ import annotations

import json

import pytest

from tensor_eqsat.cli import main
from tensor_eqsat.cost import RooflineCostModel
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.serialize import save


@pytest.fixture
def graph_file(tmp_path):
    g = Graph()
    x = g.input((1, 16, 28, 28), name="x")
    w1, w2 = g.weight((16, 16, 3, 3)), g.weight((16, 16, 3, 3))
    a = g.conv2d(x, w1, activation="relu")
    b = g.conv2d(x, w2, activation="relu")
    g.output(g.concat([a, b], axis=1))
    path = tmp_path / "g.json"
    save(g, path)
    return path, g


def test_json_output(graph_file, capsys):
    path, g = graph_file
    assert main(["cost", str(path), "--json", "--target", "a100"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["cost_model"] == "roofline:a100"
    assert out["cost_ms"] == pytest.approx(RooflineCostModel().graph_cost(g))
    assert set(out["by_op"]) == {"conv2d", "concat"}
    assert out["count_by_op"] == {"conv2d": 2, "concat": 1}
    assert out["kernels"] == 3


def test_options(graph_file, capsys):
    path, g = graph_file
    assert main(["cost", str(path), "--json", "--cost-model", "roofline:cpu", "--taso-compat"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["cost_model"] == "roofline:cpu" and out["taso_compat"] is True
    assert out["by_op"]["concat"] == 0.0
    assert out["cost_ms"] == pytest.approx(RooflineCostModel(profile="cpu", taso_compat=True).graph_cost(g))
    assert main(["cost", str(path), "--json", "--cost-model", "unit", "--weight-ops", "count"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["cost_ms"] == 3.0 and out["weight_ops"] == "count"


def test_table_is_the_result_on_stdout(graph_file, capsys):
    path, _ = graph_file
    assert main(["cost", str(path)]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert "conv2d" in captured.out and "total" in captured.out


def test_bad_cost_model_is_a_clear_error(graph_file, capsys):
    path, _ = graph_file
    assert main(["cost", str(path), "--cost-model", "roofline:tpu"]) == 2
    assert "unknown device profile 'tpu'" in capsys.readouterr().err


def test_missing_file(tmp_path, capsys):
    assert main(["cost", str(tmp_path / "none.json")]) == 2
    assert "none.json" in capsys.readouterr().err


def test_target_picks_the_cost_model(graph_file, tmp_path, capsys, monkeypatch):
    path, g = graph_file
    assert main(["cost", str(path), "--target", "p100", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["target"] == "p100" and out["cost_model"] == "roofline:p100"
    pytest.importorskip("onnxruntime")
    from tensor_eqsat.io import export_onnx

    monkeypatch.setenv("TENSOR_EQSAT_CACHE_DIR", str(tmp_path / "cache"))
    onnx_path = tmp_path / "g.onnx"
    export_onnx(g, onnx_path)
    assert main(["cost", str(onnx_path), "--json"]) == 0  # an ONNX file runs in onnxruntime
    out = json.loads(capsys.readouterr().out)
    assert out["target"] == "ort-cpu" and out["cost_model"] == "measured:ort-cpu"
    assert out["cost_ms"] > 0 and out["count_by_op"]["conv2d"] == 2


def test_an_eager_target_shows_the_forward_pass_once(graph_file, capsys):
    from tensor_eqsat.cost.recorded import RecordedCostModel

    path, g = graph_file
    assert main(["cost", str(path), "--json", "--target", "h200"]) == 0
    out = json.loads(capsys.readouterr().out)
    model = RecordedCostModel("h200")
    assert model.execution is not None and out["pass_ms"] == model.execution.pass_ms > 0
    assert out["cost_ms"] == pytest.approx(model.graph_cost(g))
    assert out["cost_ms"] == pytest.approx(sum(out["by_op"].values()) + out["pass_ms"])
    assert main(["cost", str(path), "--target", "h200"]) == 0
    assert "(forward pass)" in capsys.readouterr().out
    assert main(["cost", str(path), "--json", "--target", "a100"]) == 0
    assert json.loads(capsys.readouterr().out)["pass_ms"] == 0.0
