"""``tensor-eqsat optimize model.onnx -o out.onnx``: ONNX in, verified ONNX out, measured latency."""

from __future__ import annotations

import json
import sys

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from tensor_eqsat import Graph
from tensor_eqsat.cli import main
from tensor_eqsat.io import export_onnx, import_onnx
from tensor_eqsat.io.equivalence import VerifyReport, verify

FAST = ["--search", "mcts", "--budget", "4", "--rollout-depth", "2", "--node-limit", "300"]


def _two_branch_model(path):
    """conv+relu twice on one input, summed: the rules fuse each relu into its conv."""
    g = Graph()
    x = g.input((1, 8, 10, 10), name="x")
    a = g.relu(g.conv2d(x, g.weight((8, 8, 3, 3), name="w1")))
    b = g.relu(g.conv2d(x, g.weight((8, 8, 3, 3), name="w2")))
    g.output(g.ewadd(a, b))
    export_onnx(g, path)


def test_onnx_in_verified_onnx_out_with_measured_latency(tmp_path, capsys):
    src, out = tmp_path / "model.onnx", tmp_path / "opt.onnx"
    _two_branch_model(src)
    # An analytic target: no guard, so --measure times the optimized graph itself.
    args = [
        "optimize",
        str(src),
        *FAST,
        "--target",
        "a100",
        "-o",
        str(out),
        "--measure",
        "--measure-runs",
        "10",
    ]
    rc = main([*args, "--json"])
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    assert data["verify"]["ok"] is True
    assert data["optimized_cost_ms"] < data["original_cost_ms"]
    m = data["measured"]
    assert m["original_ms"] > 0 and m["optimized_ms"] > 0
    assert m["speedup_pct"] == pytest.approx((m["original_ms"] - m["optimized_ms"]) / m["original_ms"] * 100)
    # The written file is a valid ONNX model computing the input model's function.
    assert verify(str(src), str(out)).ok
    assert len(import_onnx(str(out)).nodes) > 0


def test_a_result_that_fails_the_check_is_not_written(tmp_path, capsys, monkeypatch):
    src, out = tmp_path / "model.onnx", tmp_path / "opt.onnx"
    _two_branch_model(src)

    # The package re-exports the function under the submodule's name, so reach the module itself.
    verify_mod = sys.modules["tensor_eqsat.io.equivalence"]
    real = verify_mod.Reference.check

    def failing(self, *args, **kwargs):
        report = real(self, *args, **kwargs)
        return VerifyReport(**{**report.__dict__, "ok": False})

    monkeypatch.setattr(verify_mod.Reference, "check", failing)
    rc = main(["optimize", str(src), *FAST, "--target", "a100", "-o", str(out)])
    assert rc == 1
    assert not out.exists()
    assert "not written" in capsys.readouterr().err
