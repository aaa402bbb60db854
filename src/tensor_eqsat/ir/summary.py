"""Human- and machine-readable summaries of a graph, and DOT rendering."""

from __future__ import annotations

from collections import Counter
from typing import Any

from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.symbolic import dim_to_json


def summary(graph: Graph) -> dict[str, Any]:
    """Op counts, parameter count, inputs and outputs with shapes and dtypes, as a JSON-ready dict.

    ``weight_dtypes`` counts the weights of each dtype; ``output_dtypes`` has one entry per output.
    A symbolic dim is its polynomial's text (``"batch"``), and ``symbols`` gives each symbol's
    hint and range (empty for a static graph).
    """
    weight_dtypes: Counter[str] = Counter(n.dtypes[0] for n in graph.weights())
    return {
        "nodes": len(graph.nodes),
        "ops": graph.op_counts(),
        "parameters": graph.num_parameters(),
        "weights": len(graph.weights()),
        "weight_dtypes": dict(weight_dtypes),
        "inputs": [
            {
                "name": graph.name_of(n.id),
                "shape": [dim_to_json(d) for d in n.shapes[0]],
                "dtype": n.dtypes[0],
            }
            for n in graph.inputs()
        ],
        "outputs": [[dim_to_json(d) for d in graph.shape_of(r)] for r in graph.outputs],
        "output_dtypes": [graph.dtype_of(r) for r in graph.outputs],
        "symbols": {name: s.to_json() for name, s in sorted(graph.symbols().items())},
    }


def _label(graph: Graph, nid: int) -> str:
    n = graph.nodes[nid]
    attrs = n.attr_dict()
    if n.spec.is_leaf:
        return f"{n.op} {attrs['name']}\\n{tuple(attrs['shape'])} {n.dtypes[0]}"
    # Long strings (an opaque node's payload) would swamp the drawing: show their head only.
    shown = ", ".join(
        f"{k}={v[:24] + '...' if isinstance(v, str) and len(v) > 32 else v}"
        for k, v in attrs.items()
        if v not in ("none",)
    )
    shapes = " ".join(str(s) for s in n.shapes)
    return f"{n.op}" + (f"\\n{shown}" if shown else "") + f"\\n{shapes}"


def to_dot(graph: Graph, name: str = "graph") -> str:
    """Graphviz DOT text: one box per node, edges labelled with the output index for split."""
    lines = [f'digraph "{name}" {{', "  rankdir=TB;", '  node [shape=box, fontname="Helvetica"];']
    for n in graph.nodes:
        style = ', style=filled, fillcolor="#eeeeee"' if n.spec.is_leaf else ""
        lines.append(f'  n{n.id} [label="{_label(graph, n.id)}"{style}];')
        for src, idx in n.inputs:
            extra = f' [label="{idx}"]' if len(graph.nodes[src].shapes) > 1 else ""
            lines.append(f"  n{src} -> n{n.id}{extra};")
    for i, (src, _idx) in enumerate(graph.outputs):
        lines.append(f'  out{i} [label="output {i}", shape=ellipse];')
        lines.append(f"  n{src} -> out{i};")
    lines.append("}")
    return "\n".join(lines) + "\n"
