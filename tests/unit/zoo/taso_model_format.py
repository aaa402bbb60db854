"""Test helpers: a reader for TASO's .model export format and structural fingerprints, so a zoo
builder can be compared node for node with the file TENSAT loads."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

from tensor_eqsat.ir.graph import Graph, Tensor

# TASO OpType codes that appear in TENSAT's .model files (../shared/reference/tensat.md §6.2).
_INPUT, _WEIGHT, _CONV, _DROPOUT, _MAXPOOL, _AVGPOOL, _RELU = 0, 1, 3, 4, 6, 7, 8
_BATCHNORM, _CONCAT, _RESHAPE, _TRANSPOSE, _ADD, _MATMUL = 11, 12, 14, 15, 16, 18
_PADDING = {0: "same", 1: "valid"}
_ACTIVATION = {0: "none", 1: "sigmoid", 2: "relu", 3: "tanh"}


def read_taso_model(path: Path) -> Graph:
    """Build a Graph from a TASO ``.model`` file the way TENSAT's ``parse_model`` does.

    As in TENSAT: pool activations are dropped, pools' placeholder weights are ignored, unused
    weights stay in the graph (dead), matmul activations are NONE, and the last op is the root.
    """
    lines = path.read_text().split("\n")
    g = Graph()
    tensors: dict[int, Tensor] = {}
    last: Tensor | None = None
    i = 0
    while i + 3 < len(lines) and lines[i].strip():
        guid, op = int(lines[i]), int(lines[i + 1])
        deps = [tensors.get(int(d.split(":")[0])) for d in lines[i + 2].split(",")]
        params = [int(p) for p in lines[i + 3].split(",")]
        where = f"{path.name}: op {guid} (type {op})"
        i += 4
        if op == _INPUT:
            t = g.input(params)
        elif op == _WEIGHT:
            t = g.weight(params)
        elif op == _CONV:
            stride, pad, act = (params[8], params[9]), _PADDING[params[10]], _ACTIVATION[params[11]]
            t = g.conv2d(deps[0], deps[1], stride=stride, padding=pad, activation=act)
        elif op in (_MAXPOOL, _AVGPOOL):
            pool = g.poolmax if op == _MAXPOOL else g.poolavg
            t = pool(deps[0], kernel=params[5:7], stride=params[7:9], padding=_PADDING[params[9]])
        elif op == _RELU:
            t = g.relu(deps[0])
        elif op == _DROPOUT:
            t = g.dropout(deps[0])
        elif op == _BATCHNORM:
            t = g.batchnorm(*deps)
        elif op == _CONCAT:
            t = g.concat(deps, axis=params[0])
        elif op == _RESHAPE:
            t = g.reshape(deps[0], params)
        elif op == _TRANSPOSE:
            t = g.transpose(deps[0], params[1 : 1 + params[0]])
        elif op == _ADD:
            t = g.ewadd(deps[0], deps[1])
        elif op == _MATMUL:
            t = g.matmul(deps[0], deps[1])
        else:
            raise AssertionError(f"{where}: op type not handled by this reader")
        tensors[guid] = t
        if op not in (_INPUT, _WEIGHT):
            last = t
    assert last is not None, f"{path}: no ops"
    g.output(last)
    return g


def fingerprints(graph: Graph) -> Counter[str]:
    """Multiset of structural hashes of the nodes the outputs depend on.

    A node's hash covers its op, attributes and its inputs' hashes (in order); leaves hash to
    their kind and shape, so weight and input names do not matter. Two graphs have equal
    multisets iff they are the same DAG up to renaming and node order (barring hash collisions).
    """
    digest: dict[int, str] = {}
    for n in graph.nodes:
        if n.spec.is_leaf:
            key = repr((n.op, n.shapes[0]))
        else:
            key = repr((n.op, n.attrs, [(digest[src], idx) for src, idx in n.inputs]))
        digest[n.id] = hashlib.sha256(key.encode()).hexdigest()
    live = graph.live_nodes()
    return Counter(digest[i] for i in live)


def conv_signatures(graph: Graph) -> Counter[tuple]:
    """Multiset of (input shape, weight shape, stride, padding, activation) over live convs."""
    live = graph.live_nodes()
    out: Counter[tuple] = Counter()
    for n in graph.nodes:
        if n.op == "conv2d" and n.id in live:
            a = n.attr_dict()
            shapes = tuple(graph.shape_of(r) for r in n.inputs)
            out[(*shapes, a["stride"], a["padding"], a["activation"])] += 1
    return out


def live_op_counts(graph: Graph) -> Counter[str]:
    live = graph.live_nodes()
    return Counter(n.op for n in graph.nodes if n.id in live and not n.spec.is_leaf)
