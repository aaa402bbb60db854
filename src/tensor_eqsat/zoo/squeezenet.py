"""SqueezeNet 1.1 as TENSAT loads it (``model/squeezenet.model``, a TASO export).

Every conv has no fused activation and no bias (the file's 26 bias weights are unused and
omitted here); each is followed by a separate ReLU. Structure:

* conv 3×3/2 VALID → 64, ReLU, max-pool 3×3/2 VALID;
* fire2, fire3 (squeeze 16, expand 64 + 64), max-pool, fire4, fire5 (32, 128 + 128), max-pool,
  fire6, fire7 (48, 192 + 192), fire8, fire9 (64, 256 + 256); every max-pool is 3×3/2 VALID;
* a fire module is 1×1 squeeze → ReLU → {1×1 expand, 3×3 SAME expand}, each → ReLU, concatenated
  on channels (1×1 first);
* dropout → conv 1×1 → classes → ReLU → average pool over the whole map (kernel = stride =
  map size, VALID) → reshape [batch, classes].
"""

from __future__ import annotations

from tensor_eqsat.ir.graph import Graph, Tensor
from tensor_eqsat.zoo.params import positive, require, scaled

FIRES: tuple[tuple[int, int], ...] = (
    (16, 64),
    (16, 64),
    (32, 128),
    (32, 128),
    (48, 192),
    (48, 192),
    (64, 256),
    (64, 256),
)
"""(squeeze, expand) channels of fire2 .. fire9."""

_POOL_BEFORE = (2, 4)
"""Indexes into FIRES before which a max-pool sits (besides the one after conv1)."""


def _conv_relu(
    g: Graph, x: Tensor, out_channels: int, kernel: int, stride: int = 1, pad: str = "same"
) -> Tensor:
    w = g.weight((out_channels, x.shape[1], kernel, kernel))
    return g.relu(g.conv2d(x, w, stride=(stride, stride), padding=pad, activation="none"))


def _fire(g: Graph, x: Tensor, squeeze: int, expand: int) -> Tensor:
    s = _conv_relu(g, x, squeeze, 1)
    w1 = g.weight((expand, squeeze, 1, 1))
    e1 = g.conv2d(s, w1, stride=(1, 1), padding="same", activation="none")
    w3 = g.weight((expand, squeeze, 3, 3))
    e3 = g.conv2d(s, w3, stride=(1, 1), padding="same", activation="none")
    return g.concat([g.relu(e1), g.relu(e3)], axis=1)


def _maxpool(g: Graph, x: Tensor) -> Tensor:
    return g.poolmax(x, kernel=(3, 3), stride=(2, 2), padding="valid")


def squeezenet(*, batch: int = 1, image: int = 224, width_divisor: int = 1, classes: int = 1000) -> Graph:
    """SqueezeNet 1.1 as in TENSAT's ``squeezenet.model`` (see the module docstring).

    batch, image: the input is [batch, 3, image, image]; image must be at least 31 so that the
    VALID conv and pools fit. Defaults 1, 224.
    width_divisor: every channel count c becomes max(1, c // width_divisor). Default 1.
    classes: output classes. Default 1000.

    Ops at the defaults: 26 conv2d, 26 relu, 8 concat, 3 poolmax, 1 poolavg, 1 dropout,
    1 reshape; output [1, 1000].

    >>> g = squeezenet(image=31, width_divisor=16, classes=10)
    >>> g.shape_of(g.outputs[0])
    (1, 10)
    """
    positive("squeezenet", batch=batch, image=image, width_divisor=width_divisor, classes=classes)
    require("squeezenet", image >= 31, f"image must be >= 31 for the VALID conv and pools, got {image}")
    g = Graph()
    x = g.input((batch, 3, image, image))
    x = _conv_relu(g, x, scaled(64, width_divisor), 3, stride=2, pad="valid")
    x = _maxpool(g, x)
    for i, (squeeze, expand) in enumerate(FIRES):
        if i in _POOL_BEFORE:
            x = _maxpool(g, x)
        x = _fire(g, x, scaled(squeeze, width_divisor), scaled(expand, width_divisor))
    x = g.dropout(x)
    x = _conv_relu(g, x, classes, 1)
    x = g.poolavg(x, kernel=(x.shape[2], x.shape[3]), stride=(x.shape[2], x.shape[3]), padding="valid")
    g.output(g.reshape(x, (batch, classes)))
    return g
