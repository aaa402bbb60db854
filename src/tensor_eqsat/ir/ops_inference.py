"""Operators that inference rewrites introduce: the batch-norm folding weight transforms
``bnfold_weight`` and ``bnfold_bias``, and fused scaled dot-product ``attention``.

Batch norm in inference is an affine map per channel, ``y = (x - mean) * s + bias`` with
``s = scale / sqrt(var + eps)``. Folded into the convolution or product before it, the weight's
output channels are multiplied by ``s`` and a bias ``bias - mean * s`` is added
(``docs/rules.md``, rules 300-303). The two transforms compute in float64 and round to float32
once, so a folded weight differs from the exact product by at most half an ulp (the rule
verifier compares against the unfolded graph computed in float32). They are weight transforms:
on weights they cost nothing and are precomputed when the graph is loaded, executed or
exported (DESIGN decision 4).

``attention(q, kt, v[, mask])`` is ``softmax(q @ kt * scale / divisor [+ mask]) @ v`` along the
last axis, with the keys given transposed (``kt``: ``[..., d, S]``), as the product in the
attention patterns of real models reads them: rules 320-325 replace the five ops of that
pattern with this one op, which PyTorch runs as ``F.scaled_dot_product_attention`` (one fused
kernel). ``scale`` and ``divisor`` are both kept, since patterns write ``x * s`` or ``x / d`` and
rule attributes cannot take reciprocals. The mask may broadcast against the scores but not
enlarge them (PyTorch's ``attn_mask`` contract).

Alternatives rejected: a conv2d with an optional bias input (it would change the arity of an op
that 139 TASO rules, every importer and every cost table read; a bias add after a conv is two
kernels in eager PyTorch on CUDA anyway, and Inductor unfuses it to fuse it with what follows);
a batch-norm fold written with existing ops only (the IR has no square root, and a chain of ops
would round the folded weight several times); an attention op taking ``k`` untransposed (the
rules would then need a transpose on their right-hand side to undo the one the pattern read).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tensor_eqsat.errors import ShapeError
from tensor_eqsat.ir.ops_common import A, fmt_shape
from tensor_eqsat.ir.opspec import AttrSpec, OpSpec
from tensor_eqsat.ir.symbolic import broadcast_shapes
from tensor_eqsat.ir.types import OpKind, Shape, volume

SPECS: list[OpSpec] = []
"""This family's ops, in registration order (:mod:`tensor_eqsat.ir.ops` registers them)."""


def _eps_attr() -> AttrSpec:
    return AttrSpec("eps", "float", default=1e-5, check=lambda v: v >= 0, check_msg="must be >= 0")


def _channel_vectors(op: str, shapes: Sequence[Shape], names: Sequence[str], c: int) -> None:
    for name, s in zip(names, shapes, strict=True):
        if tuple(s) != (c,):
            raise ShapeError(op, f"{name} must have shape ({c},) for {c} channels", shapes)


def bn_multiplier(scale: np.ndarray, var: np.ndarray, eps: float) -> np.ndarray:
    """``scale / sqrt(var + eps)`` in float64: the per-channel factor of an inference batch norm.

    >>> bn_multiplier(np.array([2.0], np.float32), np.array([3.0], np.float32), 1.0).tolist()
    [1.0]
    """
    return scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps)


def _fold_weight_infer(shapes: Sequence[Shape], a: A) -> tuple[Shape, ...]:
    w = shapes[0]
    axis = a["axis"]
    if not 0 <= axis < len(w):
        raise ShapeError("bnfold_weight", f"axis {axis} out of range for rank {len(w)}", shapes, attr="axis")
    _channel_vectors("bnfold_weight", shapes[1:], ("scale", "var"), w[axis])
    return (tuple(w),)


def _fold_weight(x: Sequence[np.ndarray], a: A) -> tuple[np.ndarray, ...]:
    w, scale, var = x
    shape = [1] * w.ndim
    shape[a["axis"]] = -1
    out = w.astype(np.float64) * bn_multiplier(scale, var, a["eps"]).reshape(shape)
    return (out.astype(np.float32),)


SPECS.append(
    OpSpec(
        name="bnfold_weight",
        inputs=("weight", "scale", "var"),
        attrs=(AttrSpec("axis", "int", check=lambda v: v >= 0, check_msg="must be >= 0"), _eps_attr()),
        infer=_fold_weight_infer,
        compute=_fold_weight,
        flops=lambda ins, outs, a: 2 * volume(outs[0]),
        kind=OpKind.WEIGHT_TRANSFORM,
        positive_inputs=frozenset({2}),
        doc="weight * scale / sqrt(var + eps) along one axis (batch norm folded into a weight)",
    )
)


def _fold_bias_infer(shapes: Sequence[Shape], a: A) -> tuple[Shape, ...]:
    s = shapes[0]
    if len(s) != 1:
        raise ShapeError("bnfold_bias", f"scale must be a vector, got shape {fmt_shape(s)}", shapes)
    _channel_vectors("bnfold_bias", shapes, ("scale", "bias", "mean", "var"), s[0])
    return (tuple(s),)


def _fold_bias(x: Sequence[np.ndarray], a: A) -> tuple[np.ndarray, ...]:
    scale, bias, mean, var = x
    out = bias.astype(np.float64) - mean.astype(np.float64) * bn_multiplier(scale, var, a["eps"])
    return (out.astype(np.float32),)


SPECS.append(
    OpSpec(
        name="bnfold_bias",
        inputs=("scale", "bias", "mean", "var"),
        attrs=(_eps_attr(),),
        infer=_fold_bias_infer,
        compute=_fold_bias,
        flops=lambda ins, outs, a: 4 * volume(outs[0]),
        kind=OpKind.WEIGHT_TRANSFORM,
        positive_inputs=frozenset({3}),
        doc="bias - mean * scale / sqrt(var + eps) (the bias a folded batch norm leaves)",
    )
)


def _broadcast(shapes: Sequence[Shape], *parts: Shape) -> Shape:
    try:
        return broadcast_shapes(*parts)
    except ValueError:
        raise ShapeError("attention", "batch dims are not broadcastable", shapes) from None


def _attention_infer(shapes: Sequence[Shape], a: A) -> tuple[Shape, ...]:
    if len(shapes) > 4:
        raise ShapeError(
            "attention", f"takes q, kt, v and an optional mask, got {len(shapes)} inputs", shapes
        )
    q, kt, v = shapes[0], shapes[1], shapes[2]
    if min(len(q), len(kt), len(v)) < 2:
        raise ShapeError("attention", "q, kt and v need rank >= 2", shapes)
    if q[-1] != kt[-2]:
        raise ShapeError("attention", f"q's features {q[-1]} differ from kt's {kt[-2]}", shapes)
    if kt[-1] != v[-2]:
        raise ShapeError("attention", f"kt's {kt[-1]} keys differ from v's {v[-2]}", shapes)
    scores = _broadcast(shapes, tuple(q[:-2]), tuple(kt[:-2])) + (q[-2], kt[-1])
    if len(shapes) == 4 and _broadcast(shapes, scores, tuple(shapes[3])) != scores:
        raise ShapeError("attention", f"the mask enlarges the scores {fmt_shape(scores)}", shapes)
    batch = _broadcast(shapes, scores[:-2], tuple(v[:-2]))
    return (batch + (q[-2], v[-1]),)


def attention_numpy(
    q: np.ndarray, kt: np.ndarray, v: np.ndarray, mask: np.ndarray | None, scale: float, divisor: float
) -> np.ndarray:
    """``softmax(q @ kt * scale / divisor + mask) @ v`` in float32, op by op as the pattern it
    replaces computes it."""
    s = np.matmul(q, kt).astype(np.float32)
    if scale != 1.0:
        s = (s * np.float32(scale)).astype(np.float32)
    if divisor != 1.0:
        s = (s / np.float32(divisor)).astype(np.float32)
    if mask is not None:
        s = (s + mask).astype(np.float32)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    p = (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)
    return np.matmul(p, v).astype(np.float32)


def _attention(x: Sequence[np.ndarray], a: A) -> tuple[np.ndarray, ...]:
    mask = x[3] if len(x) == 4 else None
    return (attention_numpy(x[0], x[1], x[2], mask, a["scale"], a["divisor"]),)


def _attention_flops(ins: Sequence[Shape], outs: Sequence[Shape], a: A) -> int:
    q, kt = ins[0], ins[1]
    scores = volume(outs[0][:-2]) * q[-2] * kt[-1]
    # Two products, plus scaling, masking and the softmax (5 per score) in one pass.
    return 2 * scores * q[-1] + 2 * scores * outs[0][-1] + 7 * scores


SPECS.append(
    OpSpec(
        name="attention",
        inputs=("qkvm",),
        attrs=(
            AttrSpec("scale", "float", default=1.0),
            AttrSpec("divisor", "float", default=1.0, check=lambda v: v != 0.0, check_msg="must be non-zero"),
        ),
        infer=_attention_infer,
        compute=_attention,
        flops=_attention_flops,
        kind=OpKind.GEMM,
        variadic=True,
        min_inputs=3,
        doc="scaled dot-product attention softmax(q @ kt * scale / divisor [+ mask]) @ v, one kernel",
    )
)
