"""Stitching: the optimized regions put back together into one ordinary Graph (issue 29).

Each region's optimized canonical graph (:mod:`tensor_eqsat.partition.regions`) is copied into
the result once per copy of the region, its ``in``\\ *k* inputs bound to the copy's input tensors
(already stitched) and its ``w``\\ *j* weights to the copy's own weights, so weight-only
sub-expressions the optimizer made (a concatenation of Q, K and V weights) are recomputed from
each copy's weights. Graph inputs keep their names and order, weights their names and data, so
the result runs on the original's inputs and weights and is priced like any graph.

The optimized graph of a block is its first copy's: ``opaque`` nodes (operators kept from an
ONNX import, which rewrites never change) take each copy's own attributes back, the k-th opaque
node of the first copy's region standing for the k-th of the copy's.

Nodes are hash-consed as they are added: two identical nodes on the same inputs become one (a
weight-only expression two regions both recompute, as when an RNN's steps share weights).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tensor_eqsat.errors import GraphError
from tensor_eqsat.ir.graph import Graph, TensorRef
from tensor_eqsat.partition.regions import INPUT_PREFIX, OPAQUE, WEIGHT_PREFIX, Region, opaque_attrs


class _Builder:
    """A Graph under construction whose nodes are hash-consed."""

    def __init__(self, source: Graph) -> None:
        self.source = source
        self.graph = Graph()
        self.memo: dict[tuple[str, Any, tuple[TensorRef, ...]], tuple[TensorRef, ...]] = {}
        self.leaf: dict[int, TensorRef] = {}
        for node in source.inputs():  # every input, in order: the signature is the original's
            self.leaf_ref(node.id)

    def leaf_ref(self, nid: int) -> TensorRef:
        """The result's tensor for the original input or weight ``nid`` (added on first use)."""
        got = self.leaf.get(nid)
        if got is None:
            node = self.source.nodes[nid]
            got = self.graph.add_node(node.op, node.attrs, ())[0].ref
            if node.op == "weight":
                name = self.source.name_of(nid)
                if name in self.source.weight_data:
                    self.graph.weight_data[name] = self.source.weight_data[name]
            self.leaf[nid] = got
        return got

    def add(self, op: str, attrs: Any, inputs: Sequence[TensorRef]) -> tuple[TensorRef, ...]:
        key = (op, attrs, tuple(inputs))
        got = self.memo.get(key)
        if got is None:
            got = tuple(t.ref for t in self.graph.add_node(op, attrs, inputs))
            self.memo[key] = got
        return got

    def constant(self, ref: TensorRef) -> TensorRef:
        """Copy the original weight-only tensor ``ref`` (its sub-graph, post-order)."""
        done: dict[int, tuple[TensorRef, ...]] = {}
        stack = [(ref[0], 0)]
        while stack:
            nid, i = stack[-1]
            node = self.source.nodes[nid]
            if node.spec.is_leaf:
                done[nid] = (self.leaf_ref(nid),)
                stack.pop()
                continue
            if i < len(node.inputs):
                stack[-1] = (nid, i + 1)
                if node.inputs[i][0] not in done:
                    stack.append((node.inputs[i][0], 0))
                continue
            stack.pop()
            done[nid] = self.add(node.op, node.attrs, [done[s][k] for s, k in node.inputs])
        return done[ref[0]][ref[1]]


def stitch(source: Graph, regions: Sequence[Region], optimized: Mapping[str, Graph]) -> Graph:
    """The graph made of ``optimized[region.key]`` for every region of ``source``, in order.

    optimized: region key -> an optimized canonical graph of the first region with that key (the
        same outputs in the same order; it may read fewer inputs and weights).

    Raises GraphError when an optimized graph has a leaf that is not one of its region's
    symbols, or an output count that differs from its region's.

    >>> g = Graph()
    >>> x = g.input((2, 4), name="x")
    >>> g.output(g.relu(g.relu(x)))
    >>> from tensor_eqsat.partition.plan import partition_graph
    >>> part = partition_graph(g, target=1)
    >>> len(part.regions), len(part.distinct())
    (2, 1)
    >>> out = stitch(g, part.regions, {k: rs[0].graph for k, rs in part.distinct().items()})
    >>> out.op_counts()
    {'relu': 2}
    """
    b = _Builder(source)
    value: dict[TensorRef, TensorRef] = {}
    first: dict[str, Region] = {}
    for region in regions:
        first.setdefault(region.key, region)

    def original(ref: TensorRef) -> TensorRef:
        got = value.get(ref)
        if got is not None:
            return got
        if source.nodes[ref[0]].op == "input":
            return b.leaf_ref(ref[0])
        return b.constant(ref)  # weight-only: recomputed here

    for region in regions:
        opt = optimized[region.key]
        if len(opt.outputs) != len(region.outputs):
            raise GraphError(
                f"region {region.index}: the optimized graph has {len(opt.outputs)} outputs, "
                f"the region {len(region.outputs)}"
            )
        env: dict[TensorRef, TensorRef] = {}
        # the optimized graph is the first copy's: its opaque nodes get this copy's attributes back
        own = dict(zip(opaque_attrs(first[region.key].graph), opaque_attrs(region.graph), strict=True))
        for node in opt.nodes:
            if node.spec.is_leaf:
                env[(node.id, 0)] = _bind_leaf(opt, node.id, region, original, b)
                continue
            attrs = own.get(node.attrs, node.attrs) if node.op == OPAQUE else node.attrs
            outs = b.add(node.op, attrs, [env[r] for r in node.inputs])
            for k, ref in enumerate(outs):
                env[(node.id, k)] = ref
        for ref, got in zip(region.outputs, opt.outputs, strict=True):
            value[ref] = env[got]
    for ref in source.outputs:
        b.graph.outputs.append(original(ref))
    return b.graph


def _bind_leaf(opt: Graph, nid: int, region: Region, original: Any, b: _Builder) -> TensorRef:
    """The stitched tensor a leaf of an optimized region graph stands for."""
    name = opt.name_of(nid)
    op = opt.nodes[nid].op
    prefix, count = (
        (INPUT_PREFIX, len(region.inputs)) if op == "input" else (WEIGHT_PREFIX, len(region.weights))
    )
    index = name[len(prefix) :]
    if not name.startswith(prefix) or not index.isdigit() or int(index) >= count:
        raise GraphError(f"region {region.index}: optimized graph has {op} {name!r}, not one of the region's")
    if op == "input":
        return original(region.inputs[int(index)])
    return b.leaf_ref(region.weights[int(index)])
