"""Graphviz DOT rendering of an e-graph: one cluster per e-class, one box per e-node.

Edges go from an e-node to the cluster of its child class (``lhead``). Root classes have a bold
border, blacklisted e-nodes are dashed and grey. Meant for small e-graphs (debugging, docs); a
larger e-graph raises instead of producing an unreadable picture.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tensor_eqsat.egraph.egraph import EGraph


def _esc(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _attr_text(attrs: tuple[Any, ...]) -> str:
    return " ".join(str(list(a)) if isinstance(a, tuple) else str(a) for a in attrs)


def _class_label(cid: int, data: Any) -> str:
    shapes = getattr(data, "shapes", None)
    if shapes is None:
        return f"#{cid}"
    return f"#{cid} " + " ".join(str(tuple(s)) for s in shapes)


def to_dot(egraph: EGraph, *, max_classes: int = 500, name: str = "egraph") -> str:
    """DOT text for ``egraph``; raises ValueError if it has more than ``max_classes`` classes.

    >>> from tensor_eqsat.egraph import EGraph, ENode, NoAnalysis
    >>> eg = EGraph(NoAnalysis()); a = eg.add(ENode("a", (), ()))
    >>> eg.roots = [eg.add(ENode("neg", (), (a,)))]
    >>> print(to_dot(eg).splitlines()[4])
      subgraph cluster_0 {
    """
    egraph.rebuild()
    if egraph.num_classes > max_classes:
        raise ValueError(f"e-graph has {egraph.num_classes} classes, more than max_classes={max_classes}")
    roots = set(egraph.roots)
    blacklist = egraph._blacklist
    lines = [
        f'digraph "{_esc(name)}" {{',
        "  compound=true;",
        "  rankdir=TB;",
        '  node [shape=box, fontname="Helvetica", fontsize=10];',
    ]
    first: dict[int, int] = {}
    edges: list[tuple[int, int, int]] = []
    for cid, nids in egraph._class_nodes.items():
        first[cid] = nids[0]
        style = ", style=bold" if cid in roots else ", style=dashed"
        lines.append(f"  subgraph cluster_{cid} {{")
        lines.append(f'    label="{_esc(_class_label(cid, egraph._data[cid]))}"{style};')
        for nid in nids:
            node = egraph._nodes[nid]
            label = node.op + (f"\\n{_esc(_attr_text(node.attrs))}" if node.attrs else "")
            extra = ', style=dashed, color="grey"' if nid in blacklist else ""
            lines.append(f'    n{nid} [label="{label}"{extra}];')
            for i, ch in enumerate(node.children):
                edges.append((nid, egraph.find(ch), i))
        lines.append("  }")
    for nid, ch, i in edges:
        lines.append(f'  n{nid} -> n{first[ch]} [lhead=cluster_{ch}, label="{i}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"
