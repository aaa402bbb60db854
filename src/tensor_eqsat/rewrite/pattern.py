"""The pattern language: s-expressions with ``?variables`` and typed attributes.

Grammar::

    pattern   := VAR | "(" OP item* ")"
    item      := NAME "=" value | pattern          attributes (any order) and tensor children
    value     := INT | FLOAT | WORD | VAR | "[" value* "]" | "(" FN value* ")"
    condition := "(" CMP value value ")"           CMP in == != < <= > >=

* ``?x`` in a child position is a tensor variable; after ``NAME=`` it is an attribute variable
  that binds the attribute's value on the left-hand side and reuses it on the right.
* ``[1 1]`` is a list (stride, kernel, sizes, perm, shape).
* ``(FN ...)`` is an attribute expression evaluated at instantiation time from the shapes of the
  bound tensor variables: ``(dim ?x 1)`` (size of dim 1 of ?x), ``(rank ?x)``, ``(add a b)``,
  ``(sub a b)``, ``(mul a b)``, ``(div a b)`` (exact integer division). They let a right-hand side
  say ``(split axis=1 sizes=[(dim ?w1 1) (dim ?w2 1)] ...)`` where TENSAT relied on TASO's hidden
  split bookkeeping.
* Attributes that are omitted take their OpSpec default on both sides, so ``(conv2d ?x ?w)``
  matches only stride [1 1], SAME padding and no activation; write ``activation=?a`` to match any.
* ``(get index=I P)`` selects output I of a multi-output pattern (split).

Examples::

    (ewadd ?a ?b)
    (conv2d activation=relu ?x (ewadd ?w1 ?w2))
    (get index=0 (split axis=1 sizes=[(dim ?w1 1) (dim ?w2 1)] (matmul ?x (concat axis=1 ?w1 ?w2))))
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Union

from tensor_eqsat.errors import FormatError, TensorEqsatError
from tensor_eqsat.ir.ops import get_op
from tensor_eqsat.ir.opspec import PROJECTION, AttrSpec, OpSpec
from tensor_eqsat.ir.types import Shape

EXPR_FNS: dict[str, int] = {"dim": 2, "rank": 1, "add": 2, "sub": 2, "mul": 2, "div": 2}
"""Attribute-expression functions and their arity."""

COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "==": lambda a, b: bool(a == b),
    "!=": lambda a, b: bool(a != b),
    "<": lambda a, b: bool(a < b),
    "<=": lambda a, b: bool(a <= b),
    ">": lambda a, b: bool(a > b),
    ">=": lambda a, b: bool(a >= b),
}


class PatternError(FormatError):
    """A pattern or condition does not parse or does not fit the op registry."""


@dataclass(frozen=True)
class Var:
    """A tensor variable ``?name``."""

    name: str

    def __str__(self) -> str:
        return f"?{self.name}"


@dataclass(frozen=True)
class AttrVar:
    """An attribute variable ``?name`` (after ``attr=``)."""

    name: str

    def __str__(self) -> str:
        return f"?{self.name}"


@dataclass(frozen=True)
class Expr:
    """An attribute expression ``(fn args...)``; ``dim`` and ``rank`` take a tensor Var first."""

    fn: str
    args: tuple[AttrValue, ...]

    def __str__(self) -> str:
        return "(" + " ".join([self.fn, *(format_value(a) for a in self.args)]) + ")"


@dataclass(frozen=True)
class ListValue:
    """A list whose items may be expressions or variables: ``[(dim ?a 1) (dim ?b 1)]``."""

    items: tuple[AttrValue, ...]

    def __str__(self) -> str:
        return "[" + " ".join(format_value(i) for i in self.items) + "]"


AttrValue = Union[int, float, str, tuple, AttrVar, Expr, ListValue, Var]  # noqa: UP007


@dataclass(frozen=True)
class PNode:
    """An op applied to child patterns. ``attrs`` lists every attribute of the op in spec order
    (defaults filled in); values may be literals (canonical form), AttrVars or Exprs."""

    op: str
    attrs: tuple[tuple[str, AttrValue], ...]
    children: tuple[Pattern, ...]

    def __str__(self) -> str:
        return format_pattern(self)


Pattern = Union[Var, PNode]  # noqa: UP007


@dataclass(frozen=True)
class Condition:
    """A side condition ``(CMP a b)`` over attribute values and shape expressions."""

    cmp: str
    lhs: AttrValue
    rhs: AttrValue

    def __str__(self) -> str:
        return f"({self.cmp} {format_value(self.lhs)} {format_value(self.rhs)})"


def _is_literal(v: AttrValue) -> bool:
    return not isinstance(v, AttrVar | Expr | ListValue | Var)


# ---------------------------------------------------------------------------------------------
# Tokenizer and parser
# ---------------------------------------------------------------------------------------------

_TOKEN = re.compile(r"\s*(?:(\()|(\))|(\[)|(\])|(==|!=|<=|>=)|(=)|([^\s()\[\]=]+))")


@dataclass
class _Tok:
    kind: str  # ( ) [ ] = atom
    text: str
    pos: int


def _tokenize(text: str, source: str) -> list[_Tok]:
    toks: list[_Tok] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            if text[pos:].strip() == "":
                break
            raise PatternError(f"{source}: unexpected character {text[pos]!r} at column {pos + 1}")
        start = m.start(m.lastindex or 0)
        kind = ["(", ")", "[", "]", "atom", "=", "atom"][(m.lastindex or 1) - 1]
        toks.append(_Tok(kind, m.group(m.lastindex or 0), start))
        pos = m.end()
    return toks


class _Parser:
    def __init__(self, text: str, source: str) -> None:
        self.text = text
        self.source = source
        self.toks = _tokenize(text, source)
        self.i = 0

    def error(self, msg: str, tok: _Tok | None = None) -> PatternError:
        col = (tok.pos if tok else len(self.text)) + 1
        return PatternError(f"{self.source}: column {col}: {msg}")

    def peek(self, k: int = 0) -> _Tok | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def take(self, kind: str | None = None) -> _Tok:
        tok = self.peek()
        if tok is None:
            raise self.error("unexpected end of pattern")
        if kind is not None and tok.kind != kind:
            raise self.error(f"expected {kind!r}, found {tok.text!r}", tok)
        self.i += 1
        return tok

    def done(self) -> None:
        tok = self.peek()
        if tok is not None:
            raise self.error(f"unexpected {tok.text!r} after the end of the pattern", tok)

    # -- patterns ------------------------------------------------------------------------------
    def pattern(self) -> Pattern:
        tok = self.take()
        if tok.kind == "atom":
            if tok.text.startswith("?") and len(tok.text) > 1:
                return Var(tok.text[1:])
            raise self.error(f"expected a ?variable or '(', found {tok.text!r}", tok)
        if tok.kind != "(":
            raise self.error(f"expected a pattern, found {tok.text!r}", tok)
        op_tok = self.take("atom")
        op = op_tok.text
        attrs: dict[str, AttrValue] = {}
        attr_toks: dict[str, _Tok] = {}
        children: list[Pattern] = []
        while True:
            nxt = self.peek()
            if nxt is None:
                raise self.error(f"unclosed '(' of {op}", tok)
            if nxt.kind == ")":
                self.i += 1
                break
            after = self.peek(1)
            if nxt.kind == "atom" and after is not None and after.kind == "=":
                self.i += 2
                if nxt.text in attrs:
                    raise self.error(f"{op}: attribute {nxt.text!r} given twice", nxt)
                attrs[nxt.text] = self.value()
                attr_toks[nxt.text] = nxt
            else:
                children.append(self.pattern())
        return self.build(op, op_tok, attrs, attr_toks, children)

    def build(
        self,
        op: str,
        op_tok: _Tok,
        attrs: dict[str, AttrValue],
        attr_toks: dict[str, _Tok],
        children: list[Pattern],
    ) -> PNode:
        if op == PROJECTION:
            if set(attrs) != {"index"} or not isinstance(attrs["index"], int) or attrs["index"] < 0:
                raise self.error("get: needs exactly index=I with an integer I >= 0", op_tok)
            if len(children) != 1:
                raise self.error(f"get: takes 1 input, got {len(children)}", op_tok)
            return PNode(op, (("index", attrs["index"]),), tuple(children))
        try:
            spec = get_op(op)
        except TensorEqsatError:
            raise self.error(f"unknown op {op!r}", op_tok) from None
        if spec.is_leaf:
            raise self.error(f"{op} cannot appear in a pattern (use a ?variable)", op_tok)
        try:
            spec.check_arity(len(children))
        except TensorEqsatError as exc:
            raise self.error(str(exc), op_tok) from None
        out: list[tuple[str, AttrValue]] = []
        for a in spec.attrs:
            if a.name in attrs:
                out.append((a.name, self.check_attr(spec, a, attrs[a.name], attr_toks[a.name])))
            elif a.required:
                raise self.error(f"{op}: required attribute {a.name!r} missing", op_tok)
            else:
                out.append((a.name, a.default))
        unknown = set(attrs) - set(spec.attr_names)
        if unknown:
            name = sorted(unknown)[0]
            raise self.error(
                f"{op}: unknown attribute {name!r} (known: {', '.join(spec.attr_names) or 'none'})",
                attr_toks[name],
            )
        return PNode(op, tuple(out), tuple(children))

    def check_attr(self, spec: OpSpec, a: AttrSpec, value: AttrValue, tok: _Tok) -> AttrValue:
        if isinstance(value, AttrVar | Expr):
            return value
        if isinstance(value, ListValue):
            if a.kind not in ("ints", "dims"):
                raise self.error(f"{spec.name}.{a.name}: a list is not {a.kind}", tok)
            if all(_is_literal(v) for v in value.items):
                value = tuple(v for v in value.items)
            else:
                return value
        try:
            return a.convert(spec.name, value)
        except TensorEqsatError as exc:
            raise self.error(str(exc), tok) from None

    # -- attribute values --------------------------------------------------------------------
    def value(self) -> AttrValue:
        tok = self.take()
        if tok.kind == "[":
            items = []
            while (nxt := self.peek()) is not None and nxt.kind != "]":
                items.append(self.value())
            self.take("]")
            return ListValue(tuple(items))
        if tok.kind == "(":
            fn_tok = self.take("atom")
            if fn_tok.text not in EXPR_FNS:
                raise self.error(
                    f"unknown attribute function {fn_tok.text!r} (known: {', '.join(EXPR_FNS)})", fn_tok
                )
            args = []
            while (nxt := self.peek()) is not None and nxt.kind != ")":
                args.append(self.value())
            self.take(")")
            if len(args) != EXPR_FNS[fn_tok.text]:
                raise self.error(
                    f"{fn_tok.text} takes {EXPR_FNS[fn_tok.text]} arguments, got {len(args)}", fn_tok
                )
            if fn_tok.text in ("dim", "rank"):
                first = args[0]
                if not isinstance(first, AttrVar):
                    raise self.error(f"{fn_tok.text}: first argument must be a tensor ?variable", fn_tok)
                args[0] = Var(first.name)
            return Expr(fn_tok.text, tuple(args))
        if tok.kind != "atom":
            raise self.error(f"expected an attribute value, found {tok.text!r}", tok)
        text = tok.text
        if text.startswith("?") and len(text) > 1:
            return AttrVar(text[1:])
        if re.fullmatch(r"-?\d+", text):
            return int(text)
        if re.fullmatch(r"-?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?", text):
            return float(text)
        return text

    def condition(self) -> Condition:
        tok = self.take("(")
        cmp_tok = self.take("atom")
        if cmp_tok.text not in COMPARISONS:
            raise self.error(f"unknown comparison {cmp_tok.text!r} (known: {' '.join(COMPARISONS)})", cmp_tok)
        lhs = self._cond_value()
        rhs = self._cond_value()
        nxt = self.peek()
        if nxt is None or nxt.kind != ")":
            raise self.error("a condition compares exactly two values", tok)
        self.take(")")
        return Condition(cmp_tok.text, lhs, rhs)

    def _cond_value(self) -> AttrValue:
        v = self.value()
        return v


def parse_pattern(text: str, source: str = "<pattern>") -> Pattern:
    """Parse one pattern; raises PatternError naming the source and column.

    >>> str(parse_pattern("(matmul ?x (concat axis=1 ?w1 ?w2))"))
    '(matmul ?x (concat axis=1 ?w1 ?w2))'
    >>> parse_pattern("(conv2d ?x)")
    Traceback (most recent call last):
    ...
    tensor_eqsat.rewrite.pattern.PatternError: <pattern>: column 2: conv2d: takes 2 inputs, got 1
    """
    p = _Parser(text, source)
    pat = p.pattern()
    p.done()
    return pat


def parse_condition(text: str, source: str = "<condition>") -> Condition:
    """Parse one side condition such as ``(== (dim ?x 1) (dim ?y 1))``."""
    p = _Parser(text, source)
    cond = p.condition()
    p.done()
    return cond


# ---------------------------------------------------------------------------------------------
# Queries and evaluation
# ---------------------------------------------------------------------------------------------


def walk(p: Pattern) -> Iterator[Pattern]:
    """Every sub-pattern, parents before children."""
    yield p
    if isinstance(p, PNode):
        for c in p.children:
            yield from walk(c)


def _value_vars(v: AttrValue) -> Iterator[Var | AttrVar]:
    if isinstance(v, Var | AttrVar):
        yield v
    elif isinstance(v, Expr):
        for a in v.args:
            yield from _value_vars(a)
    elif isinstance(v, ListValue):
        for a in v.items:
            yield from _value_vars(a)


def tensor_vars(p: Pattern) -> list[str]:
    """Tensor variable names in order of first appearance (children only)."""
    seen: dict[str, None] = {}
    for q in walk(p):
        if isinstance(q, Var):
            seen.setdefault(q.name)
    return list(seen)


def attr_vars(p: Pattern) -> list[str]:
    """Attribute variable names bound or used by the pattern, in order of first appearance."""
    seen: dict[str, None] = {}
    for q in walk(p):
        if isinstance(q, PNode):
            for _, v in q.attrs:
                for var in _value_vars(v):
                    if isinstance(var, AttrVar):
                        seen.setdefault(var.name)
    return list(seen)


def value_vars(v: AttrValue) -> list[Var | AttrVar]:
    """Variables an attribute value or condition side refers to."""
    return list(_value_vars(v))


def eval_value(v: AttrValue, attrs: Mapping[str, Any], shape_of: Callable[[str], Shape]) -> Any:
    """Evaluate an attribute value given bound attribute variables and tensor shapes.

    Raises KeyError for an unbound variable, ValueError for an inexact division, IndexError for a
    dim out of range.

    >>> e = parse_condition("(== (div (dim ?x 1) 2) ?g)")
    >>> eval_value(e.lhs, {}, lambda name: (1, 64, 8, 8))
    32
    """
    return compile_value(v)(attrs, shape_of)


ValueFn = Callable[[Mapping[str, Any], Callable[[str], Shape]], Any]
"""A compiled attribute value: ``fn(attrs, shape_of)`` is :func:`eval_value` of it."""

_COMPILED: dict[int, tuple[AttrValue, ValueFn]] = {}
"""Compiled values by the id of the value object, which the entry keeps alive (so the id is
not reused). Not by equality: ``1`` and ``1.0``, or lists of them, are equal but evaluate to
values of different types."""


_COMPILED_LIMIT = 10_000


def compile_value(v: AttrValue) -> ValueFn:
    """:func:`eval_value` of ``v`` as a closure, built once per value object: rewriting
    evaluates the same few expressions (split sizes, rule conditions) for every match, and
    walking the expression tree each time was a tenth of a search's e-matching. The closure
    evaluates in the same order and raises the same errors."""
    if not isinstance(v, AttrVar | Expr | ListValue | Var):
        return lambda attrs, shape_of: v
    entry = _COMPILED.get(id(v))
    if entry is None or entry[0] is not v:
        if len(_COMPILED) >= _COMPILED_LIMIT:  # values made on the fly, not a rule's: start afresh
            _COMPILED.clear()
        entry = _COMPILED[id(v)] = (v, _compile(v))
    return entry[1]


def _compile(v: AttrValue) -> ValueFn:
    if isinstance(v, AttrVar):
        name = v.name
        return lambda attrs, shape_of: attrs[name]
    if isinstance(v, Var):
        message = f"tensor variable ?{v.name} used as a value"

        def tensor_var(attrs: Mapping[str, Any], shape_of: Callable[[str], Shape]) -> Any:
            raise ValueError(message)

        return tensor_var
    if isinstance(v, ListValue):
        items = tuple(compile_value(i) for i in v.items)
        if len(items) == 2:
            f0, f1 = items
            return lambda attrs, shape_of: (f0(attrs, shape_of), f1(attrs, shape_of))
        return lambda attrs, shape_of: tuple([f(attrs, shape_of) for f in items])
    if isinstance(v, Expr):
        return _compile_expr(v)
    return lambda attrs, shape_of: v


def _compile_expr(v: Expr) -> ValueFn:
    if v.fn == "dim":
        var, axis = v.args
        assert isinstance(var, Var)
        name = var.name
        if type(axis) is int:
            return lambda attrs, shape_of: shape_of(name)[axis]
        axis_fn = compile_value(axis)
        return lambda attrs, shape_of: shape_of(name)[int(axis_fn(attrs, shape_of))]
    if v.fn == "rank":
        var = v.args[0]
        assert isinstance(var, Var)
        name = var.name
        return lambda attrs, shape_of: len(shape_of(name))
    fa, fb = (compile_value(x) for x in v.args)
    if v.fn == "add":
        return lambda attrs, shape_of: fa(attrs, shape_of) + fb(attrs, shape_of)
    if v.fn == "sub":
        return lambda attrs, shape_of: fa(attrs, shape_of) - fb(attrs, shape_of)
    if v.fn == "mul":
        return lambda attrs, shape_of: fa(attrs, shape_of) * fb(attrs, shape_of)
    if v.fn == "div":

        def div(attrs: Mapping[str, Any], shape_of: Callable[[str], Shape]) -> Any:
            a = fa(attrs, shape_of)
            b = fb(attrs, shape_of)
            if b == 0 or a % b != 0:
                raise ValueError(f"{a} is not divisible by {b}")
            return a // b

        return div
    fn = v.fn

    def unknown(attrs: Mapping[str, Any], shape_of: Callable[[str], Shape]) -> Any:
        fa(attrs, shape_of)
        fb(attrs, shape_of)
        raise AssertionError(fn)

    return unknown


def check_condition(c: Condition, attrs: Mapping[str, Any], shape_of: Callable[[str], Shape]) -> bool:
    """Whether a condition holds; a condition that cannot be evaluated (inexact division,
    dim out of range) does not hold."""
    try:
        lhs = compile_value(c.lhs)(attrs, shape_of)
        return COMPARISONS[c.cmp](lhs, compile_value(c.rhs)(attrs, shape_of))
    except (ValueError, IndexError):
        return False


# ---------------------------------------------------------------------------------------------
# Printing
# ---------------------------------------------------------------------------------------------


def format_value(v: AttrValue) -> str:
    """The source text of an attribute value."""
    if isinstance(v, tuple):
        return "[" + " ".join(format_value(i) for i in v) + "]"
    if isinstance(v, AttrVar | Expr | ListValue | Var):
        return str(v)
    return repr(v) if isinstance(v, float) else str(v)


def format_pattern(p: Pattern) -> str:
    """The source text of a pattern; attributes equal to their default are omitted, so parsing
    the text gives the same pattern back."""
    if isinstance(p, Var):
        return str(p)
    parts = [p.op]
    if p.op == PROJECTION:
        parts.append(f"index={p.attrs[0][1]}")
    else:
        spec = get_op(p.op)
        for a, (name, v) in zip(spec.attrs, p.attrs, strict=True):
            if a.required or v != a.default:
                parts.append(f"{name}={format_value(v)}")
    parts.extend(format_pattern(c) for c in p.children)
    return "(" + " ".join(parts) + ")"
