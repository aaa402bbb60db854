"""``tensor-eqsat zoo [MODEL ...] [--json]``: list the benchmark models.

For every model (or the ones named): op counts, node and parameter counts, input and output
shapes, and the TENSAT baseline's k_multi. ``tensor-eqsat show MODEL`` summarises one model the
same way as any graph file.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.table import Table

from tensor_eqsat.commands._common import add_dtype_argument, print_json, stdout
from tensor_eqsat.ir.cast import cast_graph
from tensor_eqsat.ir.summary import summary
from tensor_eqsat.zoo import info, names

NAME = "zoo"
HELP = "list the benchmark models: op counts, parameters, input/output shapes, k_multi"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("models", nargs="*", metavar="MODEL", help="models to list (default: all)")
    p.add_argument("--json", action="store_true", help="print a JSON list on stdout")
    add_dtype_argument(p)


def describe(name: str, dtype: str | None = None) -> dict[str, Any]:
    """The JSON record of one model at its default (paper) parameters, in precision ``dtype``
    (default None: the zoo's float32)."""
    model = info(name)
    graph = model.build()
    data = summary(graph if dtype is None else cast_graph(graph, dtype))
    return {
        "name": model.name,
        "title": model.title,
        **data,
        "k_multi": model.k_multi,
        "k_multi_provisional": model.k_multi_provisional,
        "tensat": model.tensat,
        "reference": model.reference,
        "params": {k: list(v) if isinstance(v, tuple) else v for k, v in model.defaults().items()},
    }


def _shape(shape: list[int]) -> str:
    return "×".join(str(d) for d in shape) if shape else "()"


def run(args: argparse.Namespace) -> int:
    records = [describe(name, args.dtype) for name in (args.models or names())]
    if args.json:
        print_json(records)
        return 0
    table = Table(title="benchmark models", show_header=True)
    table.add_column("model", no_wrap=True)
    table.add_column("ops", justify="right")
    table.add_column("op counts", overflow="fold")
    table.add_column("parameters", justify="right", no_wrap=True)
    table.add_column("inputs", overflow="fold")
    table.add_column("outputs", overflow="fold")
    table.add_column("dtype", no_wrap=True)
    table.add_column("k_multi", justify="right")
    for r in records:
        ops = r["ops"]
        k = f"{r['k_multi']}{'*' if r['k_multi_provisional'] else ''}"
        table.add_row(
            r["name"],
            str(sum(ops.values())),
            " ".join(f"{op}:{n}" for op, n in ops.items()),
            f"{r['parameters']:,}",
            ", ".join(_shape(i["shape"]) for i in r["inputs"]),
            ", ".join(_shape(o) for o in r["outputs"]),
            ", ".join(sorted(set(r["output_dtypes"]))),
            k,
        )
    stdout.print(table)
    if any(r["k_multi_provisional"] for r in records):
        stdout.print("* provisional k_multi (the paper's value; not yet re-derived by saturation)")
    return 0
