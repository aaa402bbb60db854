"""benchmarks/real_models_onnx.py in its quick mode on one model: HF ResNet-50 exported by torch's
exporter with its batch norms kept, imported without opaque nodes, the batch norms folded when
priced for the H200, and the file handed back for onnxruntime equal to the export (a smoke run;
the figures are in docs/results-real.md)."""

from __future__ import annotations

import pytest

from bench_run import benchmark_rows

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("onnxscript")
pytest.importorskip("onnxruntime")

pytestmark = [pytest.mark.slow, pytest.mark.hf]


def test_quick_resnet_export_is_optimized_with_outputs_equal(tmp_path):
    args = ["resnet50", "--quick", "--time-budget", "20", "--runs", "6", "--blocks", "2"]
    (row,) = benchmark_rows("real_models_onnx.py", tmp_path, *args, "--out-dir", str(tmp_path))
    assert row["onnx_batchnorm"] > 0 and row["ir_batchnorm"] == row["onnx_batchnorm"]  # kept, imported
    assert row["ir_opaque"] == 0
    h200, ort = row["h200"], row["ort_cpu"]
    assert h200["check_ok"] and ort["check_ok"]
    assert "bn-fold-conv" in h200["rules_applied"]
    if h200["checked"]:  # (a result the time left could not check is not handed back)
        assert h200["batchnorm_left"] < row["ir_batchnorm"]
    assert "guard" in ort  # ort-cpu runs here: the guard measured
    assert row["outputs_equal"], row["outputs_check"]
    assert ("timing" in row) != ort["kept_original"]  # a rewritten file is timed against the export
