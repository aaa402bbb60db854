"""NASNet-A as TENSAT builds it (``src/nasneta.rs``, after TASO's ``examples/nasnet_a.py``).

Stem conv 7×7/2 (ReLU) and max-pool 3×3/2 SAME, then 3 stages; each stage runs 5 normal cells
of width C and a reduction cell of width 2C, for C = 128, 256, 512. Within a stage ``prev`` and
``cur`` both start as the stage input and then shift through the cell outputs.

Helpers (all convs SAME):

* squeeze(x, C) = conv 1×1 to C channels with ReLU;
* fit(prev, cur') = squeeze(prev, channels of cur'). TENSAT also has a 3×3/2 branch for a
  ``prev`` of a different resolution, but ``prev`` and ``cur`` always share a resolution in this
  network, so that branch is unreachable and omitted;
* sep(x, C, k, s) = a depthwise conv k×k/s (weight [C, C_in/C, k, k], no activation), then a
  1×1 conv, no activation.

Normal cell: cur' = squeeze(cur), prev' = fit(prev); five adds sep3(cur') + cur',
sep3(prev') + sep3(cur'), avgpool3(cur') + prev', avgpool3(prev') + avgpool3(prev'),
sep3(prev') + sep3(prev'); concatenated on channels (5C).

Reduction cell: o0 = sep7/2(prev') + sep5/2(cur'); o1 = maxpool3/2(cur') + sep7/2(prev');
o2 = avgpool3/2(cur') + sep5/2(prev'); o3 = maxpool3/2(cur') + sep3(o0);
o4 = avgpool3(o0) + o1; concatenated (5·2C).

As in TENSAT, the two identical ``avgpool(prev')`` of a normal cell and the two identical
``maxpool(cur')`` of a reduction cell are separate nodes here (51 poolavg and 7 poolmax in
total); an e-graph hash-conses them into one, exactly as TENSAT's did.
"""

from __future__ import annotations

from tensor_eqsat.ir.graph import Graph, Tensor
from tensor_eqsat.zoo.params import positive


def _squeeze(g: Graph, out_channels: int, x: Tensor) -> Tensor:
    w = g.weight((out_channels, x.shape[1], 1, 1))
    return g.conv2d(x, w, stride=(1, 1), padding="same", activation="relu")


def _fit(g: Graph, cur: Tensor, x: Tensor) -> Tensor:
    if x.shape[2] != cur.shape[2]:  # the network never produces this case (module docstring)
        raise AssertionError(f"nasneta: prev {x.shape} and cur {cur.shape} differ in resolution")
    return _squeeze(g, cur.shape[1], x)


def _sep(g: Graph, x: Tensor, out_channels: int, kernel: int, stride: int) -> Tensor:
    w1 = g.weight((out_channels, x.shape[1] // out_channels, kernel, kernel))
    t = g.conv2d(x, w1, stride=(stride, stride), padding="same", activation="none")
    w2 = g.weight((out_channels, t.shape[1], 1, 1))
    return g.conv2d(t, w2, stride=(1, 1), padding="same", activation="none")


def _avgpool(g: Graph, x: Tensor, stride: int) -> Tensor:
    return g.poolavg(x, kernel=(3, 3), stride=(stride, stride), padding="same")


def _maxpool(g: Graph, x: Tensor, stride: int) -> Tensor:
    return g.poolmax(x, kernel=(3, 3), stride=(stride, stride), padding="same")


def _normal_cell(g: Graph, prev: Tensor, cur: Tensor, oc: int) -> Tensor:
    cur = _squeeze(g, oc, cur)
    prev = _fit(g, cur, prev)
    t = [
        _sep(g, cur, oc, 3, 1),
        cur,
        _sep(g, prev, oc, 3, 1),
        _sep(g, cur, oc, 3, 1),
        _avgpool(g, cur, 1),
        prev,
        _avgpool(g, prev, 1),
        _avgpool(g, prev, 1),
        _sep(g, prev, oc, 3, 1),
        _sep(g, prev, oc, 3, 1),
    ]
    outs = [g.ewadd(t[2 * i], t[2 * i + 1]) for i in range(5)]
    return g.concat(outs, axis=1)


def _reduction_cell(g: Graph, prev: Tensor, cur: Tensor, oc: int) -> Tensor:
    cur = _squeeze(g, oc, cur)
    prev = _fit(g, cur, prev)
    a, b = _sep(g, prev, oc, 7, 2), _sep(g, cur, oc, 5, 2)
    o0 = g.ewadd(a, b)
    a, b = _maxpool(g, cur, 2), _sep(g, prev, oc, 7, 2)
    o1 = g.ewadd(a, b)
    a, b = _avgpool(g, cur, 2), _sep(g, prev, oc, 5, 2)
    o2 = g.ewadd(a, b)
    a, b = _maxpool(g, cur, 2), _sep(g, o0, oc, 3, 1)
    o3 = g.ewadd(a, b)
    o4 = g.ewadd(_avgpool(g, o0, 1), o1)
    return g.concat([o0, o1, o2, o3, o4], axis=1)


def nasneta(
    *,
    batch: int = 1,
    image: int = 224,
    stem_channels: int = 64,
    channels: int = 128,
    stages: int = 3,
    normal_cells: int = 5,
) -> Graph:
    """NASNet-A as TENSAT builds it (see the module docstring).

    batch, image: the input is [batch, 3, image, image]. Defaults 1, 224.
    stem_channels: output channels of the 7×7/2 stem conv. Default 64.
    channels: normal-cell width C of the first stage; it doubles every stage. Default 128.
    stages: stages (normal cells + one reduction cell each). Default 3.
    normal_cells: normal cells per stage. Default 5.

    Ops at the defaults: 217 conv2d, 51 poolavg, 7 poolmax, 90 ewadd, 18 concat (5 inputs each);
    output [1, 5120, 7, 7].

    >>> g = nasneta(image=16, stem_channels=4, channels=2, stages=1, normal_cells=1)
    >>> g.shape_of(g.outputs[0])
    (1, 20, 2, 2)
    """
    positive(
        "nasneta",
        batch=batch,
        image=image,
        stem_channels=stem_channels,
        channels=channels,
        stages=stages,
        normal_cells=normal_cells,
    )
    g = Graph()
    x = g.input((batch, 3, image, image))
    w = g.weight((stem_channels, 3, 7, 7))
    x = g.conv2d(x, w, stride=(2, 2), padding="same", activation="relu")
    x = _maxpool(g, x, 2)
    oc = channels
    for _ in range(stages):
        prev = cur = x
        for _ in range(normal_cells):
            prev, cur = cur, _normal_cell(g, prev, cur, oc)
        oc *= 2
        x = _reduction_cell(g, prev, cur, oc)
    g.output(x)
    return g
