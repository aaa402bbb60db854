"""``tensor-eqsat extract FILE.json``: extract from an egraph-serialize e-graph file.

Reads any e-graph in egraph-serialize JSON (as written by egg, egglog or extraction-gym, with
any op strings and given costs), runs one extractor, validates its answer, and prints the
DAG cost, tree cost, the extractor's own estimate, the time, and for ILP the status and gap.
The result goes to stdout: a table for people, or with ``--json`` the same as JSON (with the
chosen node per class) and nothing else; ``-o`` also writes that JSON to a file.
"""

from __future__ import annotations

import argparse
import json

from rich.table import Table
from rich.text import Text

from tensor_eqsat.commands._common import (
    finite_json,
    positive_float,
    positive_int,
    print_json,
    stderr,
    stdout,
)
from tensor_eqsat.extract.ilp import IlpBackend, IlpConfig
from tensor_eqsat.extract.registry import ExtractorKind, make_extractor
from tensor_eqsat.extract.serialize import load_problem
from tensor_eqsat.outputs import atomic_write, check_output

_SHOW_CHOICES = 40
"""Without --json, list the choices when there are at most this many."""

NAME = "extract"
HELP = "extract from an egraph-serialize JSON e-graph (greedy-tree, greedy-ocf, greedy-dag, ilp)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE.json", help="e-graph in egraph-serialize JSON")
    p.add_argument(
        "--extractor",
        choices=[k.value for k in ExtractorKind],
        default=ExtractorKind.GREEDY_DAG.value,
        help="extraction algorithm (default: greedy-dag)",
    )
    p.add_argument(
        "--ilp-backend",
        choices=[b.value for b in IlpBackend],
        default=IlpBackend.SCIP.value,
        help="MILP solver for --extractor ilp (default: scip)",
    )
    p.add_argument(
        "--time-limit",
        type=positive_float,
        default=60.0,
        metavar="S",
        help="ILP time limit in seconds (default: 60)",
    )
    p.add_argument(
        "--threads", type=positive_int, default=1, metavar="N", help="ILP solver threads (default: 1)"
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    p.add_argument("-o", "--output", metavar="OUT", help="also write the result as JSON to this file")


def run(args: argparse.Namespace) -> int:
    if args.output is not None:
        check_output(args.output, "-o")
    problem = load_problem(args.file)
    config = IlpConfig(backend=IlpBackend(args.ilp_backend), time_limit=args.time_limit, threads=args.threads)
    result = make_extractor(args.extractor, ilp_config=config).extract(problem)
    result.check()
    data = {"file": args.file, **result.to_dict()}
    node_index = {str(k): i for i, k in enumerate(problem.node_keys)}
    if args.output:
        atomic_write(args.output, json.dumps(finite_json(data), indent=2, allow_nan=False) + "\n")
    if args.json:
        print_json(data)
        return 0
    # Text: file names, class and node ids are shown literally, never read as rich markup.
    table = Table(title=Text(f"{args.file}: {problem.num_nodes} e-nodes, {problem.num_classes} e-classes"))
    table.add_column("extractor")
    table.add_column("dag_cost", justify="right")
    table.add_column("tree_cost", justify="right")
    table.add_column("reported", justify="right")
    table.add_column("time_s", justify="right")
    table.add_column("status")
    table.add_column("gap", justify="right")
    table.add_row(
        result.extractor,
        f"{data['dag_cost']:.6g}",
        f"{data['tree_cost']:.6g}",
        f"{result.reported_cost:.6g}",
        f"{result.time_s:.4f}",
        result.status.value,
        "" if result.gap is None else f"{result.gap:.2%}",
    )
    stdout.print(table)
    choices = data["choices"]
    if len(choices) <= _SHOW_CHOICES:
        for cls, node in choices.items():
            line = f"  {cls} -> {node} ({problem.node_op[node_index[node]]})"
            stdout.print(line, markup=False, highlight=False)
    else:
        stdout.print(f"  {len(choices)} chosen e-nodes (see --json or -o for all of them)", highlight=False)
    if args.output:
        stderr.print(f"wrote {args.output}", markup=False, highlight=False)
    return 0
