"""``tensor-eqsat egraph GRAPH``: build the e-graph of a graph, report its size, write DOT."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from tensor_eqsat.commands._common import load_graph_arg, print_json, stderr
from tensor_eqsat.egraph import EGraph
from tensor_eqsat.errors import TensorEqsatError

NAME = "egraph"
HELP = "build the e-graph of a graph file (.json) or zoo model; print its size, optionally write DOT"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("graph", metavar="GRAPH", help="graph JSON file or zoo model name")
    p.add_argument("--dot", metavar="FILE", type=Path, help="write Graphviz DOT (one cluster per e-class)")
    p.add_argument(
        "--max-classes", type=int, default=500, help="refuse to draw bigger e-graphs (default 500)"
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")


def run(args: argparse.Namespace) -> int:
    eg = EGraph.from_graph(load_graph_arg(args.graph))
    ops = dict(sorted(Counter(node.op for _, node in eg.enodes()).items()))
    info: dict[str, object] = {
        "enodes": eg.num_enodes,
        "classes": eg.num_classes,
        "roots": eg.roots,
        "ops": ops,
    }
    if args.dot is not None:
        try:
            text = eg.to_dot(max_classes=args.max_classes)
        except ValueError as exc:
            raise TensorEqsatError(f"{args.graph}: {exc} (raise --max-classes to draw it anyway)") from None
        args.dot.write_text(text)
    if args.json:
        print_json(info)
    else:
        stderr.print(
            f"{args.graph}: {info['enodes']} e-nodes, {info['classes']} e-classes, roots {info['roots']}"
        )
        stderr.print(", ".join(f"{op} {n}" for op, n in ops.items()))
        if args.dot is not None:
            stderr.print(f"wrote {args.dot}")
    return 0
