"""Dynamo's symbolic sizes as IR symbolic dims, and back as FX nodes.

With ``torch.compile(dynamic=True)``, or once Dynamo has seen a second shape (automatic dynamic
shapes), the FX graph a backend receives has ``SymInt`` sizes: its fake tensors' shapes
(``node.meta["example_value"]``) hold expressions over the ShapeEnv's symbols (``s0``, ``s77``),
its placeholders include one ``SymInt`` per symbol, and size arithmetic (``s0 * s1``) is FX nodes.

Import (:class:`SymbolTable`): a SymInt becomes a :class:`~tensor_eqsat.ir.symbolic.SymDim` over
symbols of the same names, each with the ShapeEnv's hint (``backed_var_to_val``: the size of the
example) and range (``var_to_range``, ``int_oo`` as unbounded). Dynamo specialises sizes 0 and 1,
so its ranges start at 2. A symbolic Python int that is not a size (its range holds 0 or
negative values, or its hint is below 1: Mistral's sliding-window cache passes its
``cumulative_length``, 0 at the prefill) is no dim: :class:`NotASize`, and the translation reads
it as a run-time scalar.

Export (:class:`DimEmitter`): a dim of a rebuilt op (a reshape's target, a split's sizes) that is
symbolic is computed in the rebuilt FX graph from the SymInt placeholder of each symbol (or a
``size()`` of an input tensor whose dim is that symbol), with ``operator`` arithmetic for the
polynomial (``torch.sym_max`` / ``sym_min`` for a max or min of them, as Mistral's sliding-window
offset is). The rebuilt graph stays symbolic, so the next backend (Inductor) compiles it once
for the whole range; nothing here evaluates a SymInt (that would add a guard and specialise).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from tensor_eqsat.errors import TensorEqsatError
from tensor_eqsat.ir.symbolic import Symbol, SymDim, is_symbolic


class NotASize(TensorEqsatError):
    """A SymInt whose range or hint is not a size's (values below 1): not an IR dim."""


class SymbolTable:
    """SymInts of one FX graph as SymDims (see the module docstring); one per translation."""

    def __init__(self) -> None:
        self.symbols: dict[str, Symbol] = {}

    def _symbol(self, shape_env: Any, sym: Any) -> Symbol:
        name = str(sym)
        if name not in self.symbols:
            hints = getattr(shape_env, "backed_var_to_val", None) or shape_env.var_to_val
            hint = hints.get(sym)
            if hint is None:
                raise TensorEqsatError(f"symbolic size {name} has no hint (a data-dependent size)")
            vr = shape_env.var_to_range.get(sym)
            # torch's int_oo is not a sympy Integer: an unbounded end.
            lower: Any = vr.lower if vr is not None else None
            lo = int(lower) if getattr(lower, "is_Integer", False) else None
            upper: Any = vr.upper if vr is not None else None
            hi = int(upper) if getattr(upper, "is_Integer", False) else None
            if lo is None or lo < 1 or int(hint) < 1:
                low = "-inf" if lo is None else lo
                raise NotASize(f"symbolic int {name} = {hint} has the range [{low}, {hi}]: not a size")
            self.symbols[name] = Symbol(name, int(hint), lo, hi)
        return self.symbols[name]

    def dim(self, d: Any) -> Any:
        """An int as itself, a SymInt as its SymDim (an int when it is a constant)."""
        import torch

        if not isinstance(d, torch.SymInt):
            return int(d)
        node = d.node
        expr = node.expr
        if expr.is_Integer:
            return int(expr)
        infos = [self._symbol(node.shape_env, s) for s in expr.free_symbols]
        return SymDim.from_sympy(expr, infos)

    def shape(self, shape: Any) -> tuple[Any, ...]:
        """A torch shape as an IR shape."""
        return tuple(self.dim(d) for d in shape)

    def size_value(self, v: Any) -> Any:
        """:meth:`value`, or None where ``v`` holds a symbolic int that is no size
        (:class:`NotASize`: a run-time value)."""
        try:
            return self.value(v)
        except NotASize:
            return None

    def value(self, v: Any) -> Any:
        """A recorded size value (a SymInt, an int, a ``torch.Size`` or a tuple or list of them) with
        its SymInts as SymDims; None when ``v`` is not such a value."""
        import torch

        if isinstance(v, torch.SymInt):
            return self.dim(v)
        if isinstance(v, bool | torch.SymBool | torch.SymFloat):
            return None
        if isinstance(v, int):
            return v
        if isinstance(v, torch.Size | tuple | list) and not isinstance(v, str):
            items = [self.value(x) for x in v]
            if any(x is None for x in items):
                return None
            return tuple(items)
        return None


def has_symint(v: Any) -> bool:
    """Whether a recorded value is, or holds, a SymInt (a symbolic size or a tensor of symbolic
    shape)."""
    import torch

    if isinstance(v, torch.SymInt):
        return not v.node.expr.is_Integer
    if isinstance(v, torch.Tensor):
        return any(has_symint(d) for d in v.shape)
    if isinstance(v, torch.Size | tuple | list):
        return any(has_symint(x) for x in v)
    return False


def hint_of(v: Any) -> Any:
    """A SymInt example input as its concrete hint (to run a graph outside tracing); anything else
    as it is."""
    import torch

    if isinstance(v, torch.SymInt):
        return int(v.node.hint) if v.node.hint is not None else v.node.shape_env.size_hint(v.node.expr)
    return v


class DimEmitter:
    """Symbolic dims as FX values of a graph being rebuilt (see the module docstring).

    sources: symbol name -> a function that emits the FX node holding its value (called once).
    call: emits ``fn(*args)`` in the graph and returns the node.
    """

    def __init__(self, sources: dict[str, Callable[[], Any]], call: Callable[..., Any]) -> None:
        self._sources = sources
        self._call = call
        self._nodes: dict[str, Any] = {}
        self._exprs: dict[Any, Any] = {}

    def dim(self, d: Any) -> Any:
        """An int as itself; a SymDim as the FX node computing it."""
        if not is_symbolic(d):
            return int(d)
        return self._expr(d.expr)

    def dims(self, ds: Any) -> tuple[Any, ...]:
        return tuple(self.dim(d) for d in ds)

    def _symbol(self, name: str) -> Any:
        if name not in self._nodes:
            source = self._sources.get(name)
            if source is None:
                raise TensorEqsatError(f"symbolic size {name}: no placeholder or input size holds it")
            self._nodes[name] = source()
        return self._nodes[name]

    def _expr(self, e: Any) -> Any:
        if e in self._exprs:
            return self._exprs[e]
        if e.is_Integer:
            out: Any = int(e)
        elif e.is_Symbol:
            out = self._symbol(str(e))
        elif e.is_Add or e.is_Mul:
            fn = operator.add if e.is_Add else operator.mul
            # Constants last: ``s0 * 64`` keeps the SymInt on the left.
            args = sorted(e.args, key=lambda a: a.is_Number)
            out = self._expr(args[0])
            for a in args[1:]:
                out = self._call(fn, out, self._expr(a))
        elif e.is_Pow and e.exp.is_Integer and int(e.exp) > 0:
            base = self._expr(e.base)
            out = base
            for _ in range(int(e.exp) - 1):
                out = self._call(operator.mul, out, base)
        elif type(e).__name__ in ("Max", "Min"):
            # Mistral's sliding window: ``max(0, s - 4095)``, as torch.sym_max computes it.
            import torch

            fn = torch.sym_max if type(e).__name__ == "Max" else torch.sym_min
            args = sorted(e.args, key=lambda a: a.is_Number)
            out = self._expr(args[0])
            for a in args[1:]:
                out = self._call(fn, out, self._expr(a))
        else:
            raise TensorEqsatError(f"symbolic size {e} cannot be rebuilt from +, *, max and min")
        self._exprs[e] = out
        return out


def symbol_sources(
    placeholders: list[Any], call_method: Callable[..., Any], by_name: dict[str, Any]
) -> dict[str, Callable[[], Any]]:
    """Symbol name -> how the rebuilt graph reads it: its SymInt placeholder, or else ``size(i)`` of
    the first tensor placeholder whose dim ``i`` is that symbol alone."""
    import torch

    def placeholder(name: str) -> Callable[[], Any]:
        return lambda: by_name[name]

    def size(name: str, i: int) -> Callable[[], Any]:
        return lambda: call_method("size", by_name[name], i)

    out: dict[str, Callable[[], Any]] = {}
    for p in placeholders:
        ev = p.meta.get("example_value", p.meta.get("val"))
        if isinstance(ev, torch.SymInt) and ev.node.expr.is_Symbol:
            out.setdefault(str(ev.node.expr), placeholder(p.name))
    for p in placeholders:
        ev = p.meta.get("example_value", p.meta.get("val"))
        if isinstance(ev, torch.Tensor):
            for i, d in enumerate(ev.shape):
                if isinstance(d, torch.SymInt) and d.node.expr.is_Symbol:
                    out.setdefault(str(d.node.expr), size(p.name, i))
    return out


__all__ = ["DimEmitter", "SymbolTable", "has_symint", "hint_of", "symbol_sources"]
