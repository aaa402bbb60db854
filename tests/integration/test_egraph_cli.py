"""``tensor-eqsat egraph``: summary, DOT output, and a clear error for big e-graphs."""

from __future__ import annotations

import json

from tensor_eqsat.cli import main
from tensor_eqsat.ir import Graph, save


def write_graph(tmp_path):
    g = Graph()
    x = g.input((1, 4, 8, 8), name="x")
    a, b = g.split(g.relu(g.conv2d(x, g.weight((4, 4, 3, 3), name="w"))), axis=1, sizes=(1, 3))
    g.output(a, b)
    path = tmp_path / "g.json"
    save(g, path)
    return path


def test_summary_json_and_dot(tmp_path, capsys):
    path = write_graph(tmp_path)
    dot = tmp_path / "g.dot"
    assert main(["egraph", str(path), "--json", "--dot", str(dot)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info == {
        "enodes": 7,
        "classes": 7,
        "roots": [5, 6],
        "ops": {"conv2d": 1, "get": 2, "input": 1, "relu": 1, "split": 1, "weight": 1},
    }
    assert dot.read_text().count("subgraph cluster_") == 7


def test_too_big_to_draw_is_an_error(tmp_path, capsys):
    path = write_graph(tmp_path)
    assert main(["egraph", str(path), "--dot", str(tmp_path / "g.dot"), "--max-classes", "3"]) == 2
    err = capsys.readouterr().err
    assert "more than max_classes=3" in err and "--max-classes" in err
