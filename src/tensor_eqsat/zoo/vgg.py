"""VGG-19 as TENSAT loads it (``model/vgg.model``, a TASO export).

* 16 conv 3×3 SAME, no fused activation and no bias (the file's bias weights are unused and
  omitted here), each followed by a ReLU: 64, 64 | 128, 128 | 256 ×4 | 512 ×4 | 512 ×4, with a
  2×2/2 VALID max-pool after each group;
* reshape to [batch, 512·h·w], then three FC layers, each ``matmul(x, transpose(W, (1, 0)))``
  with W stored as [out, in] (the PyTorch layout, transposed in the graph, a quirk kept because
  transposing a weight is a rewrite opportunity), no bias: 4096 → ReLU → dropout → reshape →
  4096 → ReLU → dropout → reshape → classes. The reshapes after the dropouts do not change the
  shape; they are in the file and kept.
"""

from __future__ import annotations

from tensor_eqsat.ir.graph import Graph, Tensor
from tensor_eqsat.zoo.params import positive, require, scaled

CONFIG: tuple[int | str, ...] = (
    64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M",
)  # fmt: skip
"""VGG-19's conv channels, "M" for a max-pool."""


def _fc(g: Graph, x: Tensor, out_features: int) -> Tensor:
    w = g.weight((out_features, x.shape[1]))
    return g.matmul(x, g.transpose(w, (1, 0)))


def vgg(
    *, batch: int = 1, image: int = 224, width_divisor: int = 1, fc: int = 4096, classes: int = 1000
) -> Graph:
    """VGG-19 as in TENSAT's ``vgg.model`` (see the module docstring).

    batch, image: the input is [batch, 3, image, image]; image must be a multiple of 32.
        Defaults 1, 224.
    width_divisor: every conv channel count c becomes max(1, c // width_divisor). Default 1.
    fc: width of the two hidden FC layers. Default 4096.
    classes: output classes. Default 1000.

    Ops at the defaults: 16 conv2d, 18 relu, 5 poolmax, 3 reshape, 3 transpose, 3 matmul,
    2 dropout; output [1, 1000].

    >>> g = vgg(image=32, width_divisor=16, fc=8, classes=10)
    >>> g.shape_of(g.outputs[0])
    (1, 10)
    """
    positive("vgg", batch=batch, image=image, width_divisor=width_divisor, fc=fc, classes=classes)
    require("vgg", image % 32 == 0, f"image must be a multiple of 32, got {image}")
    g = Graph()
    x = g.input((batch, 3, image, image))
    for item in CONFIG:
        if item == "M":
            x = g.poolmax(x, kernel=(2, 2), stride=(2, 2), padding="valid")
            continue
        assert isinstance(item, int)
        w = g.weight((scaled(item, width_divisor), x.shape[1], 3, 3))
        x = g.relu(g.conv2d(x, w, stride=(1, 1), padding="same", activation="none"))
    _, c, h, w_ = x.shape
    x = g.reshape(x, (batch, c * h * w_))
    for _ in range(2):
        x = g.dropout(g.relu(_fc(g, x, fc)))
        x = g.reshape(x, (batch, fc))
    g.output(_fc(g, x, classes))
    return g
