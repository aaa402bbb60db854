"""Transformer building blocks shared by the ViT and Transformer-Transducer builders.

Activations are [batch, tokens, width]. Dense layers are ``matmul(x, W[in, out])`` plus a bias
added by broadcasting ``ewadd`` with a [out] weight. Attention keeps Q, K and V as three separate
matmuls (as in the original ViT code and in TENSAT's BERT): fusing them into one [in, 3·out]
matmul is exactly the kind of rewrite the optimizer should discover, so the input graph must not
pre-empt it.

Multi-head attention splits heads with reshape [B, T, h, d_k] and transpose (0, 2, 1, 3); K is
transposed (0, 2, 3, 1) so that ``Q·Kᵀ`` is one batched matmul. Two positional schemes:

* none here (ViT adds a learned position embedding to the tokens before the first block);
* Transformer-XL relative positions (Dai et al. 2019, used by the Transformer-Transducer):
  ``logits = (Q + u)·Kᵀ + shift((Q + v)·P)``, where P is the projection of sinusoidal encodings
  of the 2T-1 relative distances T-1 .. -(T-1) and ``shift`` aligns entry (i, j) with distance
  i - j. The shift is the usual pad-reshape-slice trick, expressed with concat (of a zero
  weight), reshape and split (see :func:`relative_shift`).

Masks are additive float weights (0 where attending is allowed, -1e9 elsewhere) that carry their
data in the graph; an encoder creates its mask and relative-position constants once and shares
them across its layers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tensor_eqsat.ir.graph import Graph, Tensor

MASKED = -1e9
"""Additive logit for a masked position: exp underflows to 0 in float32, and no NaN arises."""


def dense(g: Graph, x: Tensor, out_features: int, name: str, *, bias: bool = True) -> Tensor:
    """``x·W + b`` on the last axis, W [in, out] named ``{name}.weight``, b [out] ``{name}.bias``."""
    w = g.weight((x.shape[-1], out_features), name=f"{name}.weight")
    y = g.matmul(x, w)
    if bias:
        y = g.ewadd(y, g.weight((out_features,), name=f"{name}.bias"))
    return y


def layer_norm(g: Graph, x: Tensor, name: str, eps: float) -> Tensor:
    """Layer norm over the last axis with scale and bias weights [width]."""
    width = x.shape[-1]
    scale = g.weight((width,), name=f"{name}.scale")
    bias = g.weight((width,), name=f"{name}.bias")
    return g.layernorm(x, scale, bias, axis=-1, eps=eps)


def split_heads(g: Graph, x: Tensor, heads: int, perm: tuple[int, int, int, int] = (0, 2, 1, 3)) -> Tensor:
    """[B, T, h·d] → reshape [B, T, h, d] → transpose ``perm`` (default [B, h, T, d])."""
    b, t, width = x.shape
    return g.transpose(g.reshape(x, (b, t, heads, width // heads)), perm)


def merge_heads(g: Graph, x: Tensor) -> Tensor:
    """[B, h, T, d] → transpose (0, 2, 1, 3) → reshape [B, T, h·d]."""
    b, h, t, d = x.shape
    return g.reshape(g.transpose(x, (0, 2, 1, 3)), (b, t, h * d))


def sinusoid(positions: np.ndarray, width: int) -> np.ndarray:
    """Sinusoidal encodings (Vaswani et al.) of the given positions, [len(positions), width].

    >>> sinusoid(np.array([0.0]), 4).tolist()
    [[0.0, 1.0, 0.0, 1.0]]
    """
    half = np.arange(0, width, 2, dtype=np.float64)
    freq = np.exp(-math.log(10000.0) * half / width)
    angles = positions.astype(np.float64)[:, None] * freq[None, :]
    out = np.zeros((len(positions), width), dtype=np.float64)
    out[:, 0::2] = np.sin(angles)
    out[:, 1::2] = np.cos(angles)[:, : width // 2]
    return out.astype(np.float32)


def relative_shift(g: Graph, x: Tensor, zero: Tensor) -> Tensor:
    """Align relative-position logits: [..., T, 2T-1] indexed by distance → [..., T, T].

    Column c of row i of ``x`` holds the logit for relative distance (T-1) - c; the result's
    entry (i, j) is ``x[..., i, (T-1) - i + j]``, the logit for distance i - j. Implemented as
    Transformer-XL's pad-reshape-slice: concat ``zero`` (a [..., T, 1] zero weight) in front
    ([..., T, 2T]), view as [..., 2T, T], drop the first row, view as [..., T, 2T-1] and keep
    the first T columns. Needs T >= 2 (the final split would otherwise be empty).

    >>> g = Graph()
    >>> x = g.input((2, 3))
    >>> g.output(relative_shift(g, x, g.weight((2, 1), data=np.zeros((2, 1)))))
    >>> from tensor_eqsat.ir.interpreter import run
    >>> run(g, {"input_0": np.array([[1, 2, 3], [4, 5, 6]])})[0].tolist()
    [[2.0, 3.0], [4.0, 5.0]]
    """
    *lead, t, cols = x.shape
    if cols != 2 * t - 1 or t < 2 or zero.shape != (*lead, t, 1):
        raise ValueError(
            f"relative_shift needs x [..., T, 2T-1] with T >= 2 and zero [..., T, 1], "
            f"got {x.shape} and {zero.shape}"
        )
    y = g.concat([zero, x], axis=-1)
    y = g.reshape(y, (*lead, 2 * t, t))
    y = g.split(y, axis=len(lead), sizes=(1, 2 * t - 1))[1]
    y = g.reshape(y, (*lead, t, 2 * t - 1))
    return g.split(y, axis=len(lead) + 1, sizes=(t, t - 1))[0]


@dataclass(frozen=True)
class RelativePositions:
    """Constants shared by every relative-attention layer of one encoder.

    encodings: sinusoidal encodings of distances T-1 .. -(T-1), [2T-1, D] (each layer projects
        them with its own weight, as in Transformer-XL).
    zero: the [B, h, T, 1] zero column :func:`relative_shift` pads with.
    """

    encodings: Tensor
    zero: Tensor

    @classmethod
    def create(
        cls, g: Graph, batch: int, heads: int, length: int, width: int, name: str
    ) -> RelativePositions:
        """Add the two constant weights (``{name}.pos_enc`` and ``{name}.shift_pad``) to ``g``."""
        distances = np.arange(length - 1, -length, -1, dtype=np.float64)
        enc = g.weight((2 * length - 1, width), name=f"{name}.pos_enc", data=sinusoid(distances, width))
        shape = (batch, heads, length, 1)
        zero = g.weight(shape, name=f"{name}.shift_pad", data=np.zeros(shape, dtype=np.float32))
        return cls(enc, zero)


def band_mask(length: int, left: int | None, right: int | None) -> np.ndarray:
    """Additive mask [T, T]: query i may attend key j iff i - left <= j <= i + right.

    None means unlimited on that side; ``right=0`` is a causal mask.

    >>> band_mask(3, None, 0).tolist() == [[0, -1e9, -1e9], [0, 0, -1e9], [0, 0, 0]]
    True
    """
    i = np.arange(length)[:, None]
    j = np.arange(length)[None, :]
    allowed = np.ones((length, length), dtype=bool)
    if left is not None:
        allowed &= j >= i - left
    if right is not None:
        allowed &= j <= i + right
    return np.where(allowed, 0.0, MASKED).astype(np.float32)


def self_attention(
    g: Graph,
    x: Tensor,
    heads: int,
    name: str,
    *,
    mask: Tensor | None = None,
    relative: RelativePositions | None = None,
    scale_query: bool = True,
) -> Tensor:
    """Multi-head self-attention on x [B, T, D] with biased Q/K/V/output projections.

    heads: attention heads; must divide D.
    mask: an additive [T, T] mask (see :func:`band_mask`), or None.
    relative: add Transformer-XL relative-position logits (see the module docstring), or None.
    scale_query: divide Q by √d_k before the product (the original ViT code); otherwise divide
        the logits (Transformer-XL and ESPnet). Same function class, different cost.
    """
    width = x.shape[-1]
    d_k = width // heads
    root = math.sqrt(d_k)
    q = split_heads(g, dense(g, x, width, f"{name}.query"), heads)
    k = split_heads(g, dense(g, x, width, f"{name}.key"), heads, perm=(0, 2, 3, 1))
    v = split_heads(g, dense(g, x, width, f"{name}.value"), heads)
    if scale_query:
        q = g.sdiv(q, root)
    if relative is not None:
        u = g.weight((heads, 1, d_k), name=f"{name}.pos_bias_u")
        logits = g.matmul(g.ewadd(q, u), k)
        p = g.matmul(relative.encodings, g.weight((width, width), name=f"{name}.pos.weight"))
        p = g.transpose(g.reshape(p, (p.shape[0], heads, d_k)), (1, 2, 0))  # [h, d_k, 2T-1]
        v_bias = g.weight((heads, 1, d_k), name=f"{name}.pos_bias_v")
        pos = g.matmul(g.ewadd(q, v_bias), p)
        logits = g.ewadd(logits, relative_shift(g, pos, relative.zero))
    else:
        logits = g.matmul(q, k)
    if not scale_query:
        logits = g.sdiv(logits, root)
    if mask is not None:
        logits = g.ewadd(logits, mask)
    attn = g.softmax(logits, axis=-1)
    out = merge_heads(g, g.matmul(attn, v))
    return dense(g, out, width, f"{name}.out")
