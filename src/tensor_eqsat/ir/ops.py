"""Definitions of every operator (TASO/TENSAT semantics plus what transformers and ONNX need).

Layout is NCHW, dtype float32. Shape rules follow TASO (../reference/taso.md §1.2):

* conv2d / pools, SAME padding: output ``ceil(H / s)``; total padding
  ``max(k - s, 0)`` if ``H % s == 0`` else ``max(k - H % s, 0)``, split as ``total // 2`` before and
  the rest after (TensorFlow's and ONNX's SAME_UPPER). VALID: ``(H - k) // s + 1``.
* conv2d groups are implied by the weight: ``groups = C_in / weight.shape[1]``.
* element-wise binary ops broadcast like NumPy; matmul contracts the last two dims and broadcasts
  the leading (batch) dims like ``numpy.matmul`` (TASO required equal ranks; we accept the NumPy
  superset so that ONNX MatMul imports unchanged).
* avg-pool excludes padding from the mean (cuDNN's COUNT_EXCLUDE_PADDING, ONNX's default).
* ``merge`` is TASO's merge_gconv made exact: the weight of a conv with ``groups`` groups is widened
  so the same conv runs with ``groups // count`` groups. TASO derived the slot of each output
  channel from the weight alone, which is only right when ``groups == count``; the group count is
  therefore an attribute here.

Attributes are canonical: axes are non-negative and reshape targets fully resolved. The graph
builder accepts negative axes and ``-1``/``0`` in reshape targets and canonicalizes them first.

``opaque`` holds an ONNX operator the IR does not model (made by the ONNX importer): its
attributes carry the op type and domain, a ``payload`` (a base64 single-node ONNX model with the
node's attributes and small constant inputs), and the input and output shapes from ONNX shape
inference. Rules match ops by name, so no rule ever rewrites it; its numpy semantics run the
payload in onnxruntime, imported lazily.

The ops are defined by family, one module each, and registered here in a fixed order (the
order of :func:`op_names`): ``ops_leaf`` (input, weight), ``ops_elementwise``, ``ops_reduction``
(softmax, layernorm), ``ops_matmul``, ``ops_window`` (conv2d, pools), ``ops_weights`` (enlarge,
merge), ``ops_layout`` (concat, split, reshape, transpose, dropout, noop), ``ops_opaque``, then
the ops of today's inference graphs (issue 33): ``ops_activation`` (silu, hardsigmoid,
hardswish, clip, pow, rsqrt), ``ops_extent`` (pad, slice, expand, mean) and ``ops_inference``
(bnfold_weight, bnfold_bias, attention: what inference rewrites introduce), then ``ops_dtype``
(cast: reduced-precision graphs' float32 islands, issue 34), then ``ops_norm`` (groupnorm: the
models as loaded, issue 45); shared helpers live
in ``ops_common``. A family module only lists its OpSpecs, so importing one directly cannot
change the registration order. To add an op, append its OpSpec to its family's
``SPECS`` (or add a family module to ``_FAMILIES``).
"""

from __future__ import annotations

from tensor_eqsat.ir import (
    ops_activation,
    ops_dtype,
    ops_elementwise,
    ops_extent,
    ops_inference,
    ops_layout,
    ops_leaf,
    ops_matmul,
    ops_norm,
    ops_opaque,
    ops_reduction,
    ops_weights,
    ops_window,
)
from tensor_eqsat.ir.ops_opaque import decode_shapes, encode_shapes
from tensor_eqsat.ir.ops_window import conv2d_numpy, one_clipped_window, same_padding, window_out
from tensor_eqsat.ir.opspec import OpSpec, all_ops, lookup, register

_FAMILIES = (
    ops_leaf,
    ops_elementwise,
    ops_reduction,
    ops_matmul,
    ops_window,
    ops_weights,
    ops_layout,
    ops_opaque,
    ops_activation,
    ops_extent,
    ops_inference,
    ops_dtype,
    ops_norm,
)

for _family in _FAMILIES:
    for _spec in _family.SPECS:
        register(_spec)


def get_op(name: str) -> OpSpec:
    """The OpSpec called ``name`` (raises GraphError listing the known ops).

    >>> get_op("matmul").inputs
    ('a', 'b')
    """
    return lookup(name)


def op_names() -> list[str]:
    """Names of every registered op, in registration order."""
    return [s.name for s in all_ops()]


__all__ = [
    "conv2d_numpy",
    "decode_shapes",
    "encode_shapes",
    "get_op",
    "one_clipped_window",
    "op_names",
    "same_padding",
    "window_out",
]
