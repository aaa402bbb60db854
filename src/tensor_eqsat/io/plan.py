"""What a runtime executes for a Graph: its observable outputs and its folded weight subgraphs.

The exporter, the PyTorch executor, verification and latency measurement all run a Graph the same
way, so an original and an optimized graph are treated alike (DESIGN.md decision 4):

* :func:`observable_outputs`: a ``noop`` output (a dummy scalar that joins several tensors into
  one root, as TENSAT's models do) is replaced by the tensors it joins.
* :func:`weight_only_nodes` / :func:`fold_weights`: nodes whose inputs are all weights are
  computed once, before execution, with the ops' numpy semantics, as a deployment folds them
  at load time.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tensor_eqsat.ir.dtypes import round_to, widen
from tensor_eqsat.ir.graph import Graph, TensorRef
from tensor_eqsat.ir.interpreter import leaf_values


def observable_outputs(graph: Graph) -> list[TensorRef]:
    """The graph's outputs with every ``noop`` output replaced by the tensors it joins.

    >>> g = Graph(); x = g.input((2,), name="x")
    >>> g.output(g.noop(g.relu(x), g.tanh(x)))
    >>> observable_outputs(g)
    [(1, 0), (2, 0)]
    """
    out: list[TensorRef] = []

    def visit(ref: TensorRef) -> None:
        node = graph.nodes[ref[0]]
        if node.op == "noop":
            for r in node.inputs:
                visit(r)
        else:
            out.append(ref)

    for ref in graph.outputs:
        visit(ref)
    return out


def live_nodes(graph: Graph, outputs: Sequence[TensorRef]) -> set[int]:
    """Ids of the nodes the given outputs depend on."""
    seen: set[int] = set()
    stack = [ref[0] for ref in outputs]
    while stack:
        nid = stack.pop()
        if nid not in seen:
            seen.add(nid)
            stack.extend(src for src, _ in graph.nodes[nid].inputs)
    return seen


def weight_only_nodes(graph: Graph) -> set[int]:
    """Ids of the nodes whose value depends on weights only (the weights included).

    An op without inputs (only an opaque op can be one) is not counted: it may be random.

    >>> g = Graph(); x = g.input((2, 2), name="x"); w = g.weight((2, 2))
    >>> g.output(g.matmul(x, g.transpose(w, (1, 0))))
    >>> sorted(weight_only_nodes(g))
    [1, 2]
    """
    const: set[int] = set()
    for n in graph.nodes:
        if n.op == "weight" or (
            not n.spec.is_leaf and n.op != "noop" and n.inputs and all(src in const for src, _ in n.inputs)
        ):
            const.add(n.id)
    return const


def fold_weights(graph: Graph, nodes: set[int], *, seed: int = 0) -> dict[TensorRef, np.ndarray]:
    """Values of the given weight-only nodes.

    Weights take their data, or the reference interpreter's seeded random values for their name
    (so every backend computes the function the interpreter computes with the same seed).
    """
    leaves = leaf_values(graph.at(), seed=seed)  # (inputs at their hints: unread here)
    values: dict[TensorRef, np.ndarray] = {}
    computed: list[TensorRef] = []
    for n in graph.nodes:
        if n.id not in nodes:
            continue
        if n.op == "weight":
            values[(n.id, 0)] = leaves[graph.name_of(n.id)]  # (rounded to its dtype already)
            continue
        for i, arr in enumerate(n.spec.evaluate([widen(values[r]) for r in n.inputs], n.attrs)):
            values[(n.id, i)] = np.asarray(arr)
            computed.append((n.id, i))
    # Weight transforms compute in float32 and round once, to the dtype each value has.
    for ref in computed:
        values[ref] = round_to(values[ref], graph.dtype_of(ref))
    return values
