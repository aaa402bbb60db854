"""Group normalization, the norm of diffusion models' UNets and VAEs (issue 45): ``groupnorm``.

``groupnorm(x, scale, bias)`` splits the ``C`` channels of ``x`` (``[N, C, *]``) into ``groups``
groups of ``C / groups`` consecutive channels, normalizes each (sample, group) over its channels
and spatial positions with the biased variance, then scales and shifts each channel:
``F.group_norm`` / ``nn.GroupNorm``. Accumulates in float64 and rounds once (as ``layernorm``).

An op of its own rather than a decomposition into means and element-wise ops: one kernel in
every runtime, priced as one pass, and a convolution feeding it stays a plain ``conv2d`` that
the conv rules match. A convolution's per-channel bias does not fold through it (it shifts the
channels of one group by different amounts), so no rule rewrites it; what matters is that the
block around it is priced and the rules reach the convolutions and projections beside it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tensor_eqsat.errors import ShapeError
from tensor_eqsat.ir.ops_common import A, out_volume_flops
from tensor_eqsat.ir.opspec import AttrSpec, OpSpec
from tensor_eqsat.ir.types import OpKind, Shape

SPECS: list[OpSpec] = []
"""This family's ops, in registration order (:mod:`tensor_eqsat.ir.ops` registers them)."""


def _groupnorm_infer(shapes: Sequence[Shape], a: A) -> tuple[Shape, ...]:
    x = shapes[0]
    if len(x) < 2:
        raise ShapeError("groupnorm", f"input must have rank >= 2, got rank {len(x)}", shapes)
    c, groups = x[1], a["groups"]
    if c % groups:
        raise ShapeError(
            "groupnorm", f"{c} channels do not split into {groups} groups", shapes, attr="groups"
        )
    for name, s in zip(("scale", "bias"), shapes[1:], strict=True):
        if tuple(s) != (c,):
            raise ShapeError("groupnorm", f"{name} must have shape ({c},) for {c} channels", shapes)
    return (tuple(x),)


def groupnorm_numpy(
    x: np.ndarray, scale: np.ndarray, bias: np.ndarray, groups: int, eps: float
) -> np.ndarray:
    """Group normalization of ``x`` (``[N, C, *]``) in float64, rounded to float32 once.

    >>> x = np.arange(8, dtype=np.float32).reshape(1, 4, 2)
    >>> y = groupnorm_numpy(x, np.ones(4, np.float32), np.zeros(4, np.float32), 2, 0.0)
    >>> y[0, :2].astype(np.float64).round(3).tolist()
    [[-1.342, -0.447], [0.447, 1.342]]
    """
    n, c = x.shape[0], x.shape[1]
    d = x.astype(np.float64).reshape(n, groups, -1)
    mean = d.mean(axis=-1, keepdims=True)
    var = ((d - mean) ** 2).mean(axis=-1, keepdims=True)
    y = ((d - mean) / np.sqrt(var + eps)).reshape(x.shape)
    per_channel = (1, c) + (1,) * (x.ndim - 2)
    out = y * scale.astype(np.float64).reshape(per_channel) + bias.astype(np.float64).reshape(per_channel)
    return out.astype(np.float32)


SPECS.append(
    OpSpec(
        name="groupnorm",
        inputs=("x", "scale", "bias"),
        attrs=(
            AttrSpec("groups", "int", check=lambda v: v >= 1, check_msg="must be >= 1"),
            AttrSpec("eps", "float", default=1e-5, check=lambda v: v >= 0, check_msg="must be >= 0"),
        ),
        infer=_groupnorm_infer,
        compute=lambda x, a: (groupnorm_numpy(x[0], x[1], x[2], a["groups"], a["eps"]),),
        flops=out_volume_flops(8),
        kind=OpKind.REDUCTION,
        doc="group normalization over channel groups and spatial dims, with per-channel scale and bias",
    )
)
