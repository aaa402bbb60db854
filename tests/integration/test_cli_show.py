"""The CLI skeleton: --version, --help, ``show`` with and without --json, and clean failures."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from tensor_eqsat import __version__
from tensor_eqsat.cli import main
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.serialize import save
from tensor_eqsat.ir.summary import summary


@pytest.fixture
def graph_file(tmp_path):
    g = Graph()
    x = g.input((1, 3, 8, 8), name="image[0]")
    w = g.weight((4, 3, 3, 3), name="w", data=np.ones((4, 3, 3, 3), np.float32))
    y = g.conv2d(x, w, stride=(2, 2), activation="relu")
    a, b = g.split(y, axis=1, sizes=(1, 3))
    g.output(g.poolmax(a, kernel=(2, 2)), b)
    path = tmp_path / "net.json"
    save(g, path)
    return path, g


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"tensor-eqsat {__version__}"


def test_help_lists_show(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "usage: tensor-eqsat" in out and "show" in out and "--version" in out


def test_no_command_prints_help_and_fails(capsys):
    assert main([]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "usage: tensor-eqsat" in captured.err


def test_show_table(graph_file, capsys):
    path, _ = graph_file
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    for text in ("conv2d", "split", "poolmax", "parameters 108", "input  image[0]: (1, 3, 8, 8)"):
        assert text in out
    assert "output 1: (1, 3, 4, 4)" in out


def test_show_json_is_alone_on_stdout(graph_file, capsys):
    path, g = graph_file
    assert main(["show", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == json.loads(json.dumps(summary(g)))
    assert captured.err == ""


def test_show_json_in_a_subprocess(graph_file):
    path, _ = graph_file
    proc = subprocess.run(
        [sys.executable, "-m", "tensor_eqsat", "show", str(path), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["ops"] == {"conv2d": 1, "split": 1, "poolmax": 1}
    assert data["outputs"] == [[1, 1, 3, 3], [1, 3, 4, 4]]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read (No such file or directory)"),
        ('{"format": "tensor-eqsat-graph",\n "version": 1,, }', "invalid JSON at line 2, column 15"),
        ('{"format": "other"}', "not a tensor-eqsat graph"),
        (
            '{"format": "tensor-eqsat-graph", "version": 1, "nodes": [{"op": "input", "attrs": {}}]}',
            "node 0 (input): input.shape: required attribute missing",
        ),
    ],
)
def test_show_bad_file_fails_with_one_line(tmp_path, capsys, content, message):
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    assert main(["show", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: ")
    assert message in lines[0]


def test_show_unknown_name(capsys):
    assert main(["show", "no-such-model"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no-such-model: no such file") and err.count("\n") == 1


def test_show_wrong_file_type(tmp_path, capsys):
    path = tmp_path / "net.pb"
    path.write_bytes(b"\x08\x01")
    assert main(["show", str(path)]) == 2
    assert "unsupported file type '.pb' (expected .json or .onnx)" in capsys.readouterr().err


def test_show_unreadable_onnx_file(tmp_path, capsys):
    path = tmp_path / "net.onnx"
    path.write_bytes(b"\x08\x01")
    assert main(["show", str(path)]) == 2
    assert "net.onnx: not an ONNX model" in capsys.readouterr().err


def test_show_malformed_file_in_a_subprocess_has_no_traceback(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{")
    proc = subprocess.run(
        [sys.executable, "-m", "tensor_eqsat", "show", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [
        f"error: {path}: invalid JSON at line 1, column 2: Expecting property name enclosed in double quotes"
    ]
