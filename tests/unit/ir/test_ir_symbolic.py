"""Symbolic dims (ir/symbolic.py, DESIGN.md decision 18): shape inference, rule conditions,
pricing at representative shapes, JSON, and running at concrete sizes."""

from __future__ import annotations

import numpy as np
import pytest

from tensor_eqsat.cost.model import UnitCostModel
from tensor_eqsat.cost.roofline import RooflineCostModel
from tensor_eqsat.egraph.convert import from_graph
from tensor_eqsat.errors import GraphError, ShapeError
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.interpreter import run
from tensor_eqsat.ir.serialize import dumps, loads
from tensor_eqsat.ir.symbolic import ShapePoints, SymDim, UndecidedDim, concrete
from tensor_eqsat.rewrite.rewrite import Rewrite, apply_rule
from tensor_eqsat.rules.rewrites import to_rewrite
from tensor_eqsat.rules.sets import load_rule_set

B = SymDim.symbol("b", hint=4, lo=2, hi=64)
S = SymDim.symbol("s", hint=16, lo=2)
ONE_UP = SymDim.symbol("n", hint=3, lo=1)


def test_matmul_keeps_symbolic_rows_and_checks_the_contracted_dim():
    g = Graph()
    x = g.input((B, S, 64), name="x")
    w = g.weight((64, 256), name="w")
    y = g.matmul(x, w)
    assert y.shape == (B, S, 256)
    scores = g.matmul(y, g.transpose(y, (0, 2, 1)))
    assert scores.shape == (B, S, S)
    with pytest.raises(ShapeError, match="contracted dims differ"):
        g.matmul(x, g.weight((S, 3), name="v"))


def test_reshape_resolves_minus_one_exactly_and_refuses_what_does_not_divide():
    g = Graph()
    x = g.input((B, S, 768), name="x")
    heads = g.reshape(x, (B, S, 12, 64))
    assert heads.shape == (B, S, 12, 64)
    flat = g.reshape(x, (-1, 768))
    assert flat.shape == (B * S, 768)
    assert g.reshape(flat, (0, 12, -1)).shape == (B * S, 12, 64)
    with pytest.raises(ShapeError, match="cannot reshape"):
        g.reshape(x, (B, -1, 5))  # 768 * s is not a multiple of 5 for every s
    with pytest.raises(ShapeError, match="cannot reshape"):
        g.reshape(x, (B, S, 700))


def test_concat_adds_symbolic_sizes_and_split_takes_them_back():
    g = Graph()
    past = g.input((B, S, 8), name="past")
    new = g.input((B, 1, 8), name="new")
    cat = g.concat([past, new], axis=1)
    assert cat.shape == (B, S + 1, 8)
    a, b = g.split(cat, axis=1, sizes=(S, 1))
    assert (a.shape, b.shape) == ((B, S, 8), (B, 1, 8))
    with pytest.raises(ShapeError, match="inputs differ outside axis"):
        g.concat([past, g.input((S, S, 8), name="other")], axis=1)


def test_broadcasting_decides_over_the_whole_range():
    g = Graph()
    x = g.input((B, 1, S), name="x")
    assert g.ewadd(x, g.input((B, 12, S), name="y")).shape == (B, 12, S)
    assert g.ewadd(x, g.weight((S,), name="bias")).shape == (B, 1, S)
    with pytest.raises(ShapeError, match="not broadcastable"):
        g.ewadd(x, g.input((S, 1, S), name="z"))  # b against s: equal only for some values
    # A symbol that may be 1 against a fixed size: broadcasting differs inside the range.
    with pytest.raises(ShapeError):
        g.ewadd(g.input((ONE_UP, 4), name="u"), g.input((5, 4), name="v"))


def test_comparisons_are_decided_for_every_value_or_raise():
    assert B >= 2 and B <= 64 and not (B > 64) and S + 1 > S
    assert B * S != S * B + 0 or B * S == S * B
    assert (2 * S + S) == 3 * S and hash(2 * S + S) == hash(3 * S)
    assert S != 16  # a symbol is never an int, whatever its hint
    with pytest.raises(UndecidedDim):
        _ = S > 16
    with pytest.raises(UndecidedDim):
        int(S)
    with pytest.raises(UndecidedDim):
        np.zeros((S, 2))


def test_a_rule_fires_on_equal_symbols_and_not_on_different_ones():
    # Commutation guarded by a dim condition: fires only where dim 0 of both sides is the same
    # dim for every value of the range.
    rule = Rewrite.parse("comm-if-rows", "(ewadd ?x ?y)", "(ewadd ?y ?x)", ["(== (dim ?x 0) (dim ?y 0))"])
    applied = {}
    for name, other in (("same", B), ("different", S)):
        g = Graph()
        x = g.input((B, 1, 4), name="x")
        y = g.input((other, 4), name="y")
        g.output(g.ewadd(x, y))
        applied[name] = apply_rule(from_graph(g), rule).applied
    assert applied == {"same": 1, "different": 0}


def test_an_undecided_condition_does_not_fire():
    rule = Rewrite.parse("relu-if-wide", "(relu ?x)", "(relu (dropout ?x))", ["(> (dim ?x 0) 1)"])
    fired = []
    for dim in (SymDim.symbol("m", hint=4, lo=2), SymDim.symbol("m", hint=4, lo=1)):
        g = Graph()
        g.output(g.relu(g.input((dim, 3), name="x")))
        fired.append(apply_rule(from_graph(g), rule).applied)
    assert fired == [1, 0]


def test_the_merged_projections_rule_fires_on_symbolic_activations():
    merge = to_rewrite(load_rule_set("taso-inference").by_id(310))  # Q/K/V merged with biases
    g = Graph()
    x = g.input((B, S, 32), name="x")
    outs = []
    for i in range(2):
        w, b = g.weight((32, 32), name=f"w{i}"), g.weight((32,), name=f"b{i}")
        outs.append(g.ewadd(g.matmul(x, w), b))
    g.output(*outs)
    assert apply_rule(from_graph(g), merge).applied >= 1


def _matmul_graph(rows: object) -> Graph:
    g = Graph()
    g.output(g.matmul(g.input((rows, 256), name="x"), g.weight((256, 256), name="w")))
    return g


def test_cost_is_priced_at_the_hints_by_default_and_at_a_weighted_set_on_request():
    model = RooflineCostModel(profile="a100")
    rows = SymDim.symbol("r", hint=64, lo=1, hi=4096)
    symbolic = _matmul_graph(rows)
    assert model.graph_cost(symbolic) == pytest.approx(model.graph_cost(_matmul_graph(64)))
    points = ShapePoints(((1.0, {"r": 8}), (3.0, {"r": 2048})))
    expected = (model.graph_cost(_matmul_graph(8)) + 3 * model.graph_cost(_matmul_graph(2048))) / 4
    priced = model.at_shapes(points)
    assert priced.graph_cost(symbolic) == pytest.approx(expected)
    assert priced.graph_cost(symbolic) != pytest.approx(model.graph_cost(symbolic))
    assert UnitCostModel().at_shapes(points).graph_cost(symbolic) == 1.0
    with pytest.raises(GraphError, match="outside its range"):
        model.at_shapes(ShapePoints(((1.0, {"r": 5000}),))).graph_cost(symbolic)


def test_shape_points_parse_and_reject_bad_text():
    parsed = ShapePoints.parse("b=1;s=8,b=8;s=128:3").points
    assert parsed == ((1.0, {"b": 1, "s": 8}), (3.0, {"b": 8, "s": 128}))
    for bad in ("b", "b=x", "b=1:w", "b=1:0"):
        with pytest.raises(GraphError):
            ShapePoints.parse(bad)


def test_json_round_trip_keeps_symbols_hints_and_ranges():
    g = Graph()
    x = g.input((B, S, 64), name="x")
    y = g.reshape(g.matmul(x, g.weight((64, 64), name="w", data=np.eye(64))), (-1, 64))
    g.output(y)
    text = dumps(g)
    back = loads(text)
    assert back.shape_of(back.outputs[0]) == (B * S, 64)
    assert back.symbols() == g.symbols()
    assert back.symbols()["b"].hi == 64 and back.symbols()["s"].hi is None
    assert dumps(back) == text
    static = Graph()
    static.output(static.relu(static.input((2, 3), name="x")))
    assert '"symbols"' not in dumps(static)


def test_json_rejects_undefined_symbols_and_code():
    g = Graph()
    g.output(g.relu(g.input((S, 3), name="x")))
    text = dumps(g)
    with pytest.raises(Exception, match="undefined symbol"):
        loads(text.replace('"s"', '"t"', 1).replace('"shape": ["s"', '"shape": ["q"'))
    with pytest.raises(Exception, match="only integers"):
        loads(text.replace('"shape": ["s"', '"shape": ["__import__(\'os\')"'))


def test_the_interpreter_runs_at_the_sizes_of_its_inputs():
    g = Graph()
    x = g.input((B, S, 8), name="x")
    w = g.weight((8, 4), name="w", data=np.arange(32, dtype=np.float32).reshape(8, 4))
    g.output(g.reshape(g.matmul(x, w), (-1, 4)))
    for b, s in ((2, 3), (5, 7)):
        arr = np.random.default_rng(0).standard_normal((b, s, 8)).astype(np.float32)
        (out,) = run(g, {"x": arr})
        np.testing.assert_allclose(out, (arr @ w.graph.weight_data["w"]).reshape(-1, 4), rtol=1e-5)
    (at_hints,) = run(g)
    assert at_hints.shape == concrete((B * S, 4))
