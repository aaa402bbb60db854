"""``tensor-eqsat accuracy``: predicted runtimes of every zoo model's initial e-graph, per extractor.

The paper's table "Predicted runtimes based on the initial e-graph": for each benchmark model,
its initial e-graph is priced by the cost model and every extractor reports the runtime it
predicts (see :mod:`tensor_eqsat.bench.accuracy_table`). The result goes to stdout: a table for
people, or with ``--json`` an object per model with the keys ``greedy-tree``, ``greedy-ocf``,
``greedy-dag`` and ``ilp`` (milliseconds) and nothing else.
"""

from __future__ import annotations

import argparse
import math

from rich.table import Table
from rich.text import Text

from tensor_eqsat.bench.accuracy_table import accuracy_table
from tensor_eqsat.commands._common import positive_float, print_json, stdout

NAME = "accuracy"
HELP = "predicted runtime of each zoo model's initial e-graph by greedy-tree, greedy-ocf, greedy-dag and ilp"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--cost-model", metavar="SPEC", default=None, help="cost model spec (default: the project's)"
    )
    p.add_argument("--models", nargs="+", metavar="NAME", default=None, help="zoo models (default: all 13)")
    p.add_argument(
        "--time-limit",
        type=positive_float,
        default=60.0,
        metavar="S",
        help="ILP time limit in seconds (default: 60)",
    )
    p.add_argument("--json", action="store_true", help="print {model: {extractor: ms}} as JSON on stdout")


def _fmt(x: float) -> str:
    return f"{x:.4g}" if math.isfinite(x) and abs(x) < 1e5 else f"{x:.2e}"


def run(args: argparse.Namespace) -> int:
    rows = accuracy_table(cost_model=args.cost_model, models=args.models, ilp_time_limit=args.time_limit)
    if args.json:
        print_json({r.model: r.predicted for r in rows})
        return 0
    title = f"Predicted runtime (ms) of the initial e-graph, cost model {rows[0].cost_model}"
    table = Table(title=Text(title), caption="exact: greedy-ocf equals ilp")
    # Full names in 80 columns (stdout that is not a terminal): no column may be shortened.
    table.add_column("model", no_wrap=True, min_width=11)
    kinds = list(rows[0].predicted)
    for k in kinds:
        table.add_column(k, justify="right", no_wrap=True, min_width=len(k))
    table.add_column("exact", justify="center", no_wrap=True)
    for r in rows:
        table.add_row(Text(r.model), *(_fmt(r.predicted[k]) for k in kinds), "yes" if r.ocf_exact else "no")
    stdout.print(table)
    exact = sum(r.ocf_exact for r in rows)
    stdout.print(f"greedy-ocf equals the exact (ilp) cost on {exact} of {len(rows)} models", highlight=False)
    return 0
