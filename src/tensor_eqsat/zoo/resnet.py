"""ResNet-50 and ResNeXt-50 as TENSAT builds them (``src/resnet50.rs``, ``src/resnext50.rs``).

Both stack 16 bottleneck blocks in four stages of 3, 4, 6 and 3 blocks; the first block of
stages 2-4 has stride 2, applied in the 3×3 conv and in the projection shortcut. TENSAT's quirks
are kept on purpose, because the paper's tables were measured on exactly these graphs:

* ResNet-50 has **no stem**: the input is the post-stem activation [1, 64, 56, 56], and there is
  no final pool or FC. The output is [1, 2048, 7, 7].
* The projection shortcut (used when the stride is > 1 or the channel count changes) is a
  1×1 conv **with a fused ReLU**, unlike He et al.
* No batch norm; every conv is SAME-padded, the first two of a block with a fused ReLU, the
  third without; the block ends with ``relu(ewadd(shortcut, main))``.
* ResNeXt-50 has the 7×7/2 stem and a 3×3/2 SAME max-pool, widths 128-1024 with 2× expansion
  (not 4×) and a grouped 3×3 conv with 32 groups, the groups implied by its weight
  [width, width/32, 3, 3].

Rejected alternative: the torchvision definitions (batch norm, stem, FC head). They are different
graphs from the ones the paper optimized, so results would not be comparable.
"""

from __future__ import annotations

from collections.abc import Sequence

from tensor_eqsat.ir.graph import Graph, Tensor
from tensor_eqsat.zoo.params import positive, positive_ints, require


def _bottleneck(g: Graph, x: Tensor, width: int, out_channels: int, stride: int, groups: int = 1) -> Tensor:
    """One bottleneck block in TENSAT's op order (weights w1, w2, w3, then the shortcut's w4)."""
    in_channels = x.shape[1]
    w1 = g.weight((width, in_channels, 1, 1))
    t = g.conv2d(x, w1, stride=(1, 1), padding="same", activation="relu")
    w2 = g.weight((width, width // groups, 3, 3))
    t = g.conv2d(t, w2, stride=(stride, stride), padding="same", activation="relu")
    w3 = g.weight((out_channels, width, 1, 1))
    t = g.conv2d(t, w3, stride=(1, 1), padding="same", activation="none")
    shortcut = x
    if stride > 1 or in_channels != out_channels:
        w4 = g.weight((out_channels, in_channels, 1, 1))
        shortcut = g.conv2d(x, w4, stride=(stride, stride), padding="same", activation="relu")
    return g.relu(g.ewadd(shortcut, t))


def _stages(
    g: Graph, x: Tensor, widths: Sequence[int], blocks: Sequence[int], expansion: int, groups: int
) -> Tensor:
    for stage, (width, count) in enumerate(zip(widths, blocks, strict=True)):
        for i in range(count):
            stride = 2 if stage > 0 and i == 0 else 1
            x = _bottleneck(g, x, width, width * expansion, stride, groups)
    return x


def resnet50(
    *,
    batch: int = 1,
    image: int = 56,
    in_channels: int = 64,
    widths: Sequence[int] = (64, 128, 256, 512),
    blocks: Sequence[int] = (3, 4, 6, 3),
) -> Graph:
    """ResNet-50 without its stem, exactly as TENSAT builds it (see the module docstring).

    batch, image: the input is [batch, in_channels, image, image]. Defaults 1, 56.
    in_channels: channels of the (post-stem) input. Default 64.
    widths: bottleneck width of each stage; blocks output 4× the width. Default (64, 128, 256, 512).
    blocks: number of blocks per stage. Default (3, 4, 6, 3).

    Ops at the defaults: 52 conv2d, 16 ewadd, 16 relu; output [1, 2048, 7, 7].

    >>> g = resnet50(image=8, widths=(2, 4), blocks=(1, 1), in_channels=4)
    >>> g.op_counts(), g.shape_of(g.outputs[0])
    ({'conv2d': 8, 'ewadd': 2, 'relu': 2}, (1, 16, 4, 4))
    """
    positive("resnet50", batch=batch, image=image, in_channels=in_channels)
    widths = positive_ints("resnet50", "widths", widths)
    blocks = positive_ints("resnet50", "blocks", blocks, length=len(widths))
    g = Graph()
    x = g.input((batch, in_channels, image, image))
    g.output(_stages(g, x, widths, blocks, expansion=4, groups=1))
    return g


def resnext50(
    *,
    batch: int = 1,
    image: int = 224,
    stem_channels: int = 64,
    widths: Sequence[int] = (128, 256, 512, 1024),
    blocks: Sequence[int] = (3, 4, 6, 3),
    groups: int = 32,
) -> Graph:
    """ResNeXt-50 (32×4d) exactly as TENSAT builds it (see the module docstring).

    batch, image: the input is [batch, 3, image, image]. Defaults 1, 224.
    stem_channels: output channels of the 7×7/2 stem conv. Default 64.
    widths: width of each stage's grouped 3×3 conv; blocks output 2× the width.
        Default (128, 256, 512, 1024).
    blocks: number of blocks per stage. Default (3, 4, 6, 3).
    groups: groups of the 3×3 conv; must divide every width. Default 32.

    Ops at the defaults: 53 conv2d, 1 poolmax, 16 ewadd, 16 relu; output [1, 2048, 7, 7].

    >>> g = resnext50(image=16, stem_channels=4, widths=(4, 8), blocks=(1, 1), groups=2)
    >>> g.op_counts(), g.shape_of(g.outputs[0])
    ({'conv2d': 9, 'poolmax': 1, 'ewadd': 2, 'relu': 2}, (1, 16, 2, 2))
    """
    positive("resnext50", batch=batch, image=image, stem_channels=stem_channels, groups=groups)
    widths = positive_ints("resnext50", "widths", widths)
    blocks = positive_ints("resnext50", "blocks", blocks, length=len(widths))
    for width in widths:
        require("resnext50", width % groups == 0, f"groups {groups} must divide every width, not {width}")
    g = Graph()
    x = g.input((batch, 3, image, image))
    w = g.weight((stem_channels, 3, 7, 7))
    x = g.conv2d(x, w, stride=(2, 2), padding="same", activation="relu")
    x = g.poolmax(x, kernel=(3, 3), stride=(2, 2), padding="same")
    g.output(_stages(g, x, widths, blocks, expansion=2, groups=groups))
    return g
