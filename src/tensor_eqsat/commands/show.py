"""``tensor-eqsat show GRAPH``: summarise a graph (op counts, parameters, shapes)."""

from __future__ import annotations

import argparse

from rich.table import Table

from tensor_eqsat.commands._common import load_graph_arg, print_json, stderr
from tensor_eqsat.ir.summary import summary

NAME = "show"
HELP = "summarise a graph file (.json) or zoo model: op counts, parameters, shapes"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("graph", metavar="GRAPH", help="graph JSON file or zoo model name")
    p.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")


def run(args: argparse.Namespace) -> int:
    g = load_graph_arg(args.graph)
    info = summary(g)
    if args.json:
        print_json(info)
        return 0
    table = Table(title=args.graph, show_header=True)
    table.add_column("op")
    table.add_column("count", justify="right")
    for op, n in info["ops"].items():
        table.add_row(op, str(n))
    stderr.print(table)
    stderr.print(f"nodes {info['nodes']}, weights {info['weights']}, parameters {info['parameters']:,}")
    for inp in info["inputs"]:
        stderr.print(f"input  {inp['name']}: {tuple(inp['shape'])}")
    for i, shape in enumerate(info["outputs"]):
        stderr.print(f"output {i}: {tuple(shape)}")
    return 0
