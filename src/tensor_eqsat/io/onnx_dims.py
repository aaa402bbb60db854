"""Symbolic dims of ONNX models: ``dim_param`` s as IR symbols, shape arithmetic folded, and back.

Import. A ``dim_param`` of a graph input (``batch``, ``sequence``) becomes a
:class:`~tensor_eqsat.ir.symbolic.Symbol` of that name (made an identifier: other characters
become ``_``) with the range ``[1, inf)`` and a *hint*, the representative size the model is
priced, checked and measured at: the one given (``--shapes``), else :func:`default_hint` (1 for a
batch-like name, 128 for any other). A dim with neither value nor name is refused.

Shape values. ``Shape`` and ``Size`` of a tensor with symbolic dims are *shape values*: small
integer arrays whose elements are ints or SymDims (numpy object arrays). The operators exporters
build shape chains from (``Shape -> Gather -> Unsqueeze -> Concat -> Reshape``, the ``Equal`` /
``Where`` of a ``-1`` target, ``Cast``, arithmetic) fold on them (:func:`fold`), so a Reshape or
Expand whose target comes from such a chain imports with a symbolic target and the chain
vanishes. A comparison is decided over the symbols' ranges; what cannot be folded (an op not
listed, a comparison that depends on the value, a division that is not exact) raises
:class:`NotFoldable`, and the importer keeps the node as an opaque op, its shape inputs computed
at run time by opaque copies of the chain's nodes.

Export. Input and output dims are written as ``dim_param`` s (a polynomial as its text); a
symbolic reshape or expand target becomes a tensor computed from the graph inputs:
``Shape(x)[k]`` for each symbol (``x`` an input with that symbol as dim ``k``), ``Mul`` and
``Add`` for the polynomial, ``Concat`` with the constant dims (:class:`DimTensors`). The symbols
(hint, range) are kept in the model's ``metadata_props`` under :data:`METADATA_KEY`, so a model
this tool wrote is measured and checked at the same representative shape when read again.

Alternatives rejected: onnxruntime's symbolic shape inference tool for the targets (it needs
``auto_merge`` for real exports, which merges symbols it cannot prove equal, and names dims it
cannot infer with fresh strings); fixing the batch with ``--input-shape`` (the written model then
runs at that shape only).
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from tensor_eqsat.errors import FormatError, GraphError
from tensor_eqsat.ir.symbolic import Symbol, SymDim, UndecidedDim, is_symbolic

METADATA_KEY = "tensor_eqsat.symbols"
"""The ``metadata_props`` key of the symbols (JSON: name -> hint, min, max) of a written model."""

BATCH_HINT = 1
OTHER_HINT = 128
_BATCH_NAMES = re.compile(r"(?i)(batch|^n$|^b$|^bs$|^bsz$)")


def symbol_name(dim_param: str) -> str:
    """The IR symbol name of an ONNX ``dim_param`` (an identifier).

    >>> symbol_name("batch_size"), symbol_name("seq len"), symbol_name("0dim")
    ('batch_size', 'seq_len', '_0dim')
    """
    name = re.sub(r"[^A-Za-z0-9_]", "_", dim_param.strip()) or "_"
    return f"_{name}" if name[0].isdigit() else name


def default_hint(name: str) -> int:
    """The representative size of a symbol no hint was given for: :data:`BATCH_HINT` (1) for a
    batch-like name (``batch``, ``batch_size``, ``N``, ``bs``), else :data:`OTHER_HINT` (128, a
    sequence length or image side).

    >>> default_hint("batch_size"), default_hint("sequence")
    (1, 128)
    """
    return BATCH_HINT if _BATCH_NAMES.search(name) else OTHER_HINT


class SymbolTable:
    """The symbols of one ONNX model, by ``dim_param``: made on first sight with the given hint
    (``hints``, by symbol name) or the default."""

    def __init__(self, hints: Mapping[str, int] | None = None) -> None:
        self.hints = dict(hints or {})
        self.symbols: dict[str, Symbol] = {}

    def symbol(self, dim_param: str) -> SymDim:
        name = symbol_name(dim_param)
        if name not in self.symbols:
            hint = int(self.hints.get(name, default_hint(name)))
            if hint < 1:
                raise FormatError(f"symbol {name}: hint {hint} < 1 (sizes are at least 1)")
            self.symbols[name] = Symbol(name, hint)
        return SymDim.of(self.symbols[name])

    def known(self, dim_param: str) -> SymDim | None:
        """The symbol of a ``dim_param`` already seen (on an input), else None."""
        name = symbol_name(dim_param)
        return SymDim.of(self.symbols[name]) if name in self.symbols else None

    def check_hints(self, source: str) -> None:
        """FormatError when a hint names no symbol of the model."""
        unknown = sorted(set(self.hints) - set(self.symbols))
        if unknown:
            known = ", ".join(sorted(self.symbols)) or "none"
            raise FormatError(f"{source}: --shapes names unknown symbols {unknown} (the model's: {known})")


_OTHER_SIZES: tuple[Callable[[int], int], ...] = (
    lambda h: 2 * h,
    lambda h: h // 2 + 1,
    lambda h: h + 3,
    lambda h: h + 1,
    lambda h: 3 * h,
)


def other_points(symbols: Mapping[str, Symbol], count: int = 3) -> tuple[dict[str, int], ...]:
    """``count`` points other than the hints to check a symbolic model at, each symbol within its
    range: twice the hint, half plus one, the hint plus three (the symbols rotate through these,
    so that they do not all grow together), then the hint plus one and three times it, skipping
    points already taken.

    >>> other_points({"batch": Symbol("batch", 1), "seq": Symbol("seq", 128)})
    ({'batch': 2, 'seq': 65}, {'batch': 1, 'seq': 131}, {'batch': 4, 'seq': 129})
    """
    names = sorted(symbols)
    seen = [tuple(symbols[n].hint for n in names)]
    out: list[dict[str, int]] = []
    for k in range(4 * len(_OTHER_SIZES)):
        if len(out) == count:
            break
        point = {}
        for i, n in enumerate(names):
            s = symbols[n]
            v = max(s.lo, _OTHER_SIZES[(k + i) % len(_OTHER_SIZES)](s.hint) + k // len(_OTHER_SIZES))
            point[n] = v if s.hi is None else min(v, s.hi)
        key = tuple(point[n] for n in names)
        if key not in seen:
            seen.append(key)
            out.append(point)
    return tuple(out)


# -- metadata --------------------------------------------------------------------------------------


def symbols_json(symbols: Mapping[str, Symbol]) -> str:
    return json.dumps({name: s.to_json() for name, s in sorted(symbols.items())}, sort_keys=True)


def model_symbols(model: Any) -> dict[str, Symbol]:
    """The symbols recorded in a model's ``metadata_props`` (empty when there are none)."""
    for prop in getattr(model, "metadata_props", ()):
        if prop.key == METADATA_KEY:
            try:
                data = json.loads(prop.value)
            except ValueError as exc:
                raise FormatError(f"model metadata {METADATA_KEY}: not JSON ({exc})") from None
            return {str(k): Symbol.from_json(k, v) for k, v in data.items()}
    return {}


def set_model_symbols(model: Any, symbols: Mapping[str, Symbol]) -> None:
    """Record ``symbols`` in ``model``'s ``metadata_props`` (replacing an earlier record)."""
    keep = [p for p in model.metadata_props if p.key != METADATA_KEY]
    del model.metadata_props[:]
    model.metadata_props.extend(keep)
    if symbols:
        prop = model.metadata_props.add()
        prop.key, prop.value = METADATA_KEY, symbols_json(symbols)


def dim_value(d: Any, point: Mapping[str, int]) -> int | None:
    """An ONNX dim proto's size at ``point`` (by symbol name); None when it has no value there."""
    if d.HasField("dim_value"):
        return int(d.dim_value)
    if d.HasField("dim_param"):
        v = point.get(symbol_name(d.dim_param))
        return None if v is None else int(v)
    return None


def onnx_dims(shape: Sequence[Any]) -> list[int | str]:
    """A shape as ``make_tensor_value_info`` takes it: ints, and each symbolic dim as its text (a
    ``dim_param``)."""
    return [str(d) if is_symbolic(d) else int(d) for d in shape]


# -- shape values --------------------------------------------------------------------------------


class NotFoldable(Exception):
    """A node on shape values that :func:`fold` cannot compute (reason given)."""


def as_values(arr: np.ndarray) -> np.ndarray:
    """An integer or bool constant as a shape value (an object array of Python ints)."""
    a = np.asarray(arr)
    if a.dtype.kind not in "iub":
        raise NotFoldable(f"a constant of type {a.dtype} is not a shape value")
    return np.array(a.tolist(), dtype=object).reshape(a.shape) if a.ndim else np.array(a.item(), dtype=object)


def has_symbols(arr: np.ndarray) -> bool:
    return any(is_symbolic(x) for x in np.asarray(arr, dtype=object).reshape(-1))


def _ints(v: np.ndarray | None, what: str) -> list[int]:
    if v is None:
        raise NotFoldable(f"{what} is missing")
    flat = list(np.asarray(v, dtype=object).reshape(-1))
    if any(is_symbolic(x) for x in flat):
        raise NotFoldable(f"{what} is symbolic")
    return [int(x) for x in flat]


def _decided(a: Any, b: Any, op: Callable[[Any, Any], bool]) -> bool:
    if not is_symbolic(a) and not is_symbolic(b):
        return bool(op(int(a), int(b)))
    if op is operator.eq:
        if a == b:
            return True
        diff = a - b
        lo, hi = diff.bounds() if is_symbolic(diff) else (diff, diff)
        if lo > 0 or hi < 0:
            return False
        raise UndecidedDim(f"whether {a} == {b} is not decided")
    return bool(op(a, b))  # SymDim's comparisons decide over the range or raise


def _trunc_div(a: Any, b: Any) -> Any:
    if is_symbolic(a) or is_symbolic(b):
        return a // b  # exact or UndecidedDim
    a, b = int(a), int(b)
    if b == 0:
        raise NotFoldable("integer division by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _elementwise(fn: Callable[[Any, Any], Any]) -> Callable[..., list[np.ndarray]]:
    vec = np.frompyfunc(fn, 2, 1)

    def run(ins: list[np.ndarray | None], a: Mapping[str, Any]) -> list[np.ndarray]:
        x, y = ins[0], ins[1]
        if x is None or y is None:
            raise NotFoldable("an operand is missing")
        return [np.asarray(vec(x, y), dtype=object)]

    return run


def _axes(ins: list[np.ndarray | None], a: Mapping[str, Any]) -> list[int] | None:
    if len(ins) > 1 and ins[1] is not None:
        return _ints(ins[1], "axes")
    return [int(x) for x in a["axes"]] if "axes" in a else None


def _gather(ins: list[np.ndarray | None], a: Mapping[str, Any]) -> list[np.ndarray]:
    data, idx = ins[0], ins[1]
    if data is None or idx is None:
        raise NotFoldable("an operand is missing")
    index = np.array(_ints(idx, "Gather's indices"), dtype=np.int64).reshape(np.shape(idx))
    return [np.take(data, index, axis=int(a.get("axis", 0)))]


def _unsqueeze(ins: list[np.ndarray | None], a: Mapping[str, Any]) -> list[np.ndarray]:
    x = ins[0]
    axes = _axes(ins, a)
    if x is None or axes is None:
        raise NotFoldable("Unsqueeze without axes")
    rank = x.ndim + len(axes)
    out = x
    for ax in sorted(ax + rank if ax < 0 else ax for ax in axes):
        out = np.expand_dims(out, ax)
    return [out]


def _squeeze(ins: list[np.ndarray | None], a: Mapping[str, Any]) -> list[np.ndarray]:
    x = ins[0]
    assert x is not None
    axes = _axes(ins, a)
    return [np.squeeze(x) if axes is None else np.squeeze(x, axis=tuple(axes))]


def _concat(ins: list[np.ndarray | None], a: Mapping[str, Any]) -> list[np.ndarray]:
    parts = [x for x in ins if x is not None]
    return [np.concatenate(parts, axis=int(a["axis"]))]


def _slice(ins: list[np.ndarray | None], a: Mapping[str, Any]) -> list[np.ndarray]:
    x = ins[0]
    assert x is not None
    starts, ends = _ints(ins[1], "Slice's starts"), _ints(ins[2], "Slice's ends")
    axes = _ints(ins[3], "Slice's axes") if len(ins) > 3 and ins[3] is not None else list(range(len(starts)))
    steps = _ints(ins[4], "Slice's steps") if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
    index: list[slice] = [slice(None)] * x.ndim
    for ax, s, e, st in zip(axes, starts, ends, steps, strict=True):
        index[ax] = slice(s, e, st)
    return [x[tuple(index)]]


def _reshape(ins: list[np.ndarray | None], a: Mapping[str, Any]) -> list[np.ndarray]:
    x = ins[0]
    assert x is not None
    target = _ints(ins[1], "Reshape's shape")
    dims = [x.shape[k] if d == 0 else d for k, d in enumerate(target)]
    return [x.reshape(dims)]


def _expand(ins: list[np.ndarray | None], a: Mapping[str, Any]) -> list[np.ndarray]:
    x = ins[0]
    assert x is not None
    shape = np.broadcast_shapes(x.shape, tuple(_ints(ins[1], "Expand's shape")))
    return [np.broadcast_to(x, shape).copy()]


def _where(ins: list[np.ndarray | None], a: Mapping[str, Any]) -> list[np.ndarray]:
    c, x, y = ins
    if c is None or x is None or y is None or has_symbols(c):
        raise NotFoldable("Where with a symbolic condition")
    return [np.where(np.asarray(c.tolist(), dtype=bool), x, y).astype(object)]


def _cast(ins: list[np.ndarray | None], a: Mapping[str, Any]) -> list[np.ndarray]:
    x = ins[0]
    assert x is not None
    to = int(a["to"])
    if to == 9:  # bool: non-zero, decided over the range
        return [np.asarray(np.frompyfunc(lambda v: not _decided(v, 0, operator.eq), 1, 1)(x), dtype=object)]
    if to not in INT_TYPES:
        raise NotFoldable("Cast of a shape value to a non-integer type")
    return [x]


def _identity(ins: list[np.ndarray | None], a: Mapping[str, Any]) -> list[np.ndarray]:
    assert ins[0] is not None
    return [ins[0]]


def _compare(op: Callable[[Any, Any], bool]) -> Callable[..., list[np.ndarray]]:
    return _elementwise(lambda x, y: _decided(x, y, op))


def _extreme(pick_max: bool) -> Callable[..., list[np.ndarray]]:
    def pick(x: Any, y: Any) -> Any:
        first = _decided(x, y, operator.ge if pick_max else operator.le)
        return x if first else y

    vec = np.frompyfunc(pick, 2, 1)

    def run(ins: list[np.ndarray | None], a: Mapping[str, Any]) -> list[np.ndarray]:
        parts = [x for x in ins if x is not None]
        out = parts[0]
        for p in parts[1:]:
            out = np.asarray(vec(out, p), dtype=object)
        return [out]

    return run


INT_TYPES = frozenset({2, 3, 4, 5, 6, 7, 12, 13})
"""ONNX's integer element types."""

FOLDERS: dict[str, Callable[[list[np.ndarray | None], Mapping[str, Any]], list[np.ndarray]]] = {
    "Gather": _gather,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Concat": _concat,
    "Slice": _slice,
    "Reshape": _reshape,
    "Expand": _expand,
    "Where": _where,
    "Cast": _cast,
    "Identity": _identity,
    "Add": _elementwise(operator.add),
    "Sub": _elementwise(operator.sub),
    "Mul": _elementwise(operator.mul),
    "Div": _elementwise(_trunc_div),
    "Equal": _compare(operator.eq),
    "Less": _compare(operator.lt),
    "LessOrEqual": _compare(operator.le),
    "Greater": _compare(operator.gt),
    "GreaterOrEqual": _compare(operator.ge),
    "Max": _extreme(True),
    "Min": _extreme(False),
}
"""The operators :func:`fold` computes on shape values."""

_BOOL_OUT = frozenset({"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"})


def fold(op_type: str, ins: list[np.ndarray | None], attrs: Mapping[str, Any]) -> list[np.ndarray]:
    """The outputs of an ``op_type`` node on shape values (object arrays; constants converted
    with :func:`as_values`). Raises NotFoldable when it cannot be computed."""
    fn = FOLDERS.get(op_type)
    if fn is None:
        raise NotFoldable(f"{op_type} is not folded on shape values")
    try:
        return [np.asarray(o, dtype=object) for o in fn(ins, attrs)]
    except (UndecidedDim, GraphError, ValueError, IndexError, TypeError) as exc:
        raise NotFoldable(f"{op_type} on shape values: {exc}") from None


def out_elem_type(op_type: str, in_elem: int, attrs: Mapping[str, Any], ins_elem: Sequence[int]) -> int:
    """The ONNX element type of a folded node's output."""
    if op_type in _BOOL_OUT:
        return 9
    if op_type == "Cast":
        return int(attrs["to"])
    if op_type == "Where" and len(ins_elem) > 1:
        return ins_elem[1]
    return in_elem


def concrete_array(values: np.ndarray, elem_type: int) -> np.ndarray:
    """A shape value without symbols as a numpy array of ``elem_type``."""
    from tensor_eqsat.io.inputs import numpy_dtype

    return np.array(values.tolist(), dtype=numpy_dtype(elem_type)).reshape(values.shape)


# -- export ----------------------------------------------------------------------------------------


class DimTensors:
    """Symbolic dims as int64 tensors of a model being written (see the module docstring).

    sources: symbol name -> (input name, axis) of a graph input whose dim ``axis`` is that symbol.
    node: emits an ONNX node (op type, inputs, outputs, attributes).
    const: makes an initializer from an array and returns its name.
    fresh: a new unique name from a base.
    """

    def __init__(
        self,
        sources: Mapping[str, tuple[str, int]],
        node: Callable[..., None],
        const: Callable[[str, np.ndarray], str],
        fresh: Callable[[str], str],
    ) -> None:
        self.sources, self._node, self._const, self._fresh = dict(sources), node, const, fresh
        self._shapes: dict[str, str] = {}
        self._exprs: dict[Any, str] = {}

    def shape_tensor(self, base: str, dims: Sequence[Any]) -> str:
        """A 1-D int64 tensor holding ``dims`` (a constant when none is symbolic)."""
        if not any(is_symbolic(d) for d in dims):
            return self._const(base, np.array([int(d) for d in dims], dtype=np.int64))
        parts: list[str] = []
        run: list[int] = []
        for d in dims:
            if is_symbolic(d):
                if run:
                    parts.append(self._const(f"{base}_c", np.array(run, dtype=np.int64)))
                    run = []
                parts.append(self._expr(d.expr))
            else:
                run.append(int(d))
        if run:
            parts.append(self._const(f"{base}_c", np.array(run, dtype=np.int64)))
        out = self._fresh(base)
        self._node("Concat", parts, [out], axis=0)
        return out

    def _symbol(self, name: str) -> str:
        if name not in self._exprs:
            src = self.sources.get(name)
            if src is None:
                raise GraphError(f"export: symbolic dim {name} is no dim of any graph input")
            inp, axis = src
            if inp not in self._shapes:
                self._shapes[inp] = self._fresh(f"{inp}_shape")
                self._node("Shape", [inp], [self._shapes[inp]])
            out = self._fresh(f"dim_{name}")
            index = self._const(f"{name}_axis", np.array([axis], np.int64))
            self._node("Gather", [self._shapes[inp], index], [out])
            self._exprs[name] = out
        return self._exprs[name]

    def _expr(self, e: Any) -> str:
        key = e
        if key in self._exprs:
            return self._exprs[key]
        if e.is_Integer:
            out = self._const("dim", np.array([int(e)], dtype=np.int64))
        elif e.is_Symbol:
            out = self._symbol(str(e))
        elif e.is_Add or e.is_Mul:
            args = [self._expr(a) for a in e.args]
            out = args[0]
            for arg in args[1:]:
                nxt = self._fresh("dim")
                self._node("Add" if e.is_Add else "Mul", [out, arg], [nxt])
                out = nxt
        elif e.is_Pow and e.exp.is_Integer and int(e.exp) > 0:
            base = self._expr(e.base)
            out = base
            for _ in range(int(e.exp) - 1):
                nxt = self._fresh("dim")
                self._node("Mul", [out, base], [nxt])
                out = nxt
        else:
            raise GraphError(f"export: symbolic dim {e} is not a polynomial")
        self._exprs[key] = out
        return out


def dim_sources(inputs: Sequence[tuple[str, Sequence[Any]]]) -> dict[str, tuple[str, int]]:
    """Symbol name -> (input name, axis) of the first graph input with that symbol as a dim."""
    out: dict[str, tuple[str, int]] = {}
    for name, shape in inputs:
        for k, d in enumerate(shape):
            if is_symbolic(d) and d.expr.is_Symbol:
                out.setdefault(str(d.expr), (name, k))
    return out


# -- shapes onnx cannot name ------------------------------------------------------------------------


def probe_shapes(
    model: Any, symbols: Mapping[str, Symbol], inputs: Mapping[str, Sequence[Any]]
) -> dict[str, tuple[Any, ...]]:
    """Symbolic shapes of the tensors ONNX's shape inference cannot name (a Slice of a table to a
    Shape-computed end: ``unk__3``), fitted from runs of the model.

    The model runs in onnxruntime, every tensor an output, at several points: a base point (every
    symbol at 3; where the model cannot run that small, each at its hint plus one), that point
    plus one and two in each symbol, plus one in each pair. Each dim is fitted as a polynomial of
    degree at most 2 in the symbols, and the fit must give the sizes seen at two more points
    exactly; a dim that is not such a polynomial (a division that is not exact) is left out, and
    so is a tensor with such a dim. The fit holds at the points run (a ``min`` against a table's
    size, as in a Slice of BERT's 512 position ids, reads as the sequence length); the numeric
    check runs the written model at the hints and other shapes too.

    model: the model. symbols: by name. inputs: each real input's shape (ints and SymDims).
    Returns name -> shape for the tensors fitted (empty when the model cannot be run there).
    """
    names = sorted(symbols)
    basis: list[tuple[str, ...]] = [(), *((n,) for n in names), *((n, n) for n in names)]
    basis += [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    # Small sizes first (a BERT-base runs 40 times faster at sequence 3 than at 129); a model
    # that cannot run that small (a convolution over a symbolic side) is run near the hints.
    for base in ({n: 3 for n in names}, {n: max(symbols[n].hint + 1, 3) for n in names}):
        fit_points, points = _probe_points(names, base)
        his = {n: symbols[n].hi for n in names}
        if any(hi is not None and p[n] > hi for p in points for n, hi in his.items()):
            continue  # a range too small to probe there
        seen = _run_shapes(model, inputs, points)
        if seen:
            break
    else:
        return {}
    matrix = np.array([[float(np.prod([p[s] for s in mono])) for mono in basis] for p in fit_points])
    out: dict[str, tuple[Any, ...]] = {}
    for name, shape in seen[0].items():
        rows = [s.get(name) for s in seen]
        if any(r is None or len(r) != len(shape) for r in rows):
            continue
        dims = [
            _fit(matrix, basis, symbols, points, [r[k] for r in rows if r is not None])
            for k in range(len(shape))
        ]
        if all(d is not None for d in dims):
            out[name] = tuple(dims)
    return out


def _probe_points(
    names: Sequence[str], base: Mapping[str, int]
) -> tuple[list[dict[str, int]], list[dict[str, int]]]:
    """The points a fit is made from, and all points run (those and two to check it at)."""
    fit_points = [dict(base)]
    for n in names:
        fit_points += [{**base, n: base[n] + 1}, {**base, n: base[n] + 2}]
    for i, a in enumerate(names):
        fit_points += [{**base, a: base[a] + 1, b: base[b] + 1} for b in names[i + 1 :]]
    checks = [
        {n: base[n] + 3 + 2 * k for k, n in enumerate(names)},
        {n: base[n] + 7 + k for k, n in enumerate(names)},
    ]
    return fit_points, [*fit_points, *checks]


def _fit(
    matrix: np.ndarray,
    basis: Sequence[tuple[str, ...]],
    symbols: Mapping[str, Symbol],
    points: Sequence[Mapping[str, int]],
    values: Sequence[int],
) -> Any:
    coef, *_ = np.linalg.lstsq(matrix, np.array(values[: len(matrix)], dtype=float), rcond=None)
    dim: Any = 0
    for c, mono in zip(coef, basis, strict=True):
        term: Any = round(float(c))
        for s in mono:
            term = term * SymDim.of(symbols[s])
        dim = dim + term
    if all((dim.at(p) if is_symbolic(dim) else dim) == v for p, v in zip(points, values, strict=True)):
        return dim
    return None


def _run_shapes(
    model: Any, inputs: Mapping[str, Sequence[Any]], points: Sequence[Mapping[str, int]]
) -> list[dict[str, tuple[int, ...]]]:
    """The shape of every tensor of ``model`` when run at each point (seeded valid inputs); empty
    when it cannot run."""
    from tensor_eqsat.io.inputs import make_feed, model_inputs
    from tensor_eqsat.io.onnx_common import require_onnx, require_ort

    onnx, ort = require_onnx(), require_ort()
    m = onnx.ModelProto()
    m.CopyFrom(model)
    listed = {o.name for o in m.graph.output}
    for node in m.graph.node:
        for name in node.output:
            if name and name not in listed:
                listed.add(name)
                vi = onnx.ValueInfoProto()
                vi.name = name
                m.graph.output.append(vi)
    infos = model_inputs(model)
    try:
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        opts.log_severity_level = 4  # a size the model cannot take is an answer here, not an error
        sess = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        out = []
        for p in points:
            shapes = {n: tuple(d.at(p) if is_symbolic(d) else int(d) for d in s) for n, s in inputs.items()}
            results = sess.run(None, make_feed(shapes, infos, seed=0))
            out.append({n: tuple(int(d) for d in np.shape(r)) for n, r in zip(names, results, strict=True)})
    except Exception:  # (onnxruntime's errors): nothing learned
        return []
    return out
