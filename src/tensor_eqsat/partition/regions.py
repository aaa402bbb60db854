"""A region of a partitioned graph as a graph of its own, and its structural key (issue 29).

A region is a run of the activation order (:mod:`tensor_eqsat.partition.cuts`). Its graph is
*canonical*: the tensors it reads from the rest of the graph (and graph inputs) become inputs
named ``in0``, ``in1``, ... in order of first use; the weights it reads become weights named
``w0``, ``w1``, ... in order of first use, each with its shape; weight-only sub-expressions that
feed it (a pre-transposed weight, a constant mask) are copied in, as every region may recompute
them; its outputs are the tensors the rest of the graph reads, and graph outputs, in order.
Two regions with the same canonical graph are the same block up to weight values (same ops,
attributes, shapes and wiring, the same pattern of shared weights), so the :attr:`Region.key`,
a hash of that graph, finds repeated blocks, and one optimized canonical graph serves every copy
once its ``in``/``w`` leaves are bound to the copy's own tensors and weights
(:mod:`tensor_eqsat.partition.stitch`).

Rewrites never look at weight values, so an optimization of one copy is valid for every copy.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tensor_eqsat.ir.graph import Graph, TensorRef
from tensor_eqsat.ir.ops import get_op
from tensor_eqsat.ir.opspec import Attrs

INPUT_PREFIX = "in"
WEIGHT_PREFIX = "w"
OPAQUE = "opaque"


@dataclass(frozen=True)
class Region:
    """One region of a partition.

    index: its place in the partition (regions are in topological order).
    nodes: the original graph's activation node ids it holds, in order.
    inputs: the original tensors bound to its inputs ``in0``, ``in1``, ...
    weights: the original weight node ids bound to its weights ``w0``, ``w1``, ...
    outputs: the original tensors its outputs stand for, in the order of its graph's outputs.
    graph: the canonical region graph (module docstring).
    key: a hash of the canonical graph: equal keys, same block up to weight values.
    """

    index: int
    nodes: tuple[int, ...]
    inputs: tuple[TensorRef, ...]
    weights: tuple[int, ...]
    outputs: tuple[TensorRef, ...]
    graph: Graph = field(repr=False, compare=False)
    key: str = ""


class ReaderIndex:
    """Where each tensor of ``graph`` is read: by which activation positions of ``order``, and
    whether it is a graph output. Built once per partition."""

    def __init__(self, graph: Graph, order: Sequence[int]) -> None:
        self.position = {nid: i for i, nid in enumerate(order)}
        self.readers: dict[TensorRef, list[int]] = {}
        for i, nid in enumerate(order):
            for ref in graph.nodes[nid].inputs:
                self.readers.setdefault(ref, []).append(i)
        self.graph_outputs = set(graph.outputs)

    def read_outside(self, ref: TensorRef, start: int, stop: int) -> bool:
        """Whether ``ref`` is a graph output or is read at a position outside ``[start, stop)``."""
        if ref in self.graph_outputs:
            return True
        return any(not start <= p < stop for p in self.readers.get(ref, ()))


def build_region(
    graph: Graph,
    order: Sequence[int],
    start: int,
    stop: int,
    weight_only: set[int],
    index: ReaderIndex,
    number: int = 0,
) -> Region:
    """The region holding ``order[start:stop]`` (see the module docstring).

    >>> g = Graph()
    >>> x = g.input((2, 4), name="x")
    >>> y = g.matmul(x, g.weight((4, 4), name="a"))
    >>> g.output(g.matmul(y, g.weight((4, 4), name="b")))
    >>> from tensor_eqsat.partition.cuts import activation_order, weight_only_nodes
    >>> order, fixed = activation_order(g), weight_only_nodes(g)
    >>> index = ReaderIndex(g, order)
    >>> first, second = (build_region(g, order, i, i + 1, fixed, index) for i in (0, 1))
    >>> first.key == second.key, [g.name_of(w) for w in second.weights], second.inputs
    (True, ['b'], ((2, 0),))
    """
    nodes = tuple(order[start:stop])
    inside = set(nodes)
    rg = Graph()
    inputs: list[TensorRef] = []
    weights: list[int] = []
    local: dict[TensorRef, TensorRef] = {}

    def bind(ref: TensorRef) -> TensorRef:
        got = local.get(ref)
        if got is not None:
            return got
        nid = ref[0]
        node = graph.nodes[nid]
        if nid in weight_only:
            if node.op == "weight":
                t = rg.weight(node.shapes[0], name=f"{WEIGHT_PREFIX}{len(weights)}", dtype=node.dtypes[0])
                weights.append(nid)
                local[(nid, 0)] = t.ref
                return t.ref
            # a weight-only sub-expression: copied in (its inputs first, iteratively)
            _copy_constant(graph, nid, rg, local, weights, weight_only)
            return local[ref]
        if nid in inside:  # pragma: no cover - the order is topological
            raise AssertionError(f"node {nid} is read before it is made")
        t = rg.input(graph.shape_of(ref), name=f"{INPUT_PREFIX}{len(inputs)}", dtype=graph.dtype_of(ref))
        inputs.append(ref)
        local[ref] = t.ref
        return t.ref

    for nid in nodes:
        node = graph.nodes[nid]
        refs = [bind(r) for r in node.inputs]
        outs = rg.add_node(node.op, node.attrs, refs)
        for k, t in enumerate(outs):
            local[(nid, k)] = t.ref
    outputs = [
        (nid, k)
        for nid in nodes
        for k in range(len(graph.nodes[nid].shapes))
        if index.read_outside((nid, k), start, stop)
    ]
    for ref in outputs:
        rg.outputs.append(local[ref])
    return Region(number, nodes, tuple(inputs), tuple(weights), tuple(outputs), rg, structural_key(rg))


def _copy_constant(
    graph: Graph,
    root: int,
    rg: Graph,
    local: dict[TensorRef, TensorRef],
    weights: list[int],
    weight_only: set[int],
) -> None:
    """Copy the weight-only node ``root`` and what it reads into ``rg`` (post-order)."""
    stack = [(root, 0)]
    while stack:
        nid, i = stack[-1]
        node = graph.nodes[nid]
        if (nid, 0) in local:
            stack.pop()
            continue
        if node.op == "weight":
            t = rg.weight(node.shapes[0], name=f"{WEIGHT_PREFIX}{len(weights)}", dtype=node.dtypes[0])
            weights.append(nid)
            local[(nid, 0)] = t.ref
            stack.pop()
            continue
        if i < len(node.inputs):
            stack[-1] = (nid, i + 1)
            src = node.inputs[i][0]
            if (src, 0) not in local:
                stack.append((src, 0))
            continue
        stack.pop()
        outs = rg.add_node(node.op, node.attrs, [local[r] for r in node.inputs])
        for k, t in enumerate(outs):
            local[(nid, k)] = t.ref


def structural_key(graph: Graph) -> str:
    """A hash of a canonical region graph: its nodes (op, attributes, inputs) in order and its
    outputs. Leaf names are positional symbols in a canonical graph, so the key is the same for
    blocks that differ only in their weights' values and names; an ``opaque`` node counts by
    its payload without the ONNX node's name and metadata (an export names every layer's node
    apart).

    >>> a, b = Graph(), Graph()
    >>> for g in (a, b):
    ...     g.output(g.relu(g.input((2, 3), name="in0")))
    >>> structural_key(a) == structural_key(b)
    True
    """
    text = repr([(n.op, _canonical_attrs(n.op, n.attrs), n.inputs) for n in graph.nodes]) + repr(
        graph.outputs
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def opaque_attrs(graph: Graph) -> list[Attrs]:
    """The attributes of ``graph``'s ``opaque`` nodes, in order: rewrites never change them, so
    the k-th of one copy's region graph stands for the k-th of another's."""
    return [n.attrs for n in graph.nodes if n.op == OPAQUE]


def _canonical_attrs(op: str, attrs: Attrs) -> Any:
    if op != OPAQUE:
        return attrs
    at = get_op(OPAQUE).attr_names.index("payload")
    return (*attrs[:at], _payload_digest(attrs[at]), *attrs[at + 1 :])


@functools.lru_cache(maxsize=4096)
def _payload_digest(payload: str) -> str:
    """A hash of an opaque payload with its node's name, doc string and metadata (an exporter's
    source location) cleared."""
    try:
        from tensor_eqsat.io.opaque import decode_payload

        model = decode_payload(payload)
    except Exception:  # no onnx, or not a model: the payload as it is
        return hashlib.sha256(payload.encode()).hexdigest()
    for node in model.graph.node:
        node.name = ""
        node.doc_string = ""
        node.ClearField("metadata_props")
    return hashlib.sha256(model.SerializeToString(deterministic=True)).hexdigest()
