"""Reference interpreter: run a Graph with numpy.

It is the ground truth for rule verification and for checking optimized graphs, so it favours
clarity and float32 semantics that match the exporters over speed; convolutions still go through
one batched GEMM per conv so a ResNet-50-sized graph runs in seconds.

Random data is drawn **per tensor name** from ``seed``, so two graphs that share input and weight
names (an original and its optimized version) see identical values:

* inputs: standard normal;
* every value is rounded to its tensor's dtype; ops compute in float32 from their inputs and
  round their outputs once (ir/dtypes.py), and weight-only values (a merged or concatenated
  weight) are computed in float32 from the stored weights and rounded once where they are used;
* a graph with symbolic dims runs at the sizes the given inputs have (each input dim that is one
  symbol reads it), the other symbols at their hints;
* weights: normal with std ``1/sqrt(fan_in)`` (fan_in = product of all dims but the first), which
  keeps deep random networks from overflowing; weights that feed an input an OpSpec marks positive
  (batchnorm variance) are uniform in [0.5, 1.5].
"""

from __future__ import annotations

import math
import zlib
from collections import OrderedDict
from collections.abc import Mapping

import numpy as np

from tensor_eqsat.errors import GraphError
from tensor_eqsat.ir.dtypes import evaluate, round_to, widen
from tensor_eqsat.ir.graph import Graph, Node, TensorRef
from tensor_eqsat.ir.types import Shape


def _rng(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def random_input(name: str, shape: Shape, seed: int = 0) -> np.ndarray:
    """Standard-normal float32 data for an input, determined by (seed, name)."""
    return _rng(seed, name).standard_normal(shape, dtype=np.float32)


def random_weight(
    name: str, shape: Shape, seed: int = 0, positive: bool = False, dtype: str = "float32"
) -> np.ndarray:
    """Scaled random float32 data for a weight, determined by (seed, name, shape), rounded to
    ``dtype`` (held in its storage dtype, ir/dtypes.py; default float32: as drawn).

    The arrays are read-only and the most recent ones are kept (up to
    :data:`WEIGHT_CACHE_BYTES`): the original and the optimized graph share their weights'
    names, so checking, exporting and timing both makes each weight once (and rounds it once).
    VGG-19's 143 M parameters take seconds to draw.
    """
    key = (name, tuple(shape), seed, positive, str(dtype))
    arr = _WEIGHTS.get(key)
    if arr is not None:
        _WEIGHTS.move_to_end(key)
        return arr
    if str(dtype) != "float32":
        arr = round_to(random_weight(name, shape, seed, positive), dtype)
        arr.flags.writeable = False
        _remember(key, arr)
        return arr
    rng = _rng(seed, name)
    if positive:
        arr = rng.uniform(0.5, 1.5, size=shape).astype(np.float32)
    else:
        fan_in = math.prod(shape[1:]) if len(shape) >= 2 else 1
        arr = rng.standard_normal(shape, dtype=np.float32)
        arr /= np.float32(math.sqrt(fan_in))
    arr.flags.writeable = False
    _remember(key, arr)
    return arr


WEIGHT_CACHE_BYTES = 1 << 30
"""The most bytes of random weights :func:`random_weight` keeps (least recently used dropped)."""
_WEIGHTS: OrderedDict[tuple[str, tuple[int, ...], int, bool, str], np.ndarray] = OrderedDict()


def _remember(key: tuple[str, tuple[int, ...], int, bool, str], arr: np.ndarray) -> None:
    if arr.nbytes > WEIGHT_CACHE_BYTES:
        return
    _WEIGHTS[key] = arr
    total = sum(a.nbytes for a in _WEIGHTS.values())
    while total > WEIGHT_CACHE_BYTES:
        _, dropped = _WEIGHTS.popitem(last=False)
        total -= dropped.nbytes


def _positive_weights(graph: Graph) -> set[int]:
    out = set()
    for n in graph.nodes:
        for pos in n.spec.positive_inputs:
            if pos < len(n.inputs):
                out.add(n.inputs[pos][0])
    return out


def random_inputs(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded valid data for every input of ``graph``: :func:`random_input` for float32 ones;
    token ids within their embedding table and 0/1 masks for the others (see io/inputs.py)."""
    typed = _typed_inputs(graph, {}, seed)
    out = {}
    for n in graph.inputs():
        name = graph.name_of(n.id)
        out[name] = typed[name] if name in typed else random_input(name, n.shapes[0], seed)
    return out


def _typed_inputs(graph: Graph, given: Mapping[str, np.ndarray], seed: int) -> dict[str, np.ndarray]:
    """Valid data for missing inputs that are not float32 (token ids, masks): only opaque ONNX
    nodes read those, and io.inputs knows their types and index ranges."""
    if not any(n.op == "opaque" for n in graph.nodes):
        return {}
    from tensor_eqsat.io.inputs import graph_inputs, input_value

    shapes = {graph.name_of(n.id): n.shapes[0] for n in graph.inputs()}
    out = {}
    for name, info in graph_inputs(graph).items():
        if name not in given and info.elem_type != 1:
            out[name] = input_value(name, shapes[name], info, seed)
    return out


def leaf_values(
    graph: Graph,
    inputs: Mapping[str, np.ndarray] | None = None,
    weights: Mapping[str, np.ndarray] | None = None,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """Name -> value of every input and weight: given, stored in the graph, or seeded random."""
    inputs = dict(inputs or {})
    weights = dict(weights or {})
    positive = _positive_weights(graph)
    values: dict[str, np.ndarray] = {}
    typed = _typed_inputs(graph, inputs, seed)
    for n in graph.nodes:
        if not n.spec.is_leaf:
            continue
        name = graph.name_of(n.id)
        shape = n.shapes[0]
        given = inputs.get(name) if n.op == "input" else weights.get(name, graph.weight_data.get(name))
        if given is not None:
            arr = np.asarray(given)
            if n.op != "input" or arr.dtype.kind not in "iub":  # token ids and masks stay integers
                arr = round_to(arr.astype(np.float32, copy=False), n.dtypes[0])
            if arr.shape != shape:
                raise GraphError(f"{n.op} {name!r}: value has shape {arr.shape}, expected {shape}")
        elif n.op == "input" and name in typed:
            arr = typed[name]
        elif n.op == "input":
            arr = round_to(random_input(name, shape, seed), n.dtypes[0])
        else:
            arr = random_weight(name, shape, seed, positive=n.id in positive, dtype=n.dtypes[0])
        values[name] = arr
    # A value under a name the graph does not have (or has as the other kind of leaf) would be
    # ignored silently; that is always a caller's mistake.
    input_names = {graph.name_of(n.id) for n in graph.inputs()}
    weight_names = {graph.name_of(n.id) for n in graph.weights()}
    for given_names, known, kind in ((inputs, input_names, "inputs"), (weights, weight_names, "weights")):
        unknown = set(given_names) - known
        if unknown:
            shown = sorted(known)
            listed = ", ".join(shown[:10]) + (f" and {len(shown) - 10} more" if len(shown) > 10 else "")
            raise GraphError(
                f"values given for unknown {kind}: {sorted(unknown)} (graph {kind}: {listed or 'none'})"
            )
    return values


def run(
    graph: Graph,
    inputs: Mapping[str, np.ndarray] | None = None,
    weights: Mapping[str, np.ndarray] | None = None,
    *,
    seed: int = 0,
) -> list[np.ndarray]:
    """Run ``graph`` and return its outputs in order.

    inputs / weights: arrays by name; missing ones are seeded random (see the module docstring).
    seed: seed for missing values. Default 0.

    >>> from tensor_eqsat.ir.graph import Graph
    >>> g = Graph(); x = g.input((2, 3), name="x"); g.output(g.relu(x))
    >>> run(g, {"x": np.array([[-1, 0, 2], [3, -4, 5]])})[0].tolist()
    [[0.0, 0.0, 2.0], [3.0, 0.0, 5.0]]
    """
    values = run_all(graph, inputs, weights, seed=seed)
    return [values[ref] for ref in graph.outputs]


def run_all(
    graph: Graph,
    inputs: Mapping[str, np.ndarray] | None = None,
    weights: Mapping[str, np.ndarray] | None = None,
    *,
    seed: int = 0,
    only_live: bool = True,
    constants: dict[TensorRef, np.ndarray] | None = None,
) -> dict[TensorRef, np.ndarray]:
    """Run ``graph`` and return every computed tensor by (node, index).

    only_live: skip nodes no output depends on. Default True.
    constants: a cache of the values that depend on weights alone, for running one graph
        several times with the same weights and seed: filled on the first run, reused after (the
        ``weights`` of later runs are then not read). Default None: no cache.

    >>> from tensor_eqsat.ir.graph import Graph
    >>> g = Graph(); x = g.input((2,), name="x"); w = g.weight((2,), name="w")
    >>> g.output(g.ewadd(x, g.relu(w)))
    >>> cache = {}
    >>> a = run_all(g, {"x": np.zeros(2)}, constants=cache)
    >>> sorted(n for n, _ in cache)
    [1, 2]
    >>> b = run_all(g, {"x": np.zeros(2)}, constants=cache)
    >>> b[g.outputs[0]].tolist() == a[g.outputs[0]].tolist()
    True
    """
    if not graph.outputs:
        raise GraphError("graph has no outputs")
    if graph.is_symbolic:
        # A graph with symbolic dims runs at the sizes its inputs give (the hints for the rest).
        graph = graph.at(graph.point_of(inputs or {}))
    cached = _weight_only(graph) if constants is not None else set()
    if constants:  # a later run: the weights are in the cache
        leaves = _leaves_with(graph, inputs, constants, seed)
    else:
        leaves = leaf_values(graph, inputs, weights, seed)
    live = graph.live_nodes() if only_live else {n.id for n in graph.nodes}
    values: dict[TensorRef, np.ndarray] = {}
    # Weight-only values in float32 before rounding, read by weight-only nodes: a chain of weight
    # transforms rounds once, at its end (DESIGN.md decision 17).
    exact: dict[TensorRef, np.ndarray] = {}
    weight_only = cached if constants is not None else _weight_only(graph)
    for n in graph.nodes:
        if n.id not in live:
            continue
        if n.id in cached and constants is not None and (n.id, 0) in constants:
            for i in range(len(n.shapes)):
                values[(n.id, i)] = constants[(n.id, i)]
            continue
        if n.id in weight_only and not n.spec.is_leaf:
            args = [widen(exact.get(r, values[r])) for r in n.inputs]
            raw = n.spec.compute(args, n.spec.attr_dict(n.attrs))
            exact.update(((n.id, i), np.asarray(a)) for i, a in enumerate(raw))
            outs = tuple(round_to(a, d) for a, d in zip(raw, n.dtypes, strict=True))
        else:
            outs = _eval_node(graph, n, values, leaves)
        if n.id in cached and constants is not None:
            for i, arr in enumerate(outs):
                constants[(n.id, i)] = arr
        for i, arr in enumerate(outs):
            if tuple(arr.shape) != n.shapes[i]:
                raise AssertionError(f"node {n.id} ({n.op}) produced {arr.shape}, inferred {n.shapes[i]}")
            values[(n.id, i)] = arr
    return values


def _weight_only(graph: Graph) -> set[int]:
    """Ids of the nodes whose value depends on weights alone (weights included)."""
    out: set[int] = set()
    for n in graph.nodes:
        if n.op == "weight" or (n.inputs and not n.spec.is_leaf and all(r[0] in out for r in n.inputs)):
            out.add(n.id)
    return out


def _leaves_with(
    graph: Graph,
    inputs: Mapping[str, np.ndarray] | None,
    constants: Mapping[TensorRef, np.ndarray],
    seed: int,
) -> dict[str, np.ndarray]:
    """Leaf values for a run whose weights are in ``constants`` already: only the inputs are made."""
    weights = {graph.name_of(n.id): constants[(n.id, 0)] for n in graph.weights() if (n.id, 0) in constants}
    return leaf_values(graph, inputs, weights, seed)


def _eval_node(
    graph: Graph, n: Node, values: Mapping[TensorRef, np.ndarray], leaves: Mapping[str, np.ndarray]
) -> tuple[np.ndarray, ...]:
    if n.spec.is_leaf:
        return (leaves[graph.name_of(n.id)],)
    args = [values[ref] for ref in n.inputs]
    n.spec.check_arity(len(args))
    return evaluate(n.spec.compute, args, n.spec.attr_dict(n.attrs), n.dtypes)
