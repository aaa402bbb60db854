"""``tensor-eqsat show GRAPH``: summarise a graph (op counts, parameters, shapes).

The summary is the command's result, so it goes to stdout: a table for people, or with
``--json`` the :func:`tensor_eqsat.ir.summary.summary` dict as JSON and nothing else.
"""

from __future__ import annotations

import argparse

from rich.table import Table
from rich.text import Text

from tensor_eqsat.commands._common import (
    add_dtype_argument,
    add_input_shape_argument,
    input_shapes_arg,
    load_graph_arg,
    print_json,
    stdout,
)
from tensor_eqsat.ir.summary import summary

NAME = "show"
HELP = "summarise a graph file (.json) or zoo model: op counts, parameters, shapes"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("graph", metavar="GRAPH", help="graph JSON file, ONNX file or zoo model name")
    add_input_shape_argument(p)
    add_dtype_argument(p)
    p.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")


def run(args: argparse.Namespace) -> int:
    g = load_graph_arg(args.graph, input_shapes=input_shapes_arg(args), dtype=args.dtype)
    info = summary(g)
    if args.json:
        print_json(info)
        return 0
    # Text and markup=False: names and paths are shown literally, never read as rich markup.
    table = Table(title=Text(args.graph), show_header=True)
    table.add_column("op")
    table.add_column("count", justify="right")
    for op, n in info["ops"].items():
        table.add_row(op, str(n))
    stdout.print(table)
    lines = [f"nodes {info['nodes']}, weights {info['weights']}, parameters {info['parameters']:,}"]
    if info["weight_dtypes"]:
        lines.append("weight dtypes: " + ", ".join(f"{d} {n}" for d, n in info["weight_dtypes"].items()))
    lines += [f"input  {inp['name']}: {tuple(inp['shape'])} {inp['dtype']}" for inp in info["inputs"]]
    lines += [
        f"output {i}: {tuple(shape)} {dtype}"
        for i, (shape, dtype) in enumerate(zip(info["outputs"], info["output_dtypes"], strict=True))
    ]
    for line in lines:
        stdout.print(line, markup=False, highlight=False)
    return 0
