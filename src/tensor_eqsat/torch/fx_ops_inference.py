"""The calls of today's inference graphs in the FX translation table (issue 33).

Part of the one table of :mod:`tensor_eqsat.torch.fx_ops` (registered there, by :func:`build`):
``silu``, ``hardswish``, ``hardsigmoid``; ReLU6, ``hardtanh`` and two-sided ``clamp`` as ``clip``;
``pow`` by a number, ``rsqrt`` and ``mean`` (RMSNorm as Llama writes it, global pooling);
``F.pad`` with zeros; basic tensor indexing (slices, integers, ``None``, ``...``) as ``slice`` ops
and one ``reshape``; ``expand`` (grouped-query attention repeats its key/value heads); softmax
with a ``dtype`` (a ``cast`` first, as PyTorch does); and ``.to`` / ``.type`` / ``.float`` /
``.half`` / ``.bfloat16`` that keep a float tensor on its device: the identity where the dtype
stays, else a ``cast`` (the float32 islands of reduced-precision softmax and RMSNorm, issue 34).
Every translation is exact, as in the base table; anything else raises
:class:`~tensor_eqsat.torch.fx_ops.NotMapped` and stays opaque (a pad with a non-zero value or a
negative, cropping pad, a one-sided clamp, a cast to an integer dtype or another device,
advanced indexing).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tensor_eqsat.torch.fx_ops import (
    NotMapped,
    Translator,
    _arg,
    _ir,
    _is_tensor_arg,
    _literal,
    _number,
    _register,
    _tensor,
    _torch,
    _value,
)

if TYPE_CHECKING:
    from tensor_eqsat.ir.graph import Tensor
    from tensor_eqsat.torch.fx_import import Value, _Translator


def build() -> None:
    """Register this module's translators in :data:`~tensor_eqsat.torch.fx_ops.TRANSLATORS` (after
    the base table: its ``getitem`` and ``softmax`` replace the base ones)."""
    torch = _torch()
    F = torch.nn.functional
    g = lambda tr: tr.graph  # noqa: E731

    def one(tr: _Translator, op: str, x: Tensor, **attrs: Any) -> Value:
        return _ir(g(tr).add(op, [x], **attrs)[0])

    def activation(op: str) -> Translator:
        def run(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
            return one(tr, op, _tensor(tr, args[0]))

        return run

    for op in ("silu", "hardsigmoid", "hardswish"):
        _register(getattr(F, op), getattr(torch, op, None), getattr(torch._C._nn, op, None))(activation(op))
    _register(torch.rsqrt, "method:rsqrt")(activation("rsqrt"))

    @_register(F.hardtanh, torch._C._nn.hardtanh, F.relu6)
    def _hardtanh(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        x = _tensor(tr, args[0])
        if node.target is F.relu6:
            return one(tr, "clip", x, min=0.0, max=6.0)
        lo = _number(tr, _arg(args, kw, 1, "min_val", -1.0))
        hi = _number(tr, _arg(args, kw, 2, "max_val", 1.0))
        return one(tr, "clip", x, min=lo, max=hi)

    @_register(torch.clamp, torch.clip, "method:clamp", "method:clip")
    def _clamp(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        lo_arg, hi_arg = _arg(args, kw, 1, "min"), _arg(args, kw, 2, "max")
        if lo_arg is None or hi_arg is None:
            raise NotMapped("clamp with one bound")
        lo, hi = _number(tr, lo_arg), _number(tr, hi_arg)
        if lo > hi:
            raise NotMapped("clamp with min > max")
        return one(tr, "clip", _tensor(tr, args[0]), min=lo, max=hi)

    @_register(torch.pow, "method:pow", operator.pow)
    def _pow(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        exponent = _arg(args, kw, 1, "exponent")
        if not _is_tensor_arg(tr, args[0]) or _is_tensor_arg(tr, exponent):
            raise NotMapped("a number to a tensor power, or a tensor exponent")
        return one(tr, "pow", _tensor(tr, args[0]), exponent=_number(tr, exponent))

    @_register(torch.mean, "method:mean")
    def _mean(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        x = _tensor(tr, args[0])
        dim = _literal(tr, _arg(args, kw, 1, "dim"))
        keep = _literal(tr, _arg(args, kw, 2, "keepdim", False))
        if kw.get("dtype") is not None or not isinstance(keep, bool):
            raise NotMapped("mean with a dtype")
        axes = tuple(range(len(x.shape))) if dim is None else (dim,) if isinstance(dim, int) else tuple(dim)
        if not axes:
            raise NotMapped("mean over no axes")
        return one(tr, "mean", x, axes=axes, keepdims=keep)

    @_register(F.pad, torch._C._nn.pad, torch.constant_pad_nd)
    def _fpad(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        x = _tensor(tr, args[0])
        pad = [int(p) for p in _literal(tr, _arg(args, kw, 1, "pad"))]
        nd = node.target is torch.constant_pad_nd
        mode = "constant" if nd else _literal(tr, _arg(args, kw, 2, "mode", "constant"))
        value = _literal(tr, _arg(args, kw, 2 if nd else 3, "value", None))
        if mode != "constant" or value not in (None, 0, 0.0) or len(pad) % 2 or len(pad) > 2 * len(x.shape):
            raise NotMapped("a non-zero or non-constant pad")
        if any(p < 0 for p in pad):
            raise NotMapped("a cropping pad")
        r = len(x.shape)
        before, after = [0] * r, [0] * r
        for i in range(len(pad) // 2):
            before[r - 1 - i], after[r - 1 - i] = pad[2 * i], pad[2 * i + 1]
        return one(tr, "pad", x, pads=(*before, *after), fill="zero")

    @_register("method:expand", "method:expand_as")
    def _expand(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        from tensor_eqsat.torch.fx_import import _example

        x = _tensor(tr, args[0])
        ev = _example(node)
        if not isinstance(ev, torch.Tensor) or ev.dim() != len(x.shape):
            raise NotMapped("expand that adds dims")
        shape = tr.symtab.shape(ev.shape)
        if shape == tuple(x.shape):
            return _ir(x)
        return one(tr, "expand", x, shape=shape)

    @_register(operator.getitem)
    def _getitem(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        from tensor_eqsat.torch.fx_import import Seq

        seq, index = _value(tr, args[0]), args[1]
        if isinstance(seq, Seq):
            if not isinstance(index, int):
                raise NotMapped("indexing a sequence by a non-integer")
            return seq.items[index]
        return _index(tr, node, _tensor(tr, args[0]), index)

    def _index(tr: _Translator, node: Any, x: Tensor, index: Any) -> Value:
        """Basic indexing (slices, integers, None, Ellipsis) as slices and one reshape."""
        from tensor_eqsat.torch.fx_import import _example

        items = list(index) if isinstance(index, tuple) else [index]
        if any(
            isinstance(i, bool) or not (i is None or i is Ellipsis or isinstance(i, int | slice))
            for i in items
        ):
            raise NotMapped("advanced indexing")  # a bool index adds a dim: not basic either
        if sum(i is Ellipsis for i in items) > 1:
            raise NotMapped("two ellipses")
        used = sum(1 for i in items if i is not None and i is not Ellipsis)
        if used > len(x.shape):
            raise NotMapped("too many indices")
        k = items.index(Ellipsis) if Ellipsis in items else len(items)
        items = items[:k] + [slice(None)] * (len(x.shape) - used) + items[k + 1 :]
        axis, y = 0, x
        for it in items:
            if it is None:
                continue
            dim = x.shape[axis]
            if isinstance(it, int):
                i = it + dim if it < 0 else it
                if not 0 <= i < dim:
                    raise NotMapped("index out of range")
                it = slice(i, i + 1)
            for b in (it.start, it.stop, it.step):
                if b is not None and not isinstance(b, int):
                    raise NotMapped("a slice bound that is not a number")
            start, stop, step = it.indices(dim)
            if step < 1 or start >= stop:
                raise NotMapped("an empty or reversed slice")
            if (start, stop, step) != (0, dim, 1):
                y = g(tr).add("slice", [y], axis=axis, start=start, end=stop, step=step)[0]
            axis += 1
        ev = _example(node)
        if not isinstance(ev, torch.Tensor):
            raise NotMapped("unknown result shape")
        shape = tr.symtab.shape(ev.shape)
        if tuple(y.shape) != shape:
            y = g(tr).reshape(y, shape)
        return _ir(y)

    @_register("method:to", "method:type", "method:float", "method:half", "method:bfloat16")
    def _to(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        from torch.fx.node import Node

        from tensor_eqsat.torch.fx_import import _example, ir_dtype

        x = _tensor(tr, args[0])  # a float32, float16 or bfloat16 run-time tensor
        if not isinstance(args[0], Node):
            raise NotMapped("a constant")
        ev, src = _example(node), _example(args[0])
        if not (isinstance(ev, torch.Tensor) and isinstance(src, torch.Tensor)):
            raise NotMapped("unknown result")
        dtype = ir_dtype(ev.dtype)
        if dtype is None or ev.device != src.device or kw.get("memory_format") is not None:
            raise NotMapped("a cast to a non-float dtype, or a move")
        # The result's values depend only on its dtype (copy= and non_blocking= do not change them).
        return _ir(x) if dtype == x.dtype else one(tr, "cast", x, dtype=dtype)

    @_register(torch.softmax, F.softmax, "method:softmax")
    def _softmax(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        from tensor_eqsat.torch.fx_import import ir_dtype

        dim = _literal(tr, _arg(args, kw, 1, "dim"))
        at = 3 if node.target is F.softmax else 2  # F.softmax(input, dim, _stacklevel, dtype)
        dtype = _literal(tr, _arg(args, kw, at, "dtype"))
        if dim is None:
            raise NotMapped("softmax without a dim")
        x = _tensor(tr, args[0])
        if dtype is not None:
            # PyTorch casts the input to ``dtype`` first (float32 softmax of bfloat16 scores).
            want = ir_dtype(dtype)
            if want is None:
                raise NotMapped(f"softmax to {dtype}")
            if want != x.dtype:
                x = g(tr).cast(x, want)
        return _ir(g(tr).softmax(x, axis=int(dim)))


__all__ = ["build"]
