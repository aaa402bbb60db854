"""The operator registry: one :class:`OpSpec` per operator, the single source of truth.

Every fact about an operator lives in its OpSpec: input names, typed attributes with defaults,
shape inference, numpy semantics, FLOP and byte counts, and whether it is a free view. Importers,
exporters, the e-graph analysis, pattern parsing, the interpreter and the cost models all read
this table; nothing keeps a parallel one (the mistake TASO's Python front end made).

Attributes are stored as a tuple of values in the order the spec declares them (``Attrs``). A
tuple hashes fast, which matters for the e-graph's hash-cons; :meth:`OpSpec.attr_dict` gives the
named view. Values are canonical: enums as their string value, lists as tuples of ints.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensor_eqsat.errors import AttributeValueError, GraphError, ShapeError
from tensor_eqsat.ir.dtypes import default_infer
from tensor_eqsat.ir.symbolic import Point, SymDim, concrete_value
from tensor_eqsat.ir.types import OpKind, Shape, volume

Attrs = tuple[Any, ...]
"""Attribute values of one op instance, in the order of its OpSpec's ``attrs``."""

InferFn = Callable[[Sequence[Shape], Mapping[str, Any]], tuple[Shape, ...]]
ComputeFn = Callable[[Sequence[np.ndarray], Mapping[str, Any]], tuple[np.ndarray, ...]]
FlopsFn = Callable[[Sequence[Shape], Sequence[Shape], Mapping[str, Any]], int]
CanonFn = Callable[[Sequence[Shape], dict[str, Any]], dict[str, Any]]
DtypeFn = Callable[[Sequence[str], Mapping[str, Any], int], tuple[str, ...]]
"""Output dtypes from input dtypes, the attribute dict and the number of outputs."""

_NO_DEFAULT = object()

PROJECTION = "get"
"""The projection that selects output ``index`` of a multi-output class (split), written
``(get index=I P)`` in patterns. It is not an OpSpec: it exists only in e-graphs and patterns (a
Graph refers to outputs by ``TensorRef``), so the e-graph conversion, the analysis, the cost
model and extraction each give it its one meaning, and they read the name from here, the IR,
rather than from the pattern language above them."""


@dataclass(frozen=True)
class AttrSpec:
    """One typed attribute of an operator.

    kind: ``"int"``, ``"float"``, ``"ints"`` (tuple of ints), ``"dims"`` (tuple of dims: ints
    or symbolic dims, ir/symbolic.py; shapes and sizes), ``"str"``, ``"bool"``, or ``"enum"``
    (one of ``choices``, stored as a string).
    default: the value used when the attribute is not given; no default means it is required.
    check: an optional predicate on the converted value; ``check_msg`` says what it requires.
    """

    name: str
    kind: str
    default: Any = _NO_DEFAULT
    choices: tuple[str, ...] = ()
    check: Callable[[Any], bool] | None = None
    check_msg: str = ""

    @property
    def required(self) -> bool:
        return self.default is _NO_DEFAULT

    def convert(self, op: str, value: Any) -> Any:
        """Return ``value`` in canonical form, or raise :class:`AttributeValueError`."""
        try:
            out = self._convert(value)
        except (TypeError, ValueError) as exc:
            raise AttributeValueError(op, self.name, f"expected {self._describe()}, got {value!r}") from exc
        if self.check is not None and not self.check(out):
            raise AttributeValueError(op, self.name, f"{self.check_msg}, got {value!r}")
        return out

    def _describe(self) -> str:
        if self.kind == "enum":
            return "one of " + ", ".join(repr(c) for c in self.choices)
        return {
            "ints": "a sequence of ints",
            "dims": "a sequence of ints or symbolic dims",
            "int": "an int",
            "float": "a number",
        }.get(self.kind, f"a {self.kind}")

    def _convert(self, value: Any) -> Any:
        kind = self.kind
        if kind == "int":
            if isinstance(value, bool) or not isinstance(value, int | np.integer):
                raise TypeError
            return int(value)
        if kind == "float":
            if isinstance(value, bool) or not isinstance(value, int | float | np.number):
                raise TypeError
            out = float(value)
            if not np.isfinite(out):
                raise ValueError
            return out
        if kind == "ints":
            if isinstance(value, str | bytes) or not isinstance(value, Sequence | np.ndarray):
                raise TypeError
            items = list(value)
            if any(isinstance(v, bool) or not isinstance(v, int | np.integer) for v in items):
                raise TypeError
            return tuple(int(v) for v in items)
        if kind == "dims":
            if isinstance(value, str | bytes) or not isinstance(value, Sequence | np.ndarray):
                raise TypeError
            dims = list(value)
            if any(isinstance(v, bool) or not isinstance(v, int | np.integer | SymDim) for v in dims):
                raise TypeError
            return tuple(v if isinstance(v, SymDim) else int(v) for v in dims)
        if kind == "str":
            if not isinstance(value, str):
                raise TypeError
            return value
        if kind == "bool":
            if not isinstance(value, bool):
                raise TypeError
            return value
        if kind == "enum":
            raw = value.value if hasattr(value, "value") else value
            if raw not in self.choices:
                raise ValueError
            return str(raw)
        raise AssertionError(f"unknown attribute kind {kind!r}")


@dataclass(frozen=True)
class OpSpec:
    """Everything known about one operator.

    name: the op's name in graphs, patterns, rule files and serialized files.
    inputs: names of the inputs in order; with ``variadic`` the op takes ``min_inputs`` or more
        inputs and ``inputs`` holds one name for all of them.
    attrs: typed attributes in canonical order.
    infer: output shapes from input shapes and the attribute dict; raises ShapeError.
    compute: numpy semantics; returns one array per output.
    flops: floating-point operations of one instance.
    kind: the class of work (cost models choose formulas by it); VIEW ops are free views.
    positive_inputs: input positions that must hold positive values (batchnorm's variance); the
        interpreter draws random data for them from a positive range.
    canonicalize: optional hook run by the graph builder before validation, turning user-friendly
        attribute values (negative axes, -1 in a reshape) into the canonical ones.
    infer_dtype: output dtypes from input dtypes; default None: the outputs take the common dtype
        of the floating inputs (:func:`tensor_eqsat.ir.dtypes.default_infer`), so most ops need
        no dtype code.
    doc: one line for listings.
    """

    name: str
    inputs: tuple[str, ...]
    attrs: tuple[AttrSpec, ...]
    infer: InferFn
    compute: ComputeFn
    flops: FlopsFn
    kind: OpKind
    variadic: bool = False
    min_inputs: int = 0
    positive_inputs: frozenset[int] = frozenset()
    canonicalize: CanonFn | None = None
    infer_dtype: DtypeFn | None = None
    doc: str = ""
    _attr_index: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._attr_index.update({a.name: i for i, a in enumerate(self.attrs)})

    # -- attributes ---------------------------------------------------------------------------
    @property
    def attr_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attrs)

    @property
    def is_view(self) -> bool:
        """True for ops that only re-label memory (free in every cost model)."""
        return self.kind is OpKind.VIEW

    @property
    def is_leaf(self) -> bool:
        return self.kind is OpKind.LEAF

    def make_attrs(self, **values: Any) -> Attrs:
        """Validate keyword attributes and return them as a canonical tuple.

        >>> from tensor_eqsat.ir.ops import get_op
        >>> get_op("conv2d").make_attrs(stride=[2, 2], padding="valid")
        ((2, 2), 'valid', 'none')
        """
        unknown = set(values) - set(self._attr_index)
        if unknown:
            name = sorted(unknown)[0]
            known = ", ".join(self.attr_names) or "none"
            raise AttributeValueError(self.name, name, f"unknown attribute (known: {known})")
        out = []
        for spec in self.attrs:
            if spec.name in values:
                out.append(spec.convert(self.name, values[spec.name]))
            elif spec.required:
                raise AttributeValueError(self.name, spec.name, "required attribute missing")
            else:
                out.append(spec.default)
        return tuple(out)

    def has_symbolic_attrs(self, attrs: Attrs) -> bool:
        """Whether a ``dims`` attribute holds a symbolic dim."""
        return any(
            a.kind == "dims" and any(isinstance(d, SymDim) for d in v)
            for a, v in zip(self.attrs, attrs, strict=False)
        )

    def at(self, attrs: Attrs, point: Point) -> Attrs:
        """``attrs`` with the symbolic dims of its ``dims`` attributes taken at ``point``."""
        return tuple(
            concrete_value(v, point) if a.kind == "dims" else v
            for a, v in zip(self.attrs, attrs, strict=True)
        )

    def attr_dict(self, attrs: Attrs) -> dict[str, Any]:
        """The named view of a canonical attribute tuple."""
        return _attr_dict(self, attrs)

    def attr(self, attrs: Attrs, name: str) -> Any:
        """One attribute value by name."""
        i = self._attr_index[name]
        return attrs[i] if i < len(attrs) else _attr_dict(self, attrs)[name]

    # -- shapes, numerics, counts -------------------------------------------------------------
    def check_arity(self, n: int) -> None:
        """Raise GraphError unless ``n`` inputs suit this op."""
        if self.variadic:
            if n < self.min_inputs:
                raise GraphError(f"{self.name}: takes at least {self.min_inputs} inputs, got {n}")
        elif n != len(self.inputs):
            raise GraphError(f"{self.name}: takes {len(self.inputs)} inputs, got {n}")

    def infer_shapes(self, in_shapes: Sequence[Shape], attrs: Attrs) -> tuple[Shape, ...]:
        """Output shapes of one instance; raises ShapeError (or GraphError on arity)."""
        self.check_arity(len(in_shapes))
        return self.infer(in_shapes, self.attr_dict(attrs))

    def infer_dtypes(self, in_dtypes: Sequence[str], attrs: Attrs, n_outputs: int) -> tuple[str, ...]:
        """Output dtypes of one instance with ``n_outputs`` outputs; raises DTypeError (a
        ShapeError) on inputs of dtypes the op cannot combine."""
        if self.infer_dtype is None:
            return default_infer(self.name, in_dtypes, n_outputs)
        return self.infer_dtype(in_dtypes, self.attr_dict(attrs), n_outputs)

    def evaluate(self, arrays: Sequence[np.ndarray], attrs: Attrs) -> tuple[np.ndarray, ...]:
        """Run the numpy semantics of one instance."""
        self.check_arity(len(arrays))
        return self.compute(arrays, self.attr_dict(attrs))

    def flop_count(self, in_shapes: Sequence[Shape], attrs: Attrs) -> int:
        """Floating-point operations of one instance."""
        out_shapes = self.infer_shapes(in_shapes, attrs)
        return int(self.flops(in_shapes, out_shapes, self.attr_dict(attrs)))

    def byte_count(self, in_shapes: Sequence[Shape], attrs: Attrs, itemsize: int = 4) -> int:
        """Bytes moved by one instance: every input read once plus every output written once.

        Views and leaves move nothing.
        """
        if self.kind in (OpKind.VIEW, OpKind.LEAF):
            return 0
        out_shapes = self.infer_shapes(in_shapes, attrs)
        elems = sum(volume(s) for s in in_shapes) + sum(volume(s) for s in out_shapes)
        return elems * itemsize


@functools.lru_cache(maxsize=65536)
def _attr_dict(spec: OpSpec, attrs: Attrs) -> dict[str, Any]:
    # Cached: the e-graph asks for the same few attribute tuples millions of times. Callers must
    # not mutate the returned dict; the public accessors hand out copies where that matters.
    # A tuple may omit trailing attributes that have defaults (tuples and files written before
    # the attribute existed, such as a leaf's dtype): they read as their defaults.
    if len(attrs) < len(spec.attrs) and all(not a.required for a in spec.attrs[len(attrs) :]):
        attrs = attrs + tuple(a.default for a in spec.attrs[len(attrs) :])
    return dict(zip(spec.attr_names, attrs, strict=True))


_REGISTRY: dict[str, OpSpec] = {}


def register(spec: OpSpec) -> OpSpec:
    """Add an OpSpec to the registry; names are unique."""
    if spec.name in _REGISTRY:
        raise ValueError(f"op {spec.name!r} registered twice")
    _REGISTRY[spec.name] = spec
    return spec


def lookup(name: str) -> OpSpec:
    """The OpSpec called ``name``; raises GraphError naming the known ops otherwise."""
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise GraphError(f"unknown op {name!r} (known ops: {known})") from None


def all_ops() -> Iterator[OpSpec]:
    """Every registered OpSpec, in registration order."""
    return iter(list(_REGISTRY.values()))


__all__ = [
    "AttrSpec",
    "Attrs",
    "OpSpec",
    "ShapeError",
    "all_ops",
    "lookup",
    "register",
]
