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

from tensor_eqsat.ir.dtypes import DType, round_to, round_values, widen
from tensor_eqsat.ir.graph import Graph, Node, TensorRef
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


def folded_reads(
    graph: Graph, const: set[int], live: set[int], outputs: Sequence[TensorRef]
) -> set[TensorRef]:
    """The values of the folded nodes ``const`` that a run reads: the inputs of the ``live``
    nodes it runs (those outside ``const``), and the ``outputs`` among them (what
    :func:`fold_weights` is asked to keep).

    >>> g = Graph(); x = g.input((2, 2), name="x"); w = g.weight((2, 2))
    >>> g.output(g.matmul(x, g.transpose(w, (1, 0))))
    >>> const = weight_only_nodes(g)
    >>> sorted(folded_reads(g, const, set(range(len(g.nodes))), g.outputs))
    [(2, 0)]
    """
    read = {r for n in graph.nodes if n.id in live and n.id not in const for r in n.inputs}
    return {r for r in read | set(outputs) if r[0] in const}


def fold_weights(
    graph: Graph,
    nodes: set[int],
    *,
    seed: int = 0,
    float32_values: bool = False,
    keep: set[TensorRef] | None = None,
) -> dict[TensorRef, np.ndarray]:
    """Values of the given weight-only nodes.

    Weights take their data, or the reference interpreter's seeded random values for their name
    (so every backend computes the function the interpreter computes with the same seed).
    Weight transforms compute in float32 and round once, to the dtype each value has; with
    ``float32_values`` the rounded values are kept as float32 (what a program computing a
    reduced-precision graph in float32 holds: io/torch_exec.py's float32 compute).

    keep: the values wanted (default: every node's). The others are intermediates: each is
    released after its last reader, and a concatenation read only by concatenations along the
    same axis is not made at all, its readers joining its pieces directly. (A rewritten BERT
    that merged its products into one of 1024 x 25,600 built it through ten smaller
    concatenations, 142 M of the 168 M values folded, and its float16 check spent seconds
    making them where the original's took 0.1 s.)

    >>> g = Graph(); x = g.input((2, 2), name="x")
    >>> a, b, c = (g.weight((2, 2), name=n) for n in "abc")
    >>> ab = g.concat([a, b], axis=1); abc = g.concat([ab, c], axis=1)
    >>> g.output(g.matmul(x, abc))
    >>> const = weight_only_nodes(g)
    >>> sorted(fold_weights(g, const, keep={abc.ref}))  # (ab is not made)
    [(5, 0)]
    >>> every = fold_weights(g, const)
    >>> sorted(every)
    [(1, 0), (2, 0), (3, 0), (4, 0), (5, 0)]
    >>> bool((fold_weights(g, const, keep={abc.ref})[abc.ref] == every[abc.ref]).all())
    True
    """
    leaves = leaf_values(graph.at(), seed=seed)  # (inputs at their hints: unread here)
    wanted = None if keep is None else {r for r in keep if r[0] in nodes}
    readers: dict[TensorRef, list[int]] = {}
    for n in graph.nodes:
        if n.id in nodes:
            for r in n.inputs:
                readers.setdefault(r, []).append(n.id)

    def joined(n: Node) -> bool:  # a concatenation (along one axis) its readers join by its pieces
        ref = (n.id, 0)
        if n.op != "concat" or wanted is None or ref in wanted or not readers.get(ref):
            return False
        return all(graph.nodes[r].op == "concat" and graph.nodes[r].attrs == n.attrs for r in readers[ref])

    pieces: dict[TensorRef, list[TensorRef]] = {}
    values: dict[TensorRef, np.ndarray] = {}
    wide: dict[TensorRef, np.ndarray] = {}  # each value widened once, however many read it
    reads_left = {r: len(ids) for r, ids in readers.items()}
    computed: list[TensorRef] = []

    def operands(refs: Sequence[TensorRef]) -> list[TensorRef]:
        out: list[TensorRef] = []
        for r in refs:
            out.extend(operands(pieces[r]) if r in pieces else [r])
        return out

    def widened(ref: TensorRef) -> np.ndarray:
        if ref not in wide:
            wide[ref] = widen(values[ref])
        return wide[ref]

    def release(refs: Sequence[TensorRef]) -> None:
        for r in refs:
            reads_left[r] -= 1
            if reads_left[r] == 0 and wanted is not None and r not in wanted:
                if r in pieces:
                    release(pieces.pop(r))
                values.pop(r, None)
                wide.pop(r, None)

    for n in graph.nodes:
        if n.id not in nodes:
            continue
        if n.op == "weight":
            values[(n.id, 0)] = leaves[graph.name_of(n.id)]  # (rounded to its dtype already)
            continue
        if joined(n):
            pieces[(n.id, 0)] = list(n.inputs)
            continue
        args = operands(n.inputs) if n.op == "concat" else list(n.inputs)
        for i, arr in enumerate(n.spec.evaluate([widened(r) for r in args], n.attrs)):
            values[(n.id, i)] = np.asarray(arr)
            computed.append((n.id, i))
        release(list(n.inputs))
    for ref in computed:
        if ref not in values:
            continue
        value, dtype = values[ref], graph.dtype_of(ref)
        if float32_values and value.dtype.kind == "f" and DType.parse(dtype).is_float:
            values[ref] = round_values(value, dtype)
        else:
            values[ref] = round_to(value, dtype)
    if wanted is not None:
        values = {r: values[r] for r in wanted}
    return values
