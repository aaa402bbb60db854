"""A toy arithmetic language for egg-style "start => goal" tests of the e-graph engine.

Terms use the project's pattern syntax without the op registry: ``(mul ?x (num value=2))``,
``(sym name=a)``. The reader below accepts exactly that subset (ops with ``key=value``
attributes and child terms, ``?variables``) and builds the same PNode/Var trees as
``rewrite.pattern.parse_pattern``; attributes are ordered by name, as registry ops order theirs by
spec. The e-graph runs with ``NoAnalysis``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tensor_eqsat.egraph import EGraph, ENode, NoAnalysis
from tensor_eqsat.rewrite import Rewrite
from tensor_eqsat.rewrite.ematch import add_pattern
from tensor_eqsat.rewrite.pattern import AttrVar, Pattern, PNode, Var

_TOKEN = re.compile(r"\s*(\(|\)|[^\s()]+)")


def term(text: str) -> Pattern:
    """Read one toy term or pattern."""
    toks = _TOKEN.findall(text)
    pos = 0

    def read() -> Pattern:
        nonlocal pos
        tok = toks[pos]
        pos += 1
        if tok.startswith("?"):
            return Var(tok[1:])
        assert tok == "(", f"expected '(' or ?var in {text!r}, found {tok!r}"
        op = toks[pos]
        pos += 1
        attrs: dict[str, Any] = {}
        children: list[Pattern] = []
        while toks[pos] != ")":
            if "=" in toks[pos]:
                key, raw = toks[pos].split("=", 1)
                pos += 1
                attrs[key] = AttrVar(raw[1:]) if raw.startswith("?") else _literal(raw)
            else:
                children.append(read())
        pos += 1
        return PNode(op, tuple(sorted(attrs.items())), tuple(children))

    out = read()
    assert pos == len(toks), f"trailing tokens in {text!r}"
    return out


def _literal(raw: str) -> Any:
    return int(raw) if re.fullmatch(r"-?\d+", raw) else raw


def rule(name: str, lhs: str, rhs: str, conditions: Sequence[Any] = ()) -> Rewrite:
    return Rewrite(name, term(lhs), term(rhs), conditions)


def new_egraph(*, cycle_filter: bool = True) -> EGraph:
    return EGraph(NoAnalysis(), cycle_filter=cycle_filter)


def add(egraph: EGraph, text: str) -> int:
    return add_pattern(egraph, term(text))


def not_zero(var: str) -> Callable[[EGraph, int, Mapping[str, Any]], bool]:
    """egg's ``is_not_zero``: the class bound to ``var`` holds no ``(num value=0)``."""

    def cond(egraph: EGraph, eclass: int, subst: Mapping[str, Any]) -> bool:
        return ENode("num", (0,), ()) not in egraph.nodes(subst[var])

    return cond


def ast_size_best(egraph: EGraph, cid: int) -> tuple[int, str]:
    """Smallest term of a class by node count (a tiny greedy extractor for tests), ignoring
    blacklisted nodes; returns (size, text)."""
    egraph.rebuild()
    best: dict[int, tuple[int, str]] = {}
    changed = True
    blacklist = egraph.blacklist
    while changed:
        changed = False
        for cls in egraph.classes():
            for node in cls.nodes:
                if node in blacklist or any(ch not in best for ch in node.children):
                    continue
                size = 1 + sum(best[ch][0] for ch in node.children)
                if cls.id not in best or size < best[cls.id][0]:
                    attrs = "".join(f" {a}" for a in node.attrs)
                    kids = "".join(" " + best[ch][1] for ch in node.children)
                    text = f"({node.op}{attrs}{kids})"
                    best[cls.id] = (size, text)
                    changed = True
    return best[egraph.find(cid)]


MATH_RULES = [
    rule("mul-comm", "(mul ?a ?b)", "(mul ?b ?a)"),
    rule("add-comm", "(add ?a ?b)", "(add ?b ?a)"),
    rule("mul-assoc", "(mul ?a (mul ?b ?c))", "(mul (mul ?a ?b) ?c)"),
    rule("add-assoc", "(add ?a (add ?b ?c))", "(add (add ?a ?b) ?c)"),
    rule("mul-one", "(mul ?a (num value=1))", "?a"),
    rule("add-zero", "(add ?a (num value=0))", "?a"),
    rule("mul-zero", "(mul ?a (num value=0))", "(num value=0)"),
    rule("distribute", "(mul ?a (add ?b ?c))", "(add (mul ?a ?b) (mul ?a ?c))"),
    rule("factor", "(add (mul ?a ?b) (mul ?a ?c))", "(mul ?a (add ?b ?c))"),
    rule("sub-canon", "(sub ?a ?b)", "(add ?a (mul (num value=-1) ?b))"),
    rule("cancel-sub", "(sub ?a ?a)", "(num value=0)"),
]
"""A slice of egg's ``tests/math.rs`` rules in the toy language."""

PAPER_RULES = [
    rule("mul2-shl", "(mul ?x (num value=2))", "(shl ?x (num value=1))"),
    rule("mul-div-assoc", "(div (mul ?x ?y) ?z)", "(mul ?x (div ?y ?z))"),
    rule("div-self", "(div ?x ?x)", "(num value=1)", [not_zero("x")]),
    rule("mul-one", "(mul ?x (num value=1))", "?x"),
]
"""The rules of the paper's §2.1 example: x*2 -> x<<1, (x*y)/z -> x*(y/z), x/x -> 1, x*1 -> x."""
