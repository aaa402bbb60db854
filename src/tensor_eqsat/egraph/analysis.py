"""E-class analyses: the pluggable :class:`Analysis` protocol and the tensor analysis.

An analysis attaches one value to every e-class (egg's ``Analysis``): ``make`` computes the value
of a new e-node from its op, attributes and its children's values, and ``merge`` joins the values
of two classes that a union identifies. ``make`` also acts as the type check of the e-graph: it
raises (ShapeError for tensors) on a node that is ill-typed, and rewrites skip such matches before
adding anything (TENSAT's CheckApply).

:class:`TensorAnalysis` (the default for tensor e-graphs) keeps the output shapes and dtypes of a
class and whether the tensor depends only on weights (TENSAT's ``all_weights``). Shapes come from the OpSpec
registry, so patterns, graphs and the e-graph agree on every shape rule. Multi-output ops (split)
make *tuple-valued* classes whose ``shapes`` has one entry per output; the structural op
:data:`~tensor_eqsat.ir.opspec.PROJECTION` (``get``, attribute ``index``) selects one output.
This mirrors TENSAT's split/split_0/split_1 with one ``get`` op instead of an op per index, keeps
``(get index=0 (split ...))`` patterns literal, and gives every tensor-valued class exactly one
shape. ``get`` is not in the op registry; this module is the one place that gives it meaning
(``convert.py`` in this package turns it back into a ``(node, index)`` reference).

:class:`NoAnalysis` is the trivial analysis for languages that are not tensors (toy arithmetic
in tests, e-graphs imported from other tools).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

from tensor_eqsat.egraph.errors import MergeConflict
from tensor_eqsat.errors import ShapeError, TensorEqsatError
from tensor_eqsat.ir.ops import get_op
from tensor_eqsat.ir.opspec import PROJECTION, OpSpec
from tensor_eqsat.ir.symbolic import is_symbolic
from tensor_eqsat.ir.types import OpKind, Shape

__all__ = ["Analysis", "MergeConflict", "NoAnalysis", "TensorAnalysis", "TensorData", "project"]


class Analysis(Protocol):
    """An e-class analysis (egg's ``Analysis``).

    ``make(op, attrs, children)`` returns the value of a node whose children have the given
    values, or raises :class:`~tensor_eqsat.errors.ShapeError` if the node is ill-typed.
    ``merge(a, b)`` returns the joined value of two classes being unioned, or raises
    :class:`MergeConflict`. It must return ``a`` itself when the join equals ``a``, so the e-graph
    can tell cheaply whether the surviving class changed.
    """

    def make(self, op: str, attrs: tuple[Any, ...], children: Sequence[Any]) -> Any: ...

    def merge(self, a: Any, b: Any) -> Any: ...


class NoAnalysis:
    """The trivial analysis: every class carries ``None``; any node is well-typed.

    >>> NoAnalysis().make("add", (), [None, None]) is None
    True
    """

    def make(self, op: str, attrs: tuple[Any, ...], children: Sequence[Any]) -> None:
        return None

    def merge(self, a: Any, b: Any) -> Any:
        return a


class TensorData(NamedTuple):
    """The tensor analysis value of an e-class.

    shapes: one shape per output; exactly one for every class except tuple-valued ones (split).
    all_weights: True if the value depends only on weights (so it can be folded at load time).
    dtypes: one dtype name per output (ir/dtypes.py). Default: float32 for every output.
    """

    shapes: tuple[Shape, ...]
    all_weights: bool
    dtypes: tuple[str, ...] = ("float32",)

    @property
    def dtype(self) -> str:
        """The single dtype of a tensor-valued class."""
        return self.dtypes[0]

    @property
    def shape(self) -> Shape:
        """The single shape of a tensor-valued class; raises ShapeError for a tuple-valued one."""
        if len(self.shapes) != 1:
            raise ShapeError(PROJECTION, f"class has {len(self.shapes)} outputs; select one with get")
        return self.shapes[0]

    @property
    def is_tuple(self) -> bool:
        """True for multi-output (split) classes, which only ``get`` nodes may consume."""
        return len(self.shapes) != 1


class TensorAnalysis:
    """Shapes (from the OpSpec registry) and the all-weights flag.

    Shape inference results are memoized by (op, attrs, input shapes), errors included: rules
    propose the same few op configurations over and over.

    >>> a = TensorAnalysis()
    >>> x = a.make("input", ((2, 3), "x"), [])
    >>> w = a.make("weight", ((3, 4), "w"), [])
    >>> a.make("matmul", ("none",), [x, w])
    TensorData(shapes=((2, 4),), all_weights=False, dtypes=('float32',))
    >>> a.make("matmul", ("none",), [w, x])
    Traceback (most recent call last):
    ...
    tensor_eqsat.errors.ShapeError: matmul: contracted dims differ: 4 vs 2 (input shapes: (3, 4), (2, 3))
    """

    def __init__(self) -> None:
        self._specs: dict[str, OpSpec] = {}
        self._cache: dict[tuple[Any, ...], tuple[tuple[Shape, ...], tuple[str, ...]] | TensorEqsatError] = {}

    def __getstate__(self) -> dict[str, Any]:
        # The caches hold OpSpecs (with local functions) and stored errors; both are rebuilt on
        # demand, so a pickled e-graph (for worker processes) carries none of them.
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]

    def _spec(self, op: str) -> OpSpec:
        spec = self._specs.get(op)
        if spec is None:
            spec = self._specs[op] = get_op(op)
        return spec

    def make(self, op: str, attrs: tuple[Any, ...], children: Sequence[TensorData]) -> TensorData:
        if op == PROJECTION:
            return project(attrs, children)
        if not children:
            # Leaves: names make every key unique, so they bypass the cache.
            spec = self._spec(op)
            shapes = spec.infer_shapes((), attrs)
            dtypes = spec.infer_dtypes((), attrs, len(shapes))
            return TensorData(shapes, op == "weight" or spec.kind is not OpKind.LEAF, dtypes)
        in_shapes = []
        in_dtypes = []
        all_weights = True
        for i, child in enumerate(children):
            shapes = child.shapes
            if len(shapes) != 1:
                raise ShapeError(op, f"input {i} has {len(shapes)} outputs; select one with get")
            in_shapes.append(shapes[0])
            in_dtypes.append(child.dtypes[0])
            all_weights = all_weights and child.all_weights
        key = (op, attrs, *in_shapes, *in_dtypes)
        out = self._cache.get(key)
        if out is None:
            spec = self._spec(op)
            try:
                out_shapes = spec.infer_shapes(in_shapes, attrs)
                out = (out_shapes, spec.infer_dtypes(in_dtypes, attrs, len(out_shapes)))
            except TensorEqsatError as exc:
                self._cache[key] = exc
                raise
            self._cache[key] = out
        elif isinstance(out, TensorEqsatError):
            # Re-raising a stored exception would otherwise keep extending its traceback.
            raise out.with_traceback(None)
        if all_weights and any(is_symbolic(d) for s in out[0] for d in s):
            all_weights = False  # a symbolic shape is known at run time only: not foldable
        return TensorData(out[0], all_weights, out[1])

    def merge(self, a: TensorData, b: TensorData) -> TensorData:
        if a.shapes != b.shapes:
            raise MergeConflict(f"union of classes with different shapes {a.shapes} and {b.shapes}")
        if a.dtypes != b.dtypes:
            raise MergeConflict(f"union of classes with different dtypes {a.dtypes} and {b.dtypes}")
        if a.all_weights or not b.all_weights:
            return a
        return b


def project(attrs: tuple[Any, ...], children: Sequence[TensorData]) -> TensorData:
    """The value of ``(get index=I child)``: output I of the child class."""
    if len(children) != 1:
        raise ShapeError(PROJECTION, f"takes 1 input, got {len(children)}")
    (index,) = attrs
    child = children[0]
    if not 0 <= index < len(child.shapes):
        raise ShapeError(PROJECTION, f"index {index} out of range for {len(child.shapes)} outputs")
    return TensorData((child.shapes[index],), child.all_weights, (child.dtypes[index],))
