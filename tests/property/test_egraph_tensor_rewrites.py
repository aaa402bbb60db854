"""Property test: sound tensor rules, applied in random order, never change what the e-graph
computes, and the cycle filter makes *every* choice of non-blacklisted nodes a valid graph.

The rules include identities that union a class with its own descendant (split of a concat,
double relu, double transpose), which is where cycles come from, and the multi-pattern matmul
merge. After each sequence the e-graph's invariants are checked, one random non-blacklisted node
is chosen per class, the choice is turned back into a graph, and the reference interpreter must
give the original graph's outputs.
"""

from __future__ import annotations

import random

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from tensor_eqsat.egraph import EGraph, find_cycle, from_graph
from tensor_eqsat.ir import Graph, run
from tensor_eqsat.rewrite import MultiRewrite, Rewrite, apply_rule

_SPLIT = "(split axis={ax} sizes=[(dim ?w1 {d}) (dim ?w2 {d})] {body})"
_MM = "(matmul (concat axis=0 ?w1 ?w2) ?x)"
_IDENT = "(get index={i} (split axis=?ax sizes=[(dim ?a ?ax) (dim ?b ?ax)] (concat axis=?ax ?a ?b)))"

RULES: list[Rewrite | MultiRewrite] = [
    Rewrite.parse("ewadd-comm", "(ewadd ?a ?b)", "(ewadd ?b ?a)"),
    Rewrite.parse("ewadd-assoc", "(ewadd ?a (ewadd ?b ?c))", "(ewadd (ewadd ?a ?b) ?c)"),
    Rewrite.parse("ewadd-assoc-r", "(ewadd (ewadd ?a ?b) ?c)", "(ewadd ?a (ewadd ?b ?c))"),
    Rewrite.parse("ewmul-comm", "(ewmul ?a ?b)", "(ewmul ?b ?a)"),
    Rewrite.parse("matmul-relu-fuse", "(relu (matmul ?x ?w))", "(matmul activation=relu ?x ?w)"),
    Rewrite.parse("matmul-relu-split", "(matmul activation=relu ?x ?w)", "(relu (matmul ?x ?w))"),
    Rewrite.parse("matmul-assoc", "(matmul ?a (matmul ?b ?c))", "(matmul (matmul ?a ?b) ?c)"),
    Rewrite.parse("matmul-assoc-r", "(matmul (matmul ?a ?b) ?c)", "(matmul ?a (matmul ?b ?c))"),
    Rewrite.parse(
        "matmul-distribute", "(ewadd (matmul ?x ?w1) (matmul ?x ?w2))", "(matmul ?x (ewadd ?w1 ?w2))"
    ),
    Rewrite.parse("matmul-factor", "(matmul ?x (ewadd ?w1 ?w2))", "(ewadd (matmul ?x ?w1) (matmul ?x ?w2))"),
    Rewrite.parse("relu-idem", "(relu (relu ?x))", "(relu ?x)"),
    Rewrite.parse("relu-dup", "(relu ?x)", "(relu (relu ?x))"),
    Rewrite.parse("transpose-inv", "(transpose perm=[1 0] (transpose perm=[1 0] ?x))", "?x"),
    Rewrite.parse(
        "transpose-dup", "(matmul ?a ?b)", "(transpose perm=[1 0] (transpose perm=[1 0] (matmul ?a ?b)))"
    ),
    Rewrite.parse("split-concat-0", _IDENT.format(i=0), "?a"),
    Rewrite.parse("split-concat-1", _IDENT.format(i=1), "?b"),
    MultiRewrite.parse(
        "matmul-merge",
        ("(matmul ?w1 ?x)", "(matmul ?w2 ?x)"),
        tuple(f"(get index={i} {_SPLIT.format(ax=0, d=0, body=_MM)})" for i in (0, 1)),
        symmetric=True,
    ),
    MultiRewrite.parse(
        "relu-merge",
        ("(relu ?a)", "(relu ?b)"),
        tuple(
            f"(get index={i} (split axis=0 sizes=[(dim ?a 0) (dim ?b 0)] (relu (concat axis=0 ?a ?b))))"
            for i in (0, 1)
        ),
        symmetric=True,
    ),
]


def small_graph() -> Graph:
    g = Graph()
    x = g.input((6, 4), name="x")
    w1, w2, w3 = (g.weight((6, 6), name=f"w{i}") for i in (1, 2, 3))
    a = g.relu(g.matmul(w1, x))
    b = g.relu(g.matmul(w2, x))
    c = g.ewadd(a, g.ewadd(b, x))
    d = g.relu(g.relu(g.matmul(w3, c)))
    p, q = g.split(g.concat([d, b], axis=1), axis=1, sizes=(4, 4))
    e = g.ewmul(p, g.transpose(g.transpose(q, (1, 0)), (1, 0)))
    g.output(g.ewadd(e, a), c)
    return g


GRAPH = small_graph()
EXPECTED = run(GRAPH, seed=1)


def random_choice(eg: EGraph, rng: random.Random) -> dict:
    blacklist = eg.blacklist
    choice = {}
    for cls in eg.classes():
        usable = [n for n in cls.nodes if n not in blacklist]
        assert usable, f"class {cls.id} has only blacklisted nodes"
        choice[cls.id] = rng.choice(usable)
    return choice


@given(st.lists(st.integers(0, len(RULES) - 1), min_size=1, max_size=8), st.integers(0, 2**32 - 1))
def test_random_rule_sequences_preserve_semantics(sequence, seed):
    eg = from_graph(GRAPH)
    for i in sequence:
        apply_rule(eg, RULES[i], node_budget=150)
    eg.check()
    assert find_cycle(eg, roots=eg.class_ids()) is None
    rng = random.Random(seed)
    for _ in range(3):
        out = eg.to_graph(random_choice(eg, rng))
        out.validate()
        for want, got in zip(EXPECTED, run(out, seed=1), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
