"""`tensor-eqsat egraph --saturate --serialize` writes a file that `tensor-eqsat extract` reads."""

from __future__ import annotations

import json

import pytest

from tensor_eqsat import Graph, save
from tensor_eqsat.cli import main
from tensor_eqsat.cost import graph_cost, parse_cost_model


def _two_convs(path):
    """Two conv+relu branches on one input, summed; returns the graph."""
    g = Graph()
    x = g.input((1, 16, 8, 8), name="x")
    a = g.relu(g.conv2d(x, g.weight((16, 16, 3, 3), name="w1")))
    b = g.relu(g.conv2d(x, g.weight((16, 16, 3, 3), name="w2")))
    g.output(g.ewadd(a, b))
    save(g, path)
    return g


def test_saturate_serialize_then_extract(tmp_path, capsys):
    src = tmp_path / "g.json"
    original = graph_cost(parse_cost_model("roofline"), _two_convs(src))
    out = tmp_path / "eg.json"
    assert (
        main(["egraph", str(src), "--saturate", "--node-limit", "300", "--serialize", str(out), "--json"])
        == 0
    )
    info = json.loads(capsys.readouterr().out)
    assert info["enodes"] > 9  # the rules added e-nodes beyond the 9 of the initial graph
    data = json.loads(out.read_text())
    assert len(data["nodes"]) == info["enodes"]
    assert main(["extract", str(out), "--extractor", "greedy-dag", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    # The rules fuse each relu into its conv: the extracted graph beats the original.
    assert res["dag_cost"] < original


def test_unknown_rule_set_is_a_clear_error(tmp_path, capsys):
    src = tmp_path / "g.json"
    _two_convs(src)
    with pytest.raises(SystemExit) as exc:  # refused at parse time, before any work
        main(["egraph", str(src), "--saturate", "--rules", "nope"])
    assert exc.value.code == 2
    assert "unknown rule set 'nope'" in capsys.readouterr().err
