"""Wall time of the numpy reference interpreter on a ResNet-50-sized graph.

The graph is ResNet-50 (He et al. 2016, torchvision layout) at batch 1 on a 224x224 input: the
stem (7x7/2 conv, batchnorm, relu, 3x3/2 max pool), 16 bottleneck blocks in stages of 3, 4, 6
and 3 (1x1 -> 3x3 (stride on the 3x3) -> 1x1 with expansion 4, a projection shortcut on the first
block of each stage), global average pooling and the 1000-way classifier: 25.6 M parameters and
4.1 G multiply-adds (8.2 GFLOPs as the cost models count them). With ``--grouped`` the 3x3 convs
become 32-group convs (ResNeXt-50 32x4d), exercising the grouped-conv path; ``--depthwise`` makes
them depthwise.

The builder lives here rather than in the model zoo so the benchmark measures the interpreter
alone. Usage::

    PYTHONPATH=src python benchmarks/interpreter.py [--runs 5] [--grouped | --depthwise]

It prints the median (and min/max) wall time of ``run(graph, seed=0)`` over ``--runs`` runs,
after one untimed warm-up run.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from tensor_eqsat.ir.graph import Graph, Tensor
from tensor_eqsat.ir.interpreter import run


def _conv_bn(
    g: Graph,
    x: Tensor,
    cout: int,
    kernel: int,
    stride: int,
    relu: bool,
    groups: int = 1,
) -> Tensor:
    w = g.weight((cout, x.shape[1] // groups, kernel, kernel))
    y = g.conv2d(x, w, stride=(stride, stride), padding="same")
    bn = [g.weight((cout,)) for _ in range(4)]
    y = g.batchnorm(y, *bn)
    return g.relu(y) if relu else y


def _bottleneck(g: Graph, x: Tensor, width: int, stride: int, groups: int) -> Tensor:
    """One bottleneck block; ``groups`` of the 3x3 conv (0: depthwise). ResNet's expansion is 4,
    ResNeXt's 2 (its widths are doubled)."""
    out_ch = width * 4 if groups == 1 else width * 2
    mid = _conv_bn(g, x, width, 1, 1, relu=True)
    mid = _conv_bn(g, mid, width, 3, stride, relu=True, groups=width if groups == 0 else groups)
    mid = _conv_bn(g, mid, out_ch, 1, 1, relu=False)
    short = x if x.shape[1] == out_ch and stride == 1 else _conv_bn(g, x, out_ch, 1, stride, relu=False)
    return g.relu(g.ewadd(mid, short))


def resnet50(*, groups: int = 1) -> Graph:
    """ResNet-50 at batch 1 (``groups=32``: ResNeXt-50 32x4d; ``groups=0``: depthwise 3x3)."""
    g = Graph()
    x = g.input((1, 3, 224, 224), name="image")
    y = _conv_bn(g, x, 64, 7, 2, relu=True)
    y = g.poolmax(y, kernel=(3, 3), stride=(2, 2), padding="same")
    widths = (64, 128, 256, 512) if groups == 1 else (128, 256, 512, 1024)
    for stage, (blocks, width) in enumerate(zip((3, 4, 6, 3), widths, strict=True)):
        for b in range(blocks):
            stride = 2 if stage > 0 and b == 0 else 1
            y = _bottleneck(g, y, width, stride, groups)
    y = g.poolavg(y, kernel=(7, 7), stride=(1, 1), padding="valid")
    y = g.reshape(y, (1, -1))
    fc = g.weight((y.shape[1], 1000))
    y = g.ewadd(g.matmul(y, fc), g.weight((1, 1000)))
    g.output(y)
    return g


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs (default 5)")
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument("--grouped", action="store_true", help="32-group 3x3 convs (ResNeXt-50 32x4d)")
    kind.add_argument("--depthwise", action="store_true", help="depthwise 3x3 convs")
    args = parser.parse_args()

    groups = 32 if args.grouped else 0 if args.depthwise else 1
    t0 = time.perf_counter()
    g = resnet50(groups=groups)
    build = time.perf_counter() - t0
    flops = sum(n.spec.flop_count([g.shape_of(r) for r in n.inputs], n.attrs) for n in g.nodes)
    name = {1: "resnet50", 32: "resnext50_32x4d", 0: "resnet50-depthwise"}[groups]
    print(
        f"{name}: {len(g.nodes)} nodes, {g.num_parameters() / 1e6:.1f} M parameters, "
        f"{flops / 1e9:.2f} GFLOPs, built in {build * 1e3:.0f} ms"
    )

    (out,) = run(g, seed=0)  # warm-up (and a sanity check on the result)
    if out.shape != (1, 1000) or not np.all(np.isfinite(out)):
        raise SystemExit(f"unexpected output: shape {out.shape}, finite {np.all(np.isfinite(out))}")
    times = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        run(g, seed=0)
        times.append(time.perf_counter() - t0)
    print(
        f"interpreter median {statistics.median(times):.3f} s over {args.runs} runs "
        f"(min {min(times):.3f}, max {max(times):.3f})"
    )


if __name__ == "__main__":
    main()
