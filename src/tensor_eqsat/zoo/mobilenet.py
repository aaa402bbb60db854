"""MobileNet-v2 as TENSAT loads it (``model/mobilenetv2.model``, a TASO export).

Every conv is SAME-padded with no fused activation and no bias, followed by a batch norm (five
inputs: x, scale, bias, mean, var) and, after the stem, expansion and depthwise convs, a ReLU
(not ReLU6). Structure:

* stem conv 3×3/2 → 32;
* 17 inverted-residual blocks: 1×1 expansion (BN, ReLU) → depthwise 3×3/s with weight
  [C, 1, 3, 3] (BN, ReLU) → 1×1 projection (BN), plus ``ewadd(projection, block input)`` when
  s = 1 and the channel count is unchanged;
* conv 1×1 → 1280 (BN, ReLU), average pool over the 7×7 map, conv 1×1 → classes (no BN) and a
  reshape to [batch, classes].

Quirks of the exported file, kept: the first block (expansion factor 1) still has its 1×1
expansion conv, and the stride-2 block of the 64-channel stage is moved to the first block of
the 96-channel stage (Sandler et al. put it at 64). The block table is (expansion t, output
channels c, repeats n, stride s of the first repeat):

    (1, 16, 1, 1) (6, 24, 2, 2) (6, 32, 3, 2) (6, 64, 4, 1) (6, 96, 3, 2) (6, 160, 3, 2) (6, 320, 1, 1)
"""

from __future__ import annotations

from tensor_eqsat.ir.graph import Graph, Tensor
from tensor_eqsat.zoo.params import positive, scaled

BLOCKS: tuple[tuple[int, int, int, int], ...] = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 1),
    (6, 96, 3, 2),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)
"""(expansion, output channels, repeats, first stride) per stage, as in TENSAT's file."""


def _conv_bn(
    g: Graph, x: Tensor, out_channels: int, kernel: int, stride: int, depthwise: bool, relu: bool
) -> Tensor:
    cin_per_group = 1 if depthwise else x.shape[1]
    w = g.weight((out_channels, cin_per_group, kernel, kernel))
    y = g.conv2d(x, w, stride=(stride, stride), padding="same", activation="none")
    scale, bias, mean, var = (g.weight((out_channels,)) for _ in range(4))
    y = g.batchnorm(y, scale, bias, mean, var)
    return g.relu(y) if relu else y


def _inverted_residual(g: Graph, x: Tensor, expansion: int, out_channels: int, stride: int) -> Tensor:
    in_channels = x.shape[1]
    hidden = in_channels * expansion
    t = _conv_bn(g, x, hidden, 1, 1, depthwise=False, relu=True)
    t = _conv_bn(g, t, hidden, 3, stride, depthwise=True, relu=True)
    t = _conv_bn(g, t, out_channels, 1, 1, depthwise=False, relu=False)
    if stride == 1 and in_channels == out_channels:
        t = g.ewadd(t, x)
    return t


def mobilenetv2(*, batch: int = 1, image: int = 224, width_divisor: int = 1, classes: int = 1000) -> Graph:
    """MobileNet-v2 as in TENSAT's ``mobilenetv2.model`` (see the module docstring).

    batch, image: the input is [batch, 3, image, image]. Defaults 1, 224.
    width_divisor: every channel count c (stem 32, block outputs, 1280) becomes
        max(1, c // width_divisor); expansion factors are kept. Default 1.
    classes: output classes. Default 1000.

    Ops at the defaults: 54 conv2d, 53 batchnorm, 36 relu, 10 ewadd, 1 poolavg, 1 reshape;
    output [1, 1000].

    >>> g = mobilenetv2(image=32, width_divisor=8, classes=10)
    >>> g.op_counts()["conv2d"], g.shape_of(g.outputs[0])
    (54, (1, 10))
    """
    positive("mobilenetv2", batch=batch, image=image, width_divisor=width_divisor, classes=classes)
    g = Graph()
    x = g.input((batch, 3, image, image))
    x = _conv_bn(g, x, scaled(32, width_divisor), 3, 2, depthwise=False, relu=True)
    for expansion, channels, repeats, stride in BLOCKS:
        for i in range(repeats):
            x = _inverted_residual(g, x, expansion, scaled(channels, width_divisor), stride if i == 0 else 1)
    x = _conv_bn(g, x, scaled(1280, width_divisor), 1, 1, depthwise=False, relu=True)
    x = g.poolavg(x, kernel=(x.shape[2], x.shape[3]), stride=(1, 1), padding="valid")
    w = g.weight((classes, x.shape[1], 1, 1))
    x = g.conv2d(x, w, stride=(1, 1), padding="same", activation="none")
    g.output(g.reshape(x, (batch, classes)))
    return g
