"""Symbolic dimensions: a dim that is a polynomial in named sizes, each with a hint and a range.

Served inference changes shape (generation grows the sequence, batches vary; DESIGN decision
18), so a dimension of an IR shape is either an ``int`` or a :class:`SymDim`: an integer
polynomial (a sympy expression, kept expanded so that equal polynomials compare equal) over
:class:`Symbol` s. A symbol has a name, a *hint* (the size seen when the graph was traced: Dynamo's
``size_hint``, an ONNX export's example) and a range ``lo <= s <= hi`` (``hi`` None: unbounded).
Every symbol is at least 1: a zero-sized dim is not a shape the IR models.

Semantics, chosen so that a shape rule written for ints is sound for every value in the range:

* ``==`` is structural equality of the expanded polynomials (``s0 * 2 == s0 + s0``) over the same
  symbols (name, hint and range: caches keyed by shapes must not serve one range for another); a
  SymDim is never equal to an int. It never raises, so shapes stay usable as dict keys. Code that must know
  whether a symbolic dim *can* be 1 (broadcasting) asks :func:`is_one` / :func:`broadcast_dim`.
* ``<``, ``<=``, ``>``, ``>=`` and ``bool()`` are decided over the whole range (interval bounds
  of the polynomial's monomials). Where the answer is not the same for every value in the range
  they raise :class:`UndecidedDim`, a :class:`~tensor_eqsat.errors.ShapeError`: a rewrite whose
  side condition cannot be decided for the whole range does not fire (the analysis rejects the
  node, a rule condition reads it as false), and a graph that needs the answer says so.
* ``//`` and ``%`` are exact or undecided: ``(768 * s0) // 12`` is ``64 * s0``, ``s0 // 2``
  raises. ``int()`` and ``__index__`` raise: numpy, the interpreter and the cost models only see
  concrete shapes, made with :func:`concrete` at a point (the hints by default).

sympy (which torch ships) is the algebra; it is imported when the first symbolic dim is made, so a
static graph never loads it and the core stays importable without torch.

Alternatives rejected: an int subclass carrying the hint (every shape rule would silently
specialise to the hint); torch's ``SymInt`` (needs torch in the core, and its guards belong to
Dynamo's ShapeEnv, not to a graph); writing a polynomial type (sympy is well kept and already
installed with torch).

>>> b = SymDim.symbol("b", hint=8, lo=1, hi=64)
>>> s = SymDim.symbol("s", hint=128, lo=2)
>>> b * s * 768 // 12
64*b*s
>>> (b * s).hint, concrete((b, s, 768), {"s": 3})
(1024, (8, 3, 768))
>>> b * s > 1, b + 1 == 1 + b
(True, True)
>>> b > 1
Traceback (most recent call last):
...
tensor_eqsat.ir.symbolic.UndecidedDim: dim: b > 1 is not decided for b in [1, 64]
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from tensor_eqsat.errors import GraphError, ShapeError

__all__ = [
    "Point",
    "ShapePoints",
    "SymDim",
    "Symbol",
    "UndecidedDim",
    "broadcast_dim",
    "concrete",
    "dim_from_json",
    "dim_to_json",
    "divides",
    "hint_point",
    "is_one",
    "is_symbolic",
    "symbols_of",
]

Point = Mapping[str, int]
"""A concrete value for each symbol by name (symbols missing from it take their hints)."""


class UndecidedDim(ShapeError, ValueError):
    """A question about a symbolic dim has different answers in its range (or cannot be
    answered at all, as a concrete size of a symbolic dim)."""

    def __init__(self, message: str) -> None:
        ShapeError.__init__(self, "dim", message)


@dataclass(frozen=True, order=True)
class Symbol:
    """A named size: its hint (the size seen) and its range ``lo <= value <= hi``.

    name: an identifier (``s0``, ``batch``).
    hint: the representative value; within the range.
    lo: the smallest value, >= 1. Default 1.
    hi: the largest value; None (the default) for no bound.
    """

    name: str
    hint: int
    lo: int = 1
    hi: int | None = None

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.name):
            raise GraphError(f"symbol name {self.name!r} is not an identifier")
        if self.lo < 1:
            raise GraphError(f"symbol {self.name}: lower bound {self.lo} < 1 (sizes are at least 1)")
        if self.hi is not None and self.hi < self.lo:
            raise GraphError(f"symbol {self.name}: empty range [{self.lo}, {self.hi}]")
        if not self.contains(self.hint):
            raise GraphError(f"symbol {self.name}: hint {self.hint} outside [{self.lo}, {self.range_text()}]")

    def contains(self, value: int) -> bool:
        """Whether ``value`` is in the range."""
        return self.lo <= value and (self.hi is None or value <= self.hi)

    def range_text(self) -> str:
        return "inf" if self.hi is None else str(self.hi)

    def to_json(self) -> dict[str, Any]:
        """``{"hint": H, "min": LO, "max": HI or null}``."""
        return {"hint": self.hint, "min": self.lo, "max": self.hi}

    @classmethod
    def from_json(cls, name: str, data: Mapping[str, Any]) -> Symbol:
        """Inverse of :meth:`to_json`; raises GraphError on a malformed entry."""
        try:
            hi = data.get("max")
            return cls(str(name), int(data["hint"]), int(data.get("min", 1)), None if hi is None else int(hi))
        except (KeyError, TypeError, ValueError) as exc:
            raise GraphError(f"symbol {name!r}: malformed entry {dict(data)!r} ({exc})") from None


def _sympy() -> Any:
    import sympy

    return sympy


_SYMPY_SYMBOLS: dict[str, Any] = {}


def _sym(name: str) -> Any:
    out = _SYMPY_SYMBOLS.get(name)
    if out is None:
        out = _SYMPY_SYMBOLS[name] = _sympy().Symbol(name, integer=True, positive=True)
    return out


_AT_POINT = "ir.symbolic.concrete"

Dim = Any
"""An int or a SymDim (shapes are typed ``tuple[int, ...]``: a SymDim does int arithmetic)."""


class SymDim:
    """A symbolic dimension (see the module docstring). Build one with :meth:`symbol`; arithmetic
    with ints and other SymDims gives SymDims, or an int when the result is constant."""

    __slots__ = ("_hash", "expr", "symbols")

    def __init__(self, expr: Any, symbols: Iterable[Symbol]) -> None:
        self.expr = expr
        free = {s.name for s in expr.free_symbols}
        by_name: dict[str, Symbol] = {}
        for s in symbols:
            if s.name in free:
                old = by_name.setdefault(s.name, s)
                if old != s:
                    raise GraphError(f"symbol {s.name} has two definitions: {old} and {s}")
        missing = free - set(by_name)
        if missing:
            raise GraphError(f"symbolic dim {expr}: no definition of {', '.join(sorted(missing))}")
        self.symbols: tuple[Symbol, ...] = tuple(sorted(by_name.values()))
        self._hash = hash((expr, self.symbols))

    @classmethod
    def symbol(cls, name: str, hint: int, lo: int = 1, hi: int | None = None) -> SymDim:
        """The dim that is the symbol ``name`` itself (see :class:`Symbol` for the arguments)."""
        info = Symbol(name, int(hint), int(lo), None if hi is None else int(hi))
        return cls(_sym(name), (info,))

    @classmethod
    def from_sympy(cls, expr: Any, symbols: Iterable[Symbol]) -> Any:
        """The dim of a sympy expression over symbols of the names in ``symbols`` (another
        library's symbols, torch's ShapeEnv's, are replaced by the names): an int if constant."""
        sp = _sympy()
        expr = sp.sympify(expr)
        return _make(expr.xreplace({s: _sym(str(s)) for s in expr.free_symbols}), symbols)

    @classmethod
    def of(cls, info: Symbol) -> SymDim:
        """The dim that is the symbol ``info``."""
        return cls(_sym(info.name), (info,))

    # -- values ---------------------------------------------------------------------------------
    @property
    def hint(self) -> int:
        """The value at every symbol's hint."""
        return self.at({})

    def at(self, point: Point) -> int:
        """The value with the symbols of ``point`` set (the others at their hints).

        Raises GraphError when a value is outside its symbol's range.
        """
        subs = {}
        for s in self.symbols:
            v = int(point.get(s.name, s.hint))
            if not s.contains(v):
                raise GraphError(f"symbol {s.name} = {v} is outside its range [{s.lo}, {s.range_text()}]")
            subs[_sym(s.name)] = _sympy().Integer(v)
        out = self.expr.xreplace(subs)
        if not out.is_Integer:
            raise UndecidedDim(f"{self.expr} is not an integer at {point}")
        return int(out)

    def bounds(self) -> tuple[float, float]:
        """The smallest and largest value over the range (``math.inf`` for unbounded; sound,
        perhaps loose, for polynomials with terms of mixed signs); ``(-inf, inf)`` when the
        expression is not a polynomial."""
        info = {s.name: s for s in self.symbols}
        lo: float = 0
        hi: float = 0
        for mono, coef in self.expr.as_coefficients_dict().items():
            if not coef.is_Integer:
                return (-math.inf, math.inf)
            mlo: float = 1
            mhi: float = 1
            if not mono.is_Number:
                for base, k in mono.as_powers_dict().items():
                    if not base.is_Symbol or not k.is_Integer or k < 0:
                        return (-math.inf, math.inf)
                    s = info[base.name]
                    mlo *= s.lo ** int(k)
                    mhi = math.inf if s.hi is None else mhi * s.hi ** int(k)
            c = int(coef)
            lo, hi = (lo + c * mlo, hi + c * mhi) if c >= 0 else (lo + c * mhi, hi + c * mlo)
        return (lo, hi)

    def range_text(self) -> str:
        return ", ".join(f"{s.name} in [{s.lo}, {s.range_text()}]" for s in self.symbols)

    # -- comparisons ----------------------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if isinstance(other, SymDim):
            same = self._hash == other._hash and self.symbols == other.symbols
            return bool(same and self.expr == other.expr)
        return False

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return self._hash

    def _decide(self, other: Any, op: str) -> bool:
        diff = self - other  # self - other op 0
        if not isinstance(diff, SymDim):
            return {"<": diff < 0, "<=": diff <= 0, ">": diff > 0, ">=": diff >= 0}[op]
        lo, hi = diff.bounds()
        always, never = {
            "<": (hi < 0, lo >= 0),
            "<=": (hi <= 0, lo > 0),
            ">": (lo > 0, hi <= 0),
            ">=": (lo >= 0, hi < 0),
        }[op]
        if always:
            return True
        if never:
            return False
        raise UndecidedDim(f"{self} {op} {other} is not decided for {_range_of(self, other)}")

    def __lt__(self, other: Any) -> bool:
        return self._decide(other, "<")

    def __le__(self, other: Any) -> bool:
        return self._decide(other, "<=")

    def __gt__(self, other: Any) -> bool:
        return self._decide(other, ">")

    def __ge__(self, other: Any) -> bool:
        return self._decide(other, ">=")

    def __bool__(self) -> bool:
        lo, hi = self.bounds()
        if lo > 0 or hi < 0:
            return True
        if lo == hi == 0:
            return False
        raise UndecidedDim(f"whether {self} is non-zero is not decided for {self.range_text()}")

    # -- arithmetic -----------------------------------------------------------------------------
    def __add__(self, other: Any) -> Any:
        return _combine(self, other, lambda a, b: a + b)

    def __radd__(self, other: Any) -> Any:
        return _combine(other, self, lambda a, b: a + b)

    def __sub__(self, other: Any) -> Any:
        return _combine(self, other, lambda a, b: a - b)

    def __rsub__(self, other: Any) -> Any:
        return _combine(other, self, lambda a, b: a - b)

    def __mul__(self, other: Any) -> Any:
        return _combine(self, other, lambda a, b: a * b)

    def __rmul__(self, other: Any) -> Any:
        return _combine(other, self, lambda a, b: a * b)

    def __neg__(self) -> Any:
        return _make(-self.expr, self.symbols)

    def __floordiv__(self, other: Any) -> Any:
        return _exact_div(self, other)

    def __rfloordiv__(self, other: Any) -> Any:
        return _exact_div(other, self)

    def __mod__(self, other: Any) -> Any:
        _exact_div(self, other)
        return 0

    def __rmod__(self, other: Any) -> Any:
        _exact_div(other, self)
        return 0

    # -- no concrete value ----------------------------------------------------------------------
    def __int__(self) -> int:
        raise UndecidedDim(f"symbolic dim {self} has no single value; take it at a point ({_AT_POINT})")

    __index__ = __int__

    def __float__(self) -> float:
        raise UndecidedDim(f"symbolic dim {self} has no single value; take it at a point ({_AT_POINT})")

    def __repr__(self) -> str:
        return str(self.expr)

    __str__ = __repr__

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (str(self.expr), self.symbols))


def _rebuild(text: str, symbols: tuple[Symbol, ...]) -> Any:
    return _parse(text, {s.name: s for s in symbols})


def _lift(v: Any) -> tuple[Any, tuple[Symbol, ...]]:
    if isinstance(v, SymDim):
        return v.expr, v.symbols
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise TypeError(f"cannot combine a symbolic dim with {type(v).__name__} {v!r}")
    return _sympy().Integer(int(v)), ()


def _make(expr: Any, symbols: Iterable[Symbol]) -> Any:
    expr = _sympy().expand(expr)
    if expr.is_Integer:
        return int(expr)
    return SymDim(expr, symbols)


def _combine(a: Any, b: Any, fn: Any) -> Any:
    try:
        (ea, sa), (eb, sb) = _lift(a), _lift(b)
    except TypeError:
        return NotImplemented
    return _make(fn(ea, eb), sa + sb)


def _exact_div(a: Any, b: Any) -> Any:
    """``a // b`` where ``b`` divides ``a`` for every value in the range (the quotient is an
    integer polynomial); UndecidedDim otherwise."""
    sp = _sympy()
    (ea, sa), (eb, sb) = _lift(a), _lift(b)
    if eb == 0:
        raise ZeroDivisionError("symbolic dim divided by zero")
    q = sp.cancel(ea / eb)
    syms = sorted(q.free_symbols, key=lambda s: s.name)
    ok = q.is_Integer
    if not ok and q.is_polynomial(*syms):
        ok = all(c.is_Integer for c in sp.Poly(q, *syms).coeffs())
    if not ok:
        raise UndecidedDim(f"{a} is not divisible by {b} for every value of {_range_of(a, b)}")
    return _make(q, sa + sb)


def _range_of(*dims: Any) -> str:
    seen: dict[str, Symbol] = {}
    for d in dims:
        if isinstance(d, SymDim):
            seen.update({s.name: s for s in d.symbols})
    return ", ".join(f"{s.name} in [{s.lo}, {s.range_text()}]" for s in sorted(seen.values()))


# -- helpers for shape rules and callers ----------------------------------------------------------


def is_symbolic(dim: Any) -> TypeGuard[SymDim]:
    """Whether ``dim`` is a SymDim."""
    return isinstance(dim, SymDim)


def is_one(dim: Any) -> bool:
    """Whether ``dim`` is 1 for every value of its range; UndecidedDim when it is 1 for some
    values and not for others (a symbol whose range starts at 1, seen by broadcasting).

    >>> is_one(1), is_one(SymDim.symbol("s", 4, lo=2))
    (True, False)
    """
    if not isinstance(dim, SymDim):
        return bool(dim == 1)
    lo, hi = dim.bounds()
    if lo > 1 or hi < 1:
        return False
    raise UndecidedDim(f"whether {dim} is 1 is not decided for {dim.range_text()} (broadcasting)")


def divides(d: Any, n: Any) -> bool:
    """Whether ``d`` divides ``n`` for every value in the range (ints: ``n % d == 0``).

    >>> s = SymDim.symbol("s", 4)
    >>> divides(12, 768 * s), divides(2, s), divides(s, 3 * s)
    (True, False, True)
    """
    if not isinstance(d, SymDim) and not isinstance(n, SymDim):
        return bool(int(n) % int(d) == 0)
    try:
        _exact_div(n, d)
    except UndecidedDim:
        return False
    return True


def broadcast_dim(a: Any, b: Any) -> Any:
    """NumPy broadcasting of two dims: equal dims, or one of them 1. Raises ValueError (or
    UndecidedDim, a ValueError) otherwise, as ``numpy.broadcast_shapes`` does.

    >>> s, b = SymDim.symbol("s", 4, lo=2), SymDim.symbol("b", 1)
    >>> broadcast_dim(s, 1), broadcast_dim(1, s), broadcast_dim(s, s), broadcast_dim(1, b)
    (s, s, s, b)
    """
    if a == b:
        return a
    # A literal 1 broadcasts against anything, whatever the other's range (a batch in [1, inf)).
    if not isinstance(b, SymDim) and b == 1:
        return a
    if is_one(a):
        return b
    if is_one(b):
        return a
    raise ValueError(f"dims {a} and {b} are not broadcastable")


def broadcast_shapes(*shapes: Sequence[Any]) -> tuple[Any, ...]:
    """``numpy.broadcast_shapes`` for shapes that may hold symbolic dims (ValueError when not
    broadcastable).

    >>> s = SymDim.symbol("s", 4, lo=2)
    >>> broadcast_shapes((s, 1, 3), (5, 1))
    (s, 5, 3)
    """
    if not any(isinstance(d, SymDim) for sh in shapes for d in sh):
        import numpy as np

        return tuple(int(d) for d in np.broadcast_shapes(*(tuple(s) for s in shapes)))
    rank = max((len(s) for s in shapes), default=0)
    out: list[Any] = [1] * rank
    for s in shapes:
        for i, d in enumerate(s):
            j = rank - len(s) + i
            out[j] = broadcast_dim(out[j], d)
    return tuple(out)


def concrete(shape: Sequence[Any], point: Point | None = None) -> tuple[int, ...]:
    """``shape`` with every symbolic dim taken at ``point`` (default: the hints).

    >>> s = SymDim.symbol("s", 4)
    >>> concrete((2 * s, 3)), concrete((2 * s, 3), {"s": 5})
    ((8, 3), (10, 3))
    """
    pt = point or {}
    return tuple(d.at(pt) if isinstance(d, SymDim) else int(d) for d in shape)


def concrete_value(value: Any, point: Point | None = None) -> Any:
    """An attribute value with its symbolic dims taken at ``point``: SymDims, and tuples of
    dims, become ints; anything else is returned as it is."""
    if isinstance(value, SymDim):
        return value.at(point or {})
    if isinstance(value, tuple) and any(isinstance(v, SymDim) for v in value):
        return concrete(value, point)
    return value


def symbols_of(values: Iterable[Any]) -> dict[str, Symbol]:
    """The symbols of the dims in ``values`` (dims, or shapes: tuples of dims), by name."""
    out: dict[str, Symbol] = {}
    for v in values:
        items = v if isinstance(v, tuple) else (v,)
        for d in items:
            if isinstance(d, SymDim):
                for s in d.symbols:
                    old = out.setdefault(s.name, s)
                    if old != s:
                        raise GraphError(f"symbol {s.name} has two definitions: {old} and {s}")
    return out


def hint_point(symbols: Iterable[Symbol]) -> dict[str, int]:
    """Every symbol at its hint."""
    return {s.name: s.hint for s in symbols}


@dataclass(frozen=True)
class ShapePoints:
    """Representative shapes with weights (TensorRT's optimization profiles, min/opt/max, with a
    weight each): where a symbolic graph is priced and measured.

    points: ``(weight, point)`` pairs; weights > 0, normalised by their sum where used.

    >>> ShapePoints.parse("s0=1:1,s0=8:2").points
    ((1.0, {'s0': 1}), (2.0, {'s0': 8}))
    """

    points: tuple[tuple[float, dict[str, int]], ...]

    def __post_init__(self) -> None:
        if not self.points:
            raise GraphError("shape points: give at least one point")
        for w, _ in self.points:
            if not w > 0:
                raise GraphError(f"shape points: weight {w} must be > 0")

    def __hash__(self) -> int:
        return hash(tuple((w, tuple(sorted(p.items()))) for w, p in self.points))

    @classmethod
    def parse(cls, text: str) -> ShapePoints:
        """``"s0=1;s1=16:1,s0=8;s1=128:3"``: points separated by commas, each ``NAME=VALUE``
        pairs separated by semicolons, an optional ``:WEIGHT`` (default 1)."""
        out = []
        for item in text.split(","):
            body, _, weight = item.strip().partition(":")
            point = {}
            for pair in body.split(";"):
                name, eq, value = pair.strip().partition("=")
                if not eq or not name.strip():
                    raise GraphError(f"shape point {item!r}: expected NAME=VALUE pairs separated by ';'")
                try:
                    point[name.strip()] = int(value)
                except ValueError:
                    raise GraphError(f"shape point {item!r}: {value!r} is not an integer") from None
            try:
                w = float(weight) if weight else 1.0
            except ValueError:
                raise GraphError(f"shape point {item!r}: weight {weight!r} is not a number") from None
            out.append((w, point))
        return cls(tuple(out))


# -- JSON -------------------------------------------------------------------------------------------

_EXPR_TEXT = re.compile(r"[A-Za-z0-9_+\-*() ]+")


def dim_to_json(dim: Any) -> int | str:
    """An int as itself, a SymDim as its polynomial's text (``"2*s0 + 1"``)."""
    return str(dim.expr) if isinstance(dim, SymDim) else int(dim)


def dim_from_json(value: Any, symbols: Mapping[str, Symbol]) -> Any:
    """Inverse of :func:`dim_to_json`, the symbols defined by ``symbols``; GraphError on text that
    is not a polynomial over them."""
    if isinstance(value, str):
        return _parse(value, symbols)
    if isinstance(value, bool) or not isinstance(value, int):
        raise GraphError(f"dim {value!r} is neither an int nor a symbolic dim's text")
    return value


def _parse(text: str, symbols: Mapping[str, Symbol]) -> Any:
    if not _EXPR_TEXT.fullmatch(text):
        raise GraphError(f"symbolic dim {text!r}: only integers, symbol names, + - * and () are allowed")
    names = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
    unknown = names - set(symbols)
    if unknown:
        raise GraphError(f"symbolic dim {text!r}: undefined symbol {', '.join(sorted(unknown))}")
    sp = _sympy()
    try:
        local = {n: _sym(n) for n in names}
        expr = sp.parse_expr(text, local_dict=local, global_dict={"Integer": sp.Integer})
    except Exception as exc:  # sympy's parser raises SyntaxError, TokenError, TypeError...
        raise GraphError(f"symbolic dim {text!r} does not parse ({exc})") from None
    return _make(expr, (symbols[n] for n in names))
