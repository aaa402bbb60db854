"""Every rule of the paper's sets is in our rule files exactly once, structurally.

TENSAT's rule files (../shared/reference/tensat-data) are parsed with a small test-only parser
for its syntax, both sides are mapped to our ops and attributes, variables are renamed by first
appearance, and the result must equal our rule with the same id. The six hand-written rules
(TENSAT's PRE_DEFINED_RULES and PRE_DEFINED_MULTI in src/rewrites.rs) are quoted below.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from tensor_eqsat.rewrite.pattern import Expr, Pattern, PNode, Var, eval_value
from tensor_eqsat.rules.rule_spec import RuleKind, RuleSpec
from tensor_eqsat.rules.sets import load_rule_set

PRE_DEFINED_RULES = [
    "(conv2d 1 1 0 0 ?input_1 ?input_2)=>(conv2d 1 1 0 0 ?input_1 (merge ?input_2 2))",
    "(conv2d 1 1 0 2 ?input_1 ?input_2)=>(conv2d 1 1 0 2 ?input_1 (merge ?input_2 2))",
    "(conv2d 2 2 0 0 ?input_1 ?input_2)=>(conv2d 2 2 0 0 ?input_1 (merge ?input_2 2))",
    "(conv2d 2 2 0 2 ?input_1 ?input_2)=>(conv2d 2 2 0 2 ?input_1 (merge ?input_2 2))",
]
_ENLARGED = "(conv2d 1 1 0 {a} ?input_1 (concat 0 4 (enlarge ?input_2 ?input_3) ?input_3))"
PRE_DEFINED_MULTI = [
    f"(conv2d 1 1 0 {a} ?input_1 ?input_{w})=>(split_{k} (split 1 {_ENLARGED.format(a=a)}))"
    for a in (0, 2)
    for k, w in ((0, 2), (1, 3))
]

ACTIVATION = {0: "none", 1: "sigmoid", 2: "relu", 3: "tanh"}
PADDING = {0: "same", 1: "valid"}

Tree = tuple  # ("?", name) or (op, attrs, children)


# ---- TENSAT's syntax ------------------------------------------------------------------------


def parse_tensat(text: str) -> object:
    """An s-expression as nested lists of strings."""
    tokens = re.findall(r"\(|\)|[^\s()]+", text)
    pos = 0

    def expr() -> object:
        nonlocal pos
        tok = tokens[pos]
        pos += 1
        if tok != "(":
            return tok
        items = []
        while tokens[pos] != ")":
            items.append(expr())
        pos += 1
        return items

    out = expr()
    assert pos == len(tokens), text
    return out


def from_tensat(e: object) -> Tree:
    """TENSAT's ops and Num attributes mapped to ours (concat's ndim and split's implicit sizes
    have no counterpart: ndim becomes a condition where needed, sizes are explicit in ours)."""
    if isinstance(e, str):
        assert e.startswith("?"), e
        return ("?", e[1:])
    assert isinstance(e, list)
    op, *args = e
    if op == "matmul":
        return (
            "matmul",
            (("activation", ACTIVATION[int(args[0])]),),
            (from_tensat(args[1]), from_tensat(args[2])),
        )
    if op == "conv2d":
        sh, sw, pad, act = (int(a) for a in args[:4])
        attrs = (("stride", (sh, sw)), ("padding", PADDING[pad]), ("activation", ACTIVATION[act]))
        return ("conv2d", attrs, (from_tensat(args[4]), from_tensat(args[5])))
    if op == "concat":
        return ("concat", (("axis", int(args[0])),), (from_tensat(args[2]), from_tensat(args[3])))
    if op in ("split_0", "split_1"):
        (split,) = args
        assert split[0] == "split"
        inner = ("split", (("axis", int(split[1])),), (from_tensat(split[2]),))
        return ("get", (("index", int(op[-1])),), (inner,))
    if op == "merge":
        return ("merge", (("count", int(args[1])),), (from_tensat(args[0]),))
    assert op in ("ewadd", "ewmul", "relu", "enlarge"), op
    return (op, (), tuple(from_tensat(a) for a in args))


# ---- ours -----------------------------------------------------------------------------------

# Attributes with no TENSAT counterpart: split's sizes and merge's group count.
_EXTRA = {"split": {"sizes"}, "merge": {"groups"}}


def at_rank_2(v: object) -> object:
    """An axis written for any rank, such as ``(sub (rank ?a) 1)``, at rank 2: TENSAT's rules
    were written for matrices, and a rank-general rule must be TENSAT's rule there."""
    if isinstance(v, Expr):
        return eval_value(v, {}, lambda name: (2, 2))
    return v


def from_ours(p: Pattern) -> Tree:
    if isinstance(p, Var):
        return ("?", p.name)
    assert isinstance(p, PNode)
    attrs = tuple((k, at_rank_2(v)) for k, v in p.attrs if k not in _EXTRA.get(p.op, set()))
    return (p.op, attrs, tuple(from_ours(c) for c in p.children))


def canonical(trees: list[Tree]) -> tuple[Tree, ...]:
    """The trees with variables renamed v0, v1, ... by first appearance across all of them."""
    names: dict[str, str] = {}

    def walk(t: Tree) -> Tree:
        if t[0] == "?":
            return ("?", names.setdefault(t[1], f"v{len(names)}"))
        op, attrs, kids = t
        return (op, attrs, tuple(walk(k) for k in kids))

    return tuple(walk(t) for t in trees)


def reference_rules(lines: list[str], multi: bool) -> list[tuple[Tree, ...]]:
    if not multi:
        return [canonical([from_tensat(parse_tensat(s)) for s in line.split("=>")]) for line in lines]
    assert len(lines) % 2 == 0
    out = []
    for k in range(0, len(lines), 2):
        trees = [from_tensat(parse_tensat(s)) for line in lines[k : k + 2] for s in line.split("=>")]
        out.append(canonical(trees))
    return out


def ours(rule: RuleSpec) -> tuple[Tree, ...]:
    return canonical([from_ours(p) for pair in rule.pairs for p in pair])


def read_lines(path: Path) -> list[str]:
    return [line for line in path.read_text().split("\n") if line.strip()]


@pytest.fixture
def tensat_data(shared_dir: Path) -> Path:
    data = shared_dir / "reference" / "tensat-data"
    if not (data / "converted.txt").is_file():
        pytest.skip(f"TENSAT's rule files not found in {data}")
    return data


def check_correspondence(
    set_name: str, single: list[tuple[Tree, ...]], multi: list[tuple[Tree, ...]]
) -> None:
    rules = load_rule_set(set_name)
    expected = {i: (RuleKind.SINGLE, t) for i, t in enumerate(single)}
    expected.update({len(single) + i: (RuleKind.MULTI, t) for i, t in enumerate(multi)})
    # Nothing missing, nothing extra, each id the same rule.
    assert sorted(r.id for r in rules) == sorted(expected)
    for r in rules:
        kind, tree = expected[r.id]
        assert r.kind is kind, f"rule {r.id}: kind {r.kind} != {kind}"
        assert ours(r) == tree, f"rule {r.id} ({r.name}) does not match the reference rule {r.id}"
    # Each reference rule corresponds to exactly one project rule (counting repeats, which the
    # reference has too: the multisets agree).
    assert Counter(ours(r) for r in rules) == Counter(t for _, t in expected.values())


def test_taso_set_matches_tensat_rule_files(tensat_data):
    single = reference_rules(read_lines(tensat_data / "converted.txt"), multi=False)
    multi = reference_rules(read_lines(tensat_data / "converted_multi.txt"), multi=True)
    assert (len(single), len(multi)) == (120, 13)
    single += reference_rules(PRE_DEFINED_RULES, multi=False)
    multi += reference_rules(PRE_DEFINED_MULTI, multi=True)
    check_correspondence("taso", single, multi)


def test_nasrnn_set_matches_tensat_nasrnn_multi_file(tensat_data):
    single = reference_rules(read_lines(tensat_data / "converted.txt"), multi=False)
    single += reference_rules(PRE_DEFINED_RULES, multi=False)
    multi = reference_rules(read_lines(tensat_data / "converted_multi_nasrnn.txt"), multi=True)
    multi += reference_rules(PRE_DEFINED_MULTI, multi=True)
    check_correspondence("taso-nasrnn", single, multi)


def test_symmetric_flags_follow_tensat():
    rules = load_rule_set("taso")
    assert [r.id for r in rules.multi if r.symmetric] == list(range(124, 137))
    assert [r.id for r in rules.multi if not r.symmetric] == [137, 138]


def test_a_changed_rule_is_noticed(tensat_data):
    # The comparison is not vacuous: swapping two operands of one rule breaks it.
    single = reference_rules(read_lines(tensat_data / "converted.txt"), multi=False)
    rule = load_rule_set("taso").by_id(21)
    lhs, rhs = ours(rule)
    assert (lhs, rhs) == single[21]
    op, attrs, (a, b) = rhs
    assert canonical([lhs, (op, attrs, (b, a))]) != single[21]
