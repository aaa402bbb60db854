"""Rule files: the project's line-oriented syntax for rewrite rules, and its loader.

Format (``#`` starts a comment; blank lines are ignored)::

    rule 0 matmul-assoc single
        (matmul (matmul ?a ?b) ?c) => (matmul ?a (matmul ?b ?c))

    rule 21 matmul-concat-fuse single
        (ewadd (matmul ?a ?b) (matmul ?c ?d)) => (matmul (concat axis=1 ?a ?c) (concat axis=0 ?b ?d))
        if (== (rank ?a) 2)

    rule 127 relu-concat-split multi symmetric
        (relu ?a) => (get index=0 (split axis=1 sizes=[(dim ?a 1) (dim ?b 1)] (relu (concat axis=1 ?a ?b))))
        (relu ?b) => (get index=1 (split axis=1 sizes=[(dim ?a 1) (dim ?b 1)] (relu (concat axis=1 ?a ?b))))

A rule starts with a header ``rule ID NAME KIND [symmetric]``: a unique non-negative id, a unique
name (letters, digits, ``_ - .``), the kind ``single`` (one ``LHS => RHS`` line) or ``multi`` (two),
and for multi rules the optional ``symmetric`` flag (see :class:`RuleSpec`). The lines after the
header, up to the next header, hold the rule's ``LHS => RHS`` pairs and its ``if CONDITION``
lines, one statement per line. Patterns and conditions use the pattern language of
:mod:`tensor_eqsat.rewrite.pattern`.

The loader checks everything that can be checked without shapes and reports the file, line and
column: unknown ops, arity, attribute names and types (all from the op registry), a left side
that is a bare variable, right-side or condition variables the left sides do not bind, a name
used both as a tensor and as an attribute variable, the number of pairs for the kind, and
duplicate ids or names (also across the files of a rule set).

Alternatives rejected: TENSAT's one-rule-per-line ``lhs=>rhs`` files carry no ids, names or
conditions and put multi rules on two anonymous consecutive lines; a TOML/JSON container would
wrap every pattern in quotes and lose line numbers in error messages.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tensor_eqsat.errors import FormatError, parse_enum
from tensor_eqsat.rewrite.pattern import (
    AttrVar,
    Condition,
    Expr,
    ListValue,
    Pattern,
    PatternError,
    PNode,
    Var,
    attr_vars,
    parse_condition,
    parse_pattern,
    tensor_vars,
    value_vars,
    walk,
)
from tensor_eqsat.rules.rule_spec import RuleKind, RuleSpec

_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
_PAIRS_PER_KIND = {RuleKind.SINGLE: 1, RuleKind.MULTI: 2}


class RuleFileError(FormatError):
    """A rule file is malformed; the message starts with ``file:line``."""


@dataclass
class _Draft:
    """A rule being read: its header and the statements seen so far, with their line numbers."""

    id: int
    name: str
    kind: RuleKind
    symmetric: bool
    line: int
    pairs: list[tuple[Pattern, Pattern, int]] = field(default_factory=list)
    conditions: list[tuple[Condition, int]] = field(default_factory=list)


MAX_PATTERN_DEPTH = 64
"""The deepest pattern a rule may have. TASO's rules are at most a few levels deep; the bound
keeps every recursive pass over patterns (matching, verification, printing) far from Python's
recursion limit, so a hostile file gets a clear error instead of a crash."""


def _depth(p: Pattern) -> int:
    """Depth of a pattern, computed without recursion (a variable is depth 1)."""
    deepest, stack = 0, [(p, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        if isinstance(node, PNode):
            stack.extend((c, d + 1) for c in node.children)
    return deepest


def _parse_bounded(text: str, where: str) -> Pattern:
    """parse_pattern, refusing patterns deeper than :data:`MAX_PATTERN_DEPTH`."""
    try:
        pattern = parse_pattern(text, where)
    except RecursionError:
        depth = None
    else:
        depth = _depth(pattern)
        if depth <= MAX_PATTERN_DEPTH:
            return pattern
    shown = "" if depth is None else f" ({depth} levels)"
    raise RuleFileError(f"{where}: pattern nested too deeply{shown}; at most {MAX_PATTERN_DEPTH} levels")


def parse_rules(text: str, source: str = "<rules>") -> list[RuleSpec]:
    """Parse the rules in ``text`` (rule-file syntax); ``source`` names it in error messages.

    Raises RuleFileError (or PatternError, also a FormatError) naming ``source:line``.

    >>> rules = parse_rules('''
    ... rule 7 ewadd-comm single   # a comment
    ...     (ewadd ?a ?b) => (ewadd ?b ?a)
    ... ''', "example.rules")
    >>> rules[0].id, rules[0].name, rules[0].source
    (7, 'ewadd-comm', 'example.rules:2')
    >>> parse_rules("rule 1 bad single\\n  (ewadd ?a ?b) => (ewadd ?a ?c)", "x.rules")
    Traceback (most recent call last):
    ...
    tensor_eqsat.rules.loader.RuleFileError: x.rules:2: right-hand side uses ?c, which no left-hand side binds
    """
    drafts: list[_Draft] = []
    current: _Draft | None = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].rstrip()
        body = line.strip()
        if not body:
            continue
        where = f"{source}:{lineno}"
        first = body.split()[0]
        if first == "rule":
            current = _parse_header(body, where, lineno)
            drafts.append(current)
        elif current is None:
            raise RuleFileError(f"{where}: statement outside a rule (a rule starts with 'rule ID NAME KIND')")
        elif first == "if":
            start = line.index("if") + 2
            cond = parse_condition(" " * start + line[start:], where)
            current.conditions.append((cond, lineno))
        elif "=>" in line:
            if line.count("=>") != 1:
                raise RuleFileError(f"{where}: a pair has exactly one '=>'")
            mid = line.index("=>")
            lhs = _parse_bounded(line[:mid], where)
            rhs = _parse_bounded(" " * (mid + 2) + line[mid + 2 :], where)
            current.pairs.append((lhs, rhs, lineno))
        else:
            raise RuleFileError(f"{where}: expected 'LHS => RHS', 'if CONDITION' or 'rule ID NAME KIND'")
    rules = [_finish(d, source) for d in drafts]
    check_unique(rules)
    return rules


def load_rule_file(path: str | Path) -> list[RuleSpec]:
    """Load one rule file; errors name the file and line.

    Raises RuleFileError when the file cannot be read or is malformed.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise RuleFileError(f"{p}: cannot read rule file ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise RuleFileError(f"{p}: not a UTF-8 text file (byte {exc.start}: {exc.reason})") from None
    return parse_rules(text, str(p))


def load_rule_files(paths: Iterable[str | Path]) -> list[RuleSpec]:
    """Load several rule files as one list, sorted by id; ids and names must be unique across them."""
    rules: list[RuleSpec] = []
    for path in paths:
        rules.extend(load_rule_file(path))
    check_unique(rules)
    return sorted(rules, key=lambda r: r.id)


def check_unique(rules: Sequence[RuleSpec]) -> None:
    """Raise RuleFileError if two rules share an id or a name (naming both places)."""
    by_id: dict[int, RuleSpec] = {}
    by_name: dict[str, RuleSpec] = {}
    for r in rules:
        if r.id in by_id:
            raise RuleFileError(f"{r.source}: duplicate rule id {r.id} (also at {by_id[r.id].source})")
        if r.name in by_name:
            raise RuleFileError(
                f"{r.source}: duplicate rule name {r.name!r} (also at {by_name[r.name].source})"
            )
        by_id[r.id] = r
        by_name[r.name] = r


# ---------------------------------------------------------------------------------------------


def _parse_header(body: str, where: str, lineno: int) -> _Draft:
    words = body.split()
    usage = "expected 'rule ID NAME single' or 'rule ID NAME multi [symmetric]'"
    if len(words) not in (4, 5):
        raise RuleFileError(f"{where}: {usage}")
    _, id_text, name, kind_text, *flags = words
    if not id_text.isdigit():
        raise RuleFileError(f"{where}: rule id must be a non-negative integer, got {id_text!r}")
    if not _NAME.fullmatch(name):
        raise RuleFileError(f"{where}: rule name {name!r} may only hold letters, digits, '_', '-' and '.'")
    kind = parse_enum(RuleKind, kind_text, "rule kind", RuleFileError, where=f"{where}: ")
    if flags and flags != ["symmetric"]:
        raise RuleFileError(f"{where}: unknown flag {flags[0]!r} ({usage})")
    symmetric = bool(flags)
    if symmetric and kind is not RuleKind.MULTI:
        raise RuleFileError(f"{where}: only multi rules can be symmetric")
    return _Draft(int(id_text), name, kind, symmetric, lineno)


def _finish(d: _Draft, source: str) -> RuleSpec:
    head = f"{source}:{d.line}"
    want = _PAIRS_PER_KIND[d.kind]
    if len(d.pairs) != want:
        raise RuleFileError(
            f"{head}: rule {d.id} ({d.name}) is {d.kind.value} and needs {want} 'LHS => RHS' "
            f"line{'s' if want > 1 else ''}, found {len(d.pairs)}"
        )
    bound_tensors: set[str] = set()
    bound_attrs: set[str] = set()
    for lhs, _, line in d.pairs:
        if isinstance(lhs, Var):
            raise RuleFileError(
                f"{source}:{line}: left-hand side must be an op pattern, not the variable {lhs}"
            )
        bound_tensors.update(tensor_vars(lhs))
        bound_attrs.update(attr_vars(lhs))
    clash = bound_tensors & bound_attrs
    if clash:
        name = sorted(clash)[0]
        raise RuleFileError(f"{head}: ?{name} is used both as a tensor and as an attribute variable")
    for lhs, rhs, line in d.pairs:
        where = f"{source}:{line}"
        _check_expr_vars(lhs, bound_tensors, bound_attrs, where, "left-hand side")
        for v in tensor_vars(rhs):
            if v not in bound_tensors:
                raise RuleFileError(f"{where}: right-hand side uses ?{v}, which no left-hand side binds")
        for v in attr_vars(rhs):
            if v not in bound_attrs:
                raise RuleFileError(
                    f"{where}: right-hand side uses attribute variable ?{v}, which no left-hand side binds"
                )
        _check_expr_vars(rhs, bound_tensors, bound_attrs, where, "right-hand side")
    for cond, line in d.conditions:
        for side in (cond.lhs, cond.rhs):
            _check_value_vars(side, bound_tensors, bound_attrs, f"{source}:{line}", "condition")
    return RuleSpec(
        id=d.id,
        name=d.name,
        kind=d.kind,
        lhs=tuple(p[0] for p in d.pairs),
        rhs=tuple(p[1] for p in d.pairs),
        conditions=tuple(c for c, _ in d.conditions),
        symmetric=d.symmetric,
        source=head,
    )


def _check_expr_vars(p: Pattern, tensors: set[str], attrs: set[str], where: str, what: str) -> None:
    for q in walk(p):
        if isinstance(q, PNode):
            for _, value in q.attrs:
                if isinstance(value, Expr | ListValue):
                    _check_value_vars(value, tensors, attrs, where, what)


def _check_value_vars(value: object, tensors: set[str], attrs: set[str], where: str, what: str) -> None:
    for v in value_vars(value):  # type: ignore[arg-type]
        if isinstance(v, Var) and v.name not in tensors:
            raise RuleFileError(f"{where}: {what} uses ?{v.name}, which no left-hand side binds")
        if isinstance(v, AttrVar) and v.name not in attrs:
            if v.name in tensors:
                raise RuleFileError(
                    f"{where}: {what} uses tensor variable ?{v.name} as a value; "
                    f"write (dim ?{v.name} I) or (rank ?{v.name})"
                )
            raise RuleFileError(f"{where}: {what} uses ?{v.name}, which no left-hand side binds")


__all__ = [
    "PatternError",
    "RuleFileError",
    "check_unique",
    "load_rule_file",
    "load_rule_files",
    "parse_rules",
]
