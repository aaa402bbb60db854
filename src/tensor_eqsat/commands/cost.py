"""``tensor-eqsat cost MODEL|FILE``: predicted runtime of a graph and where it goes."""

from __future__ import annotations

import argparse

from rich.table import Table

from tensor_eqsat.commands._common import (
    add_input_shape_argument,
    input_shapes_arg,
    load_graph_arg,
    print_json,
    stdout,
)
from tensor_eqsat.cost.model import WeightOps, cost_breakdown
from tensor_eqsat.cost.spec import graph_options, parse_cost_model
from tensor_eqsat.target import default_target, get_target, target_names

NAME = "cost"
HELP = "predicted runtime (ms) of a graph file or zoo model, with a per-op-type breakdown"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("graph", metavar="MODEL|FILE", help="zoo model name, graph JSON or ONNX file")
    add_input_shape_argument(p)
    p.add_argument(
        "--target",
        choices=target_names(),
        default=None,
        help="where the model will run; picks the cost model (default: ort-cpu for an ONNX file, else a100)",
    )
    p.add_argument(
        "--cost-model",
        default=None,
        metavar="SPEC",
        help="roofline[:a100|p100|h100|cpu|FILE.json], measured[:cpu|cuda|ort-cpu], "
        "recorded:h200|FILE, or unit (default: the target's)",
    )
    p.add_argument(
        "--weight-ops",
        choices=[w.value for w in WeightOps],
        default=WeightOps.FOLD.value,
        help="ops on weights only: fold (free, precomputed) or count (TENSAT) (default: %(default)s)",
    )
    p.add_argument("--taso-compat", action="store_true", help="concats are free, as in TASO")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")


def run(args: argparse.Namespace) -> int:
    graph = load_graph_arg(args.graph, input_shapes=input_shapes_arg(args))
    target = get_target(args.target) if args.target else default_target(args.graph)
    spec = args.cost_model or target.cost_model
    options = graph_options(spec, graph)
    model = parse_cost_model(spec, weight_ops=args.weight_ops, taso_compat=args.taso_compat, **options)
    report = cost_breakdown(model, graph)
    if args.json:
        print_json(
            {
                "graph": args.graph,
                "target": target.name,
                "cost_model": model.spec,
                "weight_ops": model.weight_ops.value,
                "taso_compat": model.taso_compat,
                **report.to_dict(),
            }
        )
        return 0
    table = Table(title=f"{args.graph} on {model.spec}", show_header=True)
    table.add_column("op")
    table.add_column("count", justify="right")
    table.add_column("ms", justify="right")
    table.add_column("share", justify="right")
    for op, ms in report.by_op.items():
        share = ms / report.total_ms if report.total_ms else 0.0
        table.add_row(op, str(report.count_by_op[op]), f"{ms:.4f}", f"{share:.1%}")
    # The breakdown is the command's result: stdout, like every other command's.
    if report.pass_ms:
        share = report.pass_ms / report.total_ms if report.total_ms else 0.0
        table.add_row("(forward pass)", "", f"{report.pass_ms:.4f}", f"{share:.1%}")
    stdout.print(table)
    stdout.print(f"total {report.total_ms:.4f} ms over {report.kernels} kernels", highlight=False)
    return 0
