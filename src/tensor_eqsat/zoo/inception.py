"""Inception-v3 as TENSAT loads it (``model/inceptionv3.model``, a TASO export).

TENSAT does not build Inception-v3 in code; it parses a graph TASO exported from its
``examples/inceptionv3.py`` at batch 1. This builder reproduces that file op for op (a test
compares the two structurally when the file is available):

* every conv has a fused ReLU and no bias or batch norm; padding follows TASO's rule (VALID
  where the Keras/PyTorch model has no padding, SAME elsewhere), including a VALID 1×1 conv in
  the stem;
* stem: 3×3/2 V 32, 3×3 V 32, 3×3 S 64, maxpool 3×3/2 V, 1×1 V 80, 3×3 V 192, maxpool 3×3/2 V;
* 3 × InceptionA (pool features 32, 64, 64), InceptionB, 4 × InceptionC (c7 = 128, 160, 160,
  192), InceptionD, 2 × InceptionE, then an average pool over the whole 8×8 map; no FC.

Quirks of the exported file, kept: InceptionB's pool branch is an **average** pool (Szegedy et
al. use max), InceptionE's pool branch is a 3×3/1 SAME **max** pool (they use average), the
pool activations stored in the file are dropped (TENSAT's parser ignores them), and branches are
joined as concat(concat(b1, b2), concat(b3, b4)) (27 binary concats, one 3-way, two 4-way).
"""

from __future__ import annotations

from tensor_eqsat.ir.graph import Graph, Tensor
from tensor_eqsat.zoo.params import positive, require, scaled


class _Builder:
    """Conv/pool helpers bound to one graph and one width divisor."""

    def __init__(self, g: Graph, width_divisor: int) -> None:
        self.g = g
        self.div = width_divisor

    def conv(
        self, x: Tensor, channels: int, kernel: tuple[int, int], stride: int = 1, pad: str = "same"
    ) -> Tensor:
        w = self.g.weight((scaled(channels, self.div), x.shape[1], *kernel))
        return self.g.conv2d(x, w, stride=(stride, stride), padding=pad, activation="relu")

    def avgpool(self, x: Tensor, stride: int, pad: str) -> Tensor:
        return self.g.poolavg(x, kernel=(3, 3), stride=(stride, stride), padding=pad)

    def maxpool(self, x: Tensor, stride: int, pad: str) -> Tensor:
        return self.g.poolmax(x, kernel=(3, 3), stride=(stride, stride), padding=pad)

    def cat(self, *xs: Tensor) -> Tensor:
        return self.g.concat(xs, axis=1)

    def block_a(self, x: Tensor, pool_features: int) -> Tensor:
        b1 = self.conv(x, 64, (1, 1))
        b5 = self.conv(self.conv(x, 48, (1, 1)), 64, (5, 5))
        b3 = self.conv(self.conv(self.conv(x, 64, (1, 1)), 96, (3, 3)), 96, (3, 3))
        bp = self.conv(self.avgpool(x, 1, "same"), pool_features, (1, 1))
        return self.cat(self.cat(b1, b5), self.cat(b3, bp))

    def block_b(self, x: Tensor) -> Tensor:
        b3 = self.conv(x, 384, (3, 3), stride=2, pad="valid")
        bd = self.conv(self.conv(self.conv(x, 64, (1, 1)), 96, (3, 3)), 96, (3, 3), stride=2, pad="valid")
        bp = self.avgpool(x, 2, "valid")
        return self.cat(bp, self.cat(b3, bd))

    def block_c(self, x: Tensor, c7: int) -> Tensor:
        b1 = self.conv(x, 192, (1, 1))
        b7 = self.conv(self.conv(self.conv(x, c7, (1, 1)), c7, (1, 7)), 192, (7, 1))
        bd = self.conv(x, c7, (1, 1))
        for channels, kernel in ((c7, (7, 1)), (c7, (1, 7)), (c7, (7, 1)), (192, (1, 7))):
            bd = self.conv(bd, channels, kernel)
        bp = self.conv(self.avgpool(x, 1, "same"), 192, (1, 1))
        return self.cat(self.cat(b1, b7), self.cat(bd, bp))

    def block_d(self, x: Tensor) -> Tensor:
        b3 = self.conv(self.conv(x, 192, (1, 1)), 320, (3, 3), stride=2, pad="valid")
        b7 = self.conv(self.conv(self.conv(x, 192, (1, 1)), 192, (1, 7)), 192, (7, 1))
        b7 = self.conv(b7, 192, (3, 3), stride=2, pad="valid")
        bp = self.maxpool(x, 2, "valid")
        return self.cat(b3, b7, bp)

    def block_e(self, x: Tensor) -> Tensor:
        b1 = self.conv(x, 320, (1, 1))
        b3 = self.conv(x, 384, (1, 1))
        b3 = self.cat(self.conv(b3, 384, (1, 3)), self.conv(b3, 384, (3, 1)))
        bd = self.conv(self.conv(x, 448, (1, 1)), 384, (3, 3))
        bd = self.cat(self.conv(bd, 384, (1, 3)), self.conv(bd, 384, (3, 1)))
        bp = self.conv(self.maxpool(x, 1, "same"), 192, (1, 1))
        return self.cat(b1, b3, bd, bp)


def inceptionv3(*, batch: int = 1, image: int = 299, width_divisor: int = 1) -> Graph:
    """Inception-v3 as in TENSAT's ``inceptionv3.model`` (see the module docstring).

    batch, image: the input is [batch, 3, image, image]; image must be at least 75 so that every
    VALID conv and pool fits. Defaults 1, 299.
    width_divisor: every channel count c becomes max(1, c // width_divisor). Default 1.

    Ops at the defaults: 94 conv2d, 9 poolavg, 5 poolmax, 30 concat; output [1, 2048, 1, 1].

    >>> g = inceptionv3(image=75, width_divisor=16)
    >>> g.shape_of(g.outputs[0])
    (1, 128, 1, 1)
    """
    positive("inceptionv3", batch=batch, image=image, width_divisor=width_divisor)
    require("inceptionv3", image >= 75, f"image must be >= 75 for the VALID convs and pools, got {image}")
    g = Graph()
    b = _Builder(g, width_divisor)
    x = g.input((batch, 3, image, image))
    x = b.conv(x, 32, (3, 3), stride=2, pad="valid")
    x = b.conv(x, 32, (3, 3), pad="valid")
    x = b.conv(x, 64, (3, 3))
    x = b.maxpool(x, 2, "valid")
    x = b.conv(x, 80, (1, 1), pad="valid")
    x = b.conv(x, 192, (3, 3), pad="valid")
    x = b.maxpool(x, 2, "valid")
    for pool_features in (32, 64, 64):
        x = b.block_a(x, pool_features)
    x = b.block_b(x)
    for c7 in (128, 160, 160, 192):
        x = b.block_c(x, c7)
    x = b.block_d(x)
    x = b.block_e(x)
    x = b.block_e(x)
    x = g.poolavg(x, kernel=(x.shape[2], x.shape[3]), stride=(1, 1), padding="valid")
    g.output(x)
    return g
