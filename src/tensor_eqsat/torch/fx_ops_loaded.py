"""The calls of models as users load them in the FX translation table (issue 45).

Part of the one table of :mod:`tensor_eqsat.torch.fx_ops` (registered there, by :func:`build`):

* ``F.scaled_dot_product_attention``, HuggingFace's default ``attn_implementation="sdpa"`` and
  diffusers' attention processor: the IR's ``attention`` op with the keys transposed (a free
  view), ``scale`` (default ``1 / sqrt(E)``, as SDPA computes it), ``is_causal`` and an additive
  mask (a constant boolean mask becomes 0 / -inf). A row that the mask may empty keeps SDPA's 0
  (``masked_rows="zero"``); without a mask, causal only, or with a constant mask that leaves every
  row a key, the op is the one rules 320-325 make, so the two forms meet in the e-graph. Active
  dropout is refused by :func:`~tensor_eqsat.torch.fx_ops.check_sound` (a random op); a
  run-time boolean mask and ``enable_gqa`` with fewer key heads stay opaque.
* ``F.group_norm`` as ``groupnorm``.
* ``F.conv1d`` as a ``conv2d`` over a height of 1 (reshapes around it, the weight viewed as
  ``[O, I, 1, k]``), so the convolution rules apply to it; dilation stays opaque.
* ``torch.roll`` as slices and a concat along each rolled axis (exact: a copy, as roll is).
* ``F.interpolate`` in ``nearest`` (or ``nearest-exact``) mode by a power-of-two factor as a
  reshape, an ``expand`` and a reshape (PyTorch's source index ``floor(dst * in / out)`` is then
  exact in float32); other modes and factors stay opaque.

Every translation is exact; anything else raises :class:`~tensor_eqsat.torch.fx_ops.NotMapped`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tensor_eqsat.torch.fx_ops import (
    NotMapped,
    _arg,
    _const,
    _ir,
    _literal,
    _padded,
    _tensor,
    _torch,
    _value,
)

if TYPE_CHECKING:
    from tensor_eqsat.ir.graph import Tensor
    from tensor_eqsat.torch.fx_import import Value, _Translator


def sdpa_calls() -> tuple[Any, ...]:
    """The spellings of ``scaled_dot_product_attention`` in Dynamo graphs."""
    torch = _torch()
    return (torch.nn.functional.scaled_dot_product_attention, torch._C._nn.scaled_dot_product_attention)


def sdpa_dropout(args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """The ``dropout_p`` argument of an SDPA call (SDPA drops out whatever the module's mode)."""
    return _arg(args, kwargs, 4, "dropout_p", 0.0)


def _additive_mask(
    tr: _Translator, mask_arg: Any, q: Tensor, causal: bool, keys: int
) -> tuple[Tensor | None, bool]:
    """The IR's additive mask for SDPA's ``attn_mask`` and whether it may empty a query row
    (None, False: no mask, or a constant boolean one that masks nothing)."""
    from tensor_eqsat.ir.torch_ops import fully_masked_rows
    from tensor_eqsat.torch.fx_import import Const, Ir

    torch = _torch()
    if mask_arg is None:
        return None, False
    v = _value(tr, mask_arg)
    if isinstance(v, Const) and isinstance(v.value, torch.Tensor):
        m = v.value
        if m.dtype == torch.bool:
            if bool(m.all()):
                return None, False
            # One additive form per mask and dtype in a translation (and one weight), however many
            # attention calls read it; the mask is kept alive with it, so that ids stay unique.
            forms = tr.__dict__.setdefault("_additive_masks", {})
            key = (id(m), q.dtype)
            if key not in forms:
                zeros = torch.zeros(m.shape, dtype=getattr(torch, q.dtype))
                forms[key] = (m, zeros.masked_fill(~m.detach(), float("-inf")))
            m = forms[key][1]
        elif str(m.dtype).removeprefix("torch.") != q.dtype:
            raise NotMapped("a mask of another dtype than the query")
        empties = bool(fully_masked_rows(torch, m.detach().float(), causal, q.shape[-2], keys).any())
        return tr.weight(m), empties
    if isinstance(v, Ir) and v.dtype == torch.bool:
        raise NotMapped("a run-time boolean mask")
    m_t = _tensor(tr, mask_arg)
    if m_t.dtype != q.dtype:
        raise NotMapped("a mask of another dtype than the query")
    return m_t, True


def build() -> None:
    """Register this module's translators in :data:`~tensor_eqsat.torch.fx_ops.TRANSLATORS`."""
    from tensor_eqsat.torch.fx_ops import _register

    torch = _torch()
    F = torch.nn.functional
    g = lambda tr: tr.graph  # noqa: E731

    @_register(*sdpa_calls())
    def _sdpa(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        q, k, v = (_tensor(tr, _arg(args, kw, i, n)) for i, n in enumerate(("query", "key", "value")))
        if _literal(tr, sdpa_dropout(args, kw)) not in (0, 0.0):
            raise NotMapped("dropout")  # check_sound refused it already
        causal = _literal(tr, _arg(args, kw, 5, "is_causal", False))
        scale = _literal(tr, _arg(args, kw, 6, "scale", None))
        gqa = _literal(tr, kw.get("enable_gqa", False))
        if not isinstance(causal, bool) or len(q.shape) < 2 or len(k.shape) != len(q.shape):
            raise NotMapped("unusual SDPA operands")
        if gqa and len(q.shape) >= 3 and q.shape[-3] != k.shape[-3]:
            raise NotMapped("enable_gqa with fewer key heads")
        if scale is None:
            scale = 1.0 / math.sqrt(q.shape[-1])  # SDPA's default, computed in double
        if not isinstance(scale, int | float) or not math.isfinite(scale):
            raise NotMapped("a run-time scale")
        mask, empties = _additive_mask(tr, _arg(args, kw, 3, "attn_mask"), q, causal, k.shape[-2])
        perm = list(range(len(k.shape)))
        perm[-2], perm[-1] = perm[-1], perm[-2]
        ins = [q, g(tr).transpose(k, perm), v] + ([mask] if mask is not None else [])
        rows = "zero" if empties else "nan"  # the same op as the pattern's where no row can empty
        return _ir(g(tr).add("attention", ins, scale=float(scale), causal=causal, masked_rows=rows)[0])

    @_register(F.group_norm, torch.group_norm)
    def _group_norm(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        x = _tensor(tr, args[0])
        groups = int(_literal(tr, _arg(args, kw, 1, "num_groups")))
        w, b = _arg(args, kw, 2, "weight"), _arg(args, kw, 3, "bias")
        eps = float(_literal(tr, _arg(args, kw, 4, "eps", 1e-5)))
        if len(x.shape) < 2:
            raise NotMapped("group norm of a vector")
        c = (x.shape[1],)
        scale = tr.weight(_const(tr, w)) if w is not None else tr.weight(torch.ones(c), "ones")
        bias = tr.weight(_const(tr, b)) if b is not None else tr.weight(torch.zeros(c), "zeros")
        return _ir(g(tr).add("groupnorm", [x, scale, bias], groups=groups, eps=eps)[0])

    @_register(F.conv1d, torch.conv1d)
    def _conv1d(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        x = _tensor(tr, args[0])
        w = _const(tr, _arg(args, kw, 1, "weight"))
        stride = _one(_literal(tr, _arg(args, kw, 3, "stride", 1)))
        dilation = _one(_literal(tr, _arg(args, kw, 5, "dilation", 1)))
        groups = int(_literal(tr, _arg(args, kw, 6, "groups", 1)))
        padding = _literal(tr, _arg(args, kw, 4, "padding", 0))
        if dilation != 1 or len(x.shape) != 3 or w.dim() != 3 or x.shape[1] != groups * w.shape[1]:
            raise NotMapped("dilated, or not a 3-D grouped conv the IR infers")
        n, c, length = x.shape
        x4 = g(tr).reshape(x, (n, c, 1, length))
        pad = padding if isinstance(padding, str) else (0, _one(padding))
        x4, ir_pad = _padded(tr, x4, (1, w.shape[2]), (1, stride), pad, "zero")
        y = g(tr).conv2d(x4, tr.weight(w, "1d", lambda t: t.unsqueeze(2)), stride=(1, stride), padding=ir_pad)
        b = _arg(args, kw, 2, "bias")
        if b is not None:
            y = g(tr).ewadd(y, tr.weight(_const(tr, b), "C11", lambda t: t.reshape(-1, 1, 1)))
        return _ir(g(tr).reshape(y, (y.shape[0], y.shape[1], y.shape[3])))

    @_register(torch.roll, "method:roll")
    def _roll(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        x = _tensor(tr, args[0])
        shifts = _literal(tr, _arg(args, kw, 1, "shifts"))
        dims = _literal(tr, _arg(args, kw, 2, "dims", None))
        if dims is None or dims == () or dims == []:
            raise NotMapped("a roll of the flattened tensor")
        shifts = [shifts] if isinstance(shifts, int) else list(shifts)
        dims = [dims] if isinstance(dims, int) else list(dims)
        if len(shifts) != len(dims) or not all(isinstance(v, int) for v in shifts + dims):
            raise NotMapped("shifts and dims that do not pair up")
        y = x
        for shift, dim in zip(shifts, dims, strict=True):
            axis = dim % len(x.shape)
            size = x.shape[axis]
            s = shift % size
            if s == 0:
                continue
            tail = g(tr).add("slice", [y], axis=axis, start=size - s, end=size, step=1)[0]
            head = g(tr).add("slice", [y], axis=axis, start=0, end=size - s, step=1)[0]
            y = g(tr).concat([tail, head], axis=axis)
        return _ir(y)

    @_register(F.interpolate)
    def _interpolate(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        from tensor_eqsat.torch.fx_import import _example

        x = _tensor(tr, args[0])
        mode = _literal(tr, _arg(args, kw, 3, "mode", "nearest"))
        factor = _literal(tr, _arg(args, kw, 2, "scale_factor", None))
        antialias = _literal(tr, _arg(args, kw, 6, "antialias", False))
        ev = _example(node)
        if mode not in ("nearest", "nearest-exact") or antialias or not isinstance(ev, torch.Tensor):
            raise NotMapped(f"interpolate mode {mode!r}")
        spatial = len(x.shape) - 2
        factors = [int(o) // int(i) for o, i in zip(ev.shape[2:], x.shape[2:], strict=True)]
        if spatial < 1 or any(f * i != o for f, i, o in zip(factors, x.shape[2:], ev.shape[2:], strict=True)):
            raise NotMapped("a non-integer interpolation factor")
        if any(f < 1 or f & (f - 1) for f in factors):
            raise NotMapped("an interpolation factor that is not a power of two")
        if factor is not None:
            given = [factor] * spatial if isinstance(factor, int | float) else list(factor)
            if [float(f) for f in given] != [float(f) for f in factors]:
                raise NotMapped("a scale factor other than the output's ratio")
        n, c = x.shape[0], x.shape[1]
        inner = [d for i in x.shape[2:] for d in (i, 1)]
        wide = [d for i, f in zip(x.shape[2:], factors, strict=True) for d in (i, f)]
        y = g(tr).reshape(x, (n, c, *inner))
        y = g(tr).add("expand", [y], shape=(n, c, *wide))[0]
        return _ir(g(tr).reshape(y, tuple(int(d) for d in ev.shape)))


def _one(v: Any) -> int:
    """A 1-D window argument (an int or a one-element sequence) as an int."""
    if isinstance(v, int):
        return v
    t = tuple(int(x) for x in v)
    if len(t) != 1:
        raise NotMapped("not a 1-D window")
    return t[0]


__all__ = ["build", "sdpa_calls", "sdpa_dropout"]
