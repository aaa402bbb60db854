"""E-matching and instantiation of tensor patterns."""

from __future__ import annotations

import pytest

from tensor_eqsat.egraph import EGraph, ENode, from_graph
from tensor_eqsat.errors import ShapeError
from tensor_eqsat.ir import Graph
from tensor_eqsat.rewrite import Searcher, add_pattern, lookup_pattern, parse_pattern
from tensor_eqsat.rewrite.pattern import PatternError, PNode


def search(eg: EGraph, text: str, limit=None):
    return [(m.eclass, m.subst) for m in Searcher(parse_pattern(text)).search(eg, limit)]


@pytest.fixture
def convnet() -> tuple[EGraph, dict[str, int]]:
    g = Graph()
    x = g.input((1, 4, 8, 8), name="x")
    w1 = g.weight((4, 4, 3, 3), name="w1")
    w2 = g.weight((4, 4, 1, 1), name="w2")
    c1 = g.conv2d(x, w1)
    c2 = g.conv2d(x, w2, stride=(2, 2), activation="relu")
    r = g.relu(c1)
    s = g.ewadd(r, r)
    g.output(s, c2)
    eg = from_graph(g)
    # from_graph adds nodes in graph order, so class ids follow the builder calls above.
    ids = {"x": 0, "w1": 1, "w2": 2, "c1": 3, "c2": 4, "r": 5, "s": 6}
    assert eg.nodes(ids["s"])[0].op == "ewadd"
    return eg, ids


def test_literal_attributes_default_to_the_spec_default(convnet):
    eg, ids = convnet
    # (conv2d ?x ?w) only matches stride [1 1], same padding, no activation.
    assert search(eg, "(conv2d ?x ?w)") == [(ids["c1"], {"x": ids["x"], "w": ids["w1"]})]
    assert search(eg, "(conv2d stride=[2 2] activation=relu ?x ?w)") == [
        (ids["c2"], {"x": ids["x"], "w": ids["w2"]})
    ]


def test_attribute_variables_bind_values(convnet):
    eg, ids = convnet
    got = search(eg, "(conv2d stride=?s activation=?a ?x ?w)")
    assert got == [
        (ids["c1"], {"s": (1, 1), "a": "none", "x": ids["x"], "w": ids["w1"]}),
        (ids["c2"], {"s": (2, 2), "a": "relu", "x": ids["x"], "w": ids["w2"]}),
    ]
    assert search(eg, "(conv2d stride=[?s ?s] activation=relu ?x ?w)") == [
        (ids["c2"], {"s": 2, "x": ids["x"], "w": ids["w2"]})
    ]


def test_nonlinear_patterns_need_the_same_class(convnet):
    eg, ids = convnet
    assert search(eg, "(ewadd ?a ?a)") == [(ids["s"], {"a": ids["r"]})]
    assert search(eg, "(ewadd ?a (relu (conv2d ?x ?w)))") == [
        (ids["s"], {"a": ids["r"], "x": ids["x"], "w": ids["w1"]})
    ]
    assert search(eg, "(ewadd ?a (relu ?a))") == []


def test_limit_and_no_match(convnet):
    eg, _ = convnet
    assert len(search(eg, "(conv2d stride=?s activation=?a ?x ?w)", limit=1)) == 1
    assert search(eg, "(matmul ?a ?b)") == []


def test_blacklisted_nodes_are_not_matched(convnet):
    eg, ids = convnet
    eg.blacklist_node(ENode("relu", (), (ids["c1"],)))
    assert search(eg, "(relu ?x)") == []
    assert search(eg, "(ewadd ?a ?b)") == [(ids["s"], {"a": ids["r"], "b": ids["r"]})]
    assert search(eg, "(ewadd (relu ?x) ?b)") == []


def test_attribute_expression_on_the_left_is_checked():
    g = Graph()
    a = g.input((2, 3), name="a")
    b = g.input((2, 5), name="b")
    c = g.concat([a, b], axis=1)
    p, q = g.split(c, axis=1, sizes=(3, 5))
    r, s = g.split(c, axis=1, sizes=(5, 3))
    g.output(p, q, r, s)
    eg = from_graph(g)
    pat = "(split axis=1 sizes=[(dim ?a 1) (dim ?b 1)] (concat axis=1 ?a ?b))"
    got = search(eg, pat)
    assert len(got) == 1 and eg.data(got[0][0]).shapes == ((2, 3), (2, 5))


def test_variadic_concat_matches_only_its_arity():
    g = Graph()
    xs = [g.input((1, 2), name=f"x{i}") for i in range(3)]
    g.output(g.concat(xs[:2], axis=0), g.concat(xs, axis=0))
    eg = from_graph(g)
    assert len(search(eg, "(concat axis=0 ?a ?b)")) == 1
    assert len(search(eg, "(concat axis=0 ?a ?b ?c)")) == 1


def test_add_pattern_evaluates_expressions_and_type_checks():
    g = Graph()
    x = g.input((2, 4), name="x")
    w1 = g.weight((4, 3), name="w1")
    w2 = g.weight((4, 5), name="w2")
    g.output(g.matmul(x, w1), g.matmul(x, w2))
    eg = from_graph(g)
    subst = {"x": 0, "w1": 1, "w2": 2}
    text = "(get index=1 (split axis=1 sizes=[(dim ?w1 1) (dim ?w2 1)] (matmul ?x (concat axis=1 ?w1 ?w2))))"
    before = eg.num_enodes
    cid = add_pattern(eg, parse_pattern(text), subst)
    assert eg.data(cid).shapes == ((2, 5),)
    assert eg.num_enodes == before + 4
    # Adding it again finds everything.
    assert add_pattern(eg, parse_pattern(text), subst) == cid and eg.num_enodes == before + 4
    with pytest.raises(ShapeError):
        add_pattern(eg, parse_pattern("(matmul ?w1 ?w2)"), subst)
    assert eg.num_enodes == before + 4
    with pytest.raises(PatternError, match=r"unbound variables \?y"):
        add_pattern(eg, parse_pattern("(ewadd ?x ?y)"), subst)


def test_lookup_pattern_of_ground_terms():
    g = Graph()
    x = g.input((2, 2), name="x")
    g.output(g.relu(x))
    eg = from_graph(g)
    x_term = PNode("input", (("shape", (2, 2)), ("name", "x"), ("dtype", "float32")), ())
    assert lookup_pattern(eg, PNode("relu", (), (x_term,))) == eg.roots[0]
    assert lookup_pattern(eg, PNode("tanh", (), (x_term,))) is None
    with pytest.raises(PatternError, match="without variables"):
        lookup_pattern(eg, parse_pattern("?x"))


# -- compiled attribute values -------------------------------------------------------------------


def _interpret(v, attrs, shape_of):
    """The tree-walking evaluation compiled values replace (kept here as the reference)."""
    from tensor_eqsat.rewrite.pattern import AttrVar, Expr, ListValue, Var

    if isinstance(v, AttrVar):
        return attrs[v.name]
    if isinstance(v, Var):
        raise ValueError(f"tensor variable ?{v.name} used as a value")
    if isinstance(v, ListValue):
        return tuple(_interpret(i, attrs, shape_of) for i in v.items)
    if isinstance(v, Expr):
        if v.fn == "dim":
            var, axis = v.args
            return shape_of(var.name)[int(_interpret(axis, attrs, shape_of))]
        if v.fn == "rank":
            return len(shape_of(v.args[0].name))
        a, b = (_interpret(x, attrs, shape_of) for x in v.args)
        if v.fn == "add":
            return a + b
        if v.fn == "sub":
            return a - b
        if v.fn == "mul":
            return a * b
        if v.fn == "div":
            if b == 0 or a % b != 0:
                raise ValueError(f"{a} is not divisible by {b}")
            return a // b
    return v


@pytest.mark.parametrize(
    "text",
    [
        "(== (div (dim ?x 1) 2) ?g)",
        "(== (dim ?x -1) (mul (dim ?w 0) ?g))",
        "(== (add (dim ?x 0) (sub (rank ?x) 1)) (dim ?w 3))",
        "(== (div (dim ?x 1) 3) ?g)",
        "(== (dim ?x 7) 1)",
        "(== (dim ?x ?a) ?q)",
        "(== (div (dim ?x 1) ?z) 1)",
    ],
)
def test_compiled_values_evaluate_and_fail_as_the_interpreter(text: str) -> None:
    from tensor_eqsat.rewrite.pattern import compile_value, eval_value, parse_condition

    shapes = {"x": (2, 64, 8, 8), "w": (32, 2, 3, 8)}
    attrs = {"g": 32, "a": 2, "z": 0}
    cond = parse_condition(text)
    for side in (cond.lhs, cond.rhs):
        try:
            expected = ("ok", _interpret(side, attrs, shapes.__getitem__))
        except Exception as exc:
            expected = ("err", type(exc))
        for fn in (compile_value(side), lambda a, s, side=side: eval_value(side, a, s)):
            try:
                got = ("ok", fn(attrs, shapes.__getitem__))
            except Exception as exc:
                got = ("err", type(exc))
            assert got == expected, (text, side)


def test_compiled_values_keep_literal_types() -> None:
    from tensor_eqsat.rewrite.pattern import ListValue, compile_value

    ints, floats = ListValue((1, 2)), ListValue((1.0, 2.0))
    assert ints == floats  # equal values ...
    assert [type(x) for x in compile_value(ints)({}, lambda n: ())] == [int, int]
    assert [type(x) for x in compile_value(floats)({}, lambda n: ())] == [float, float]  # ... own types
