"""The CLI on ONNX files: ``verify`` exit codes and JSON, ``show`` reading .onnx."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from tensor_eqsat.cli import main
from tensor_eqsat.io.onnx_export import export_onnx
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.serialize import save


def _graph(scale: float = 1.0) -> Graph:
    g = Graph()
    x = g.input((1, 3, 8, 8), name="x")
    y = g.conv2d(x, g.weight((4, 3, 3, 3), name="w"), stride=(2, 2), activation="relu")
    g.output(g.smul(y, scale) if scale != 1.0 else y)
    return g


@pytest.fixture
def files(tmp_path):
    a, b, c = tmp_path / "a.onnx", tmp_path / "b.json", tmp_path / "c.onnx"
    export_onnx(_graph(), a)
    save(_graph(), b)
    export_onnx(_graph(scale=1.5), c)
    return a, b, c


def test_verify_equivalent_files_exit_zero(files, capsys):
    a, b, _ = files
    assert main(["verify", str(a), str(b), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is True and out["backends"] == ["onnxruntime", "interpreter"]
    assert out["outputs"][0]["shape"] == [1, 4, 4, 4]


def test_verify_mismatch_exits_one_with_a_readable_verdict(files, capsys):
    a, _, c = files
    assert main(["verify", str(a), str(c), "--trials", "1"]) == 1
    err = capsys.readouterr().out  # the verdict is the command's result
    assert "NOT EQUIVALENT" in err and "outputs [0]" in err
    assert main(["verify", str(a), str(c), "--rtol", "1.0", "--atol", "0"]) == 0


def test_verify_bad_file_exits_two(files, tmp_path, capsys):
    a, _, _ = files
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(a.read_bytes()[:50])
    assert main(["verify", str(a), str(bad)]) == 2
    assert "bad.onnx" in capsys.readouterr().err


def test_show_reads_onnx(files, capsys):
    a, _, _ = files
    assert main(["show", str(a), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ops"] == {"conv2d": 1}
    assert out["inputs"] == [{"name": "x", "shape": [1, 3, 8, 8], "dtype": "float32"}]
