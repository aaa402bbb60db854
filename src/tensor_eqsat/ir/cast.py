"""A graph in another precision: the same ops and names, every floating leaf in a new dtype.

Used to build a zoo model in float16 or bfloat16 (``--dtype``), and to make the float32 reference
of a reduced-precision model for the numeric check (DESIGN.md decision 17): weights with data are
converted from the values they hold (widening is exact), so the reference runs on the same
weights, and weights without data keep their seeded random values (drawn in float32, rounded to
the leaf's dtype by the interpreter).
"""

from __future__ import annotations

from tensor_eqsat.ir.dtypes import DType, graph_dtype, round_to, widen
from tensor_eqsat.ir.graph import Graph


def cast_graph(graph: Graph, dtype: DType | str) -> Graph:
    """A copy of ``graph`` whose floating inputs and weights are ``dtype`` (integer inputs, such
    as token ids, stay integers); every other dtype follows by inference. A ``cast`` to the
    graph's :func:`precision` casts to ``dtype`` instead (a bfloat16 model's float32 softmax
    islands stay float32 in float16), and in float32 every cast casts to float32.

    Raises DTypeError (a ShapeError) naming the op if the result is ill-typed: an opaque ONNX node
    keeps the dtypes its payload declares, so a graph mixing them with the new dtype is refused.

    >>> g = Graph(); x = g.input((2, 2), name="x"); g.output(g.relu(x))
    >>> h = cast_graph(g, "bf16")
    >>> h.dtype_of(h.outputs[0]), g.dtype_of(g.outputs[0])
    ('bfloat16', 'float32')
    """
    target = DType.parse(dtype)
    if not target.is_float:
        raise ValueError(f"cast_graph: {target} is not a floating dtype")
    old = precision(graph)
    out = Graph()
    for n in graph.nodes:
        attrs = n.attrs
        if n.spec.is_leaf and DType(n.dtypes[0]).is_float:
            named = dict(n.spec.attr_dict(attrs))
            named["dtype"] = target.value
            attrs = n.spec.make_attrs(**named)
        elif n.op == "cast" and (target is DType.FLOAT32 or n.dtypes[0] == old.value):
            # A cast back to the model's precision casts to the new one; in float32 (the check's
            # reference) every cast is the identity. Float32 islands stay float32.
            attrs = n.spec.make_attrs(dtype=target.value)
        out.add_node(n.op, attrs, n.inputs)
    out.outputs = list(graph.outputs)
    for name, arr in graph.weight_data.items():
        leaf = out.nodes[out._names[name]]
        out.weight_data[name] = round_to(widen(arr), leaf.dtypes[0])
    return out


def precision(graph: Graph) -> DType:
    """The precision ``graph`` runs in: the lowest-precision float dtype of its leaves, casts and
    outputs (float32 for a graph without reduced-precision tensors).

    >>> g = Graph(); x = g.input((2,), dtype="fp16"); g.output(g.relu(x))
    >>> precision(g)
    <DType.FLOAT16: 'float16'>
    """
    dtypes = [n.dtypes[0] for n in graph.nodes if n.spec.is_leaf or n.op == "cast"]
    dtypes += [graph.dtype_of(r) for r in graph.outputs]
    return graph_dtype(dtypes)
