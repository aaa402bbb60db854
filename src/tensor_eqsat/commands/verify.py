"""``tensor-eqsat verify A B``: check that two models compute the same function."""

from __future__ import annotations

import argparse

from rich.table import Table

from tensor_eqsat.commands._common import print_json, stderr
from tensor_eqsat.io.equivalence import BACKENDS, verify

NAME = "verify"
HELP = "check numerically that two models (.onnx or .json) compute the same outputs; exit 1 if not"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("original", metavar="A", help="the reference model: .onnx or .json graph file")
    p.add_argument("optimized", metavar="B", help="the model to check: .onnx or .json graph file")
    p.add_argument("--rtol", type=float, default=1e-3, help="relative tolerance (default 1e-3)")
    p.add_argument("--atol", type=float, default=1e-4, help="absolute tolerance (default 1e-4)")
    p.add_argument("--trials", type=int, default=3, help="random input draws (default 3)")
    p.add_argument("--seed", type=int, default=0, help="seed of inputs and data-less weights (default 0)")
    p.add_argument(
        "--backend",
        choices=BACKENDS,
        default="auto",
        help="what runs the models: auto = interpreter for .json, onnxruntime for .onnx (default auto)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON on stdout")


def run(args: argparse.Namespace) -> int:
    report = verify(
        args.original,
        args.optimized,
        rtol=args.rtol,
        atol=args.atol,
        trials=args.trials,
        seed=args.seed,
        backend=args.backend,
    )
    if args.json:
        print_json(report.to_dict())
    else:
        if report.outputs:
            table = Table(title=f"{args.original} vs {args.optimized}")
            for col in ("output", "shape", "max abs err", "max rel err", "mismatched"):
                table.add_column(col, justify="right" if col != "shape" else "left")
            for o in report.outputs:
                table.add_row(
                    str(o.index),
                    str(tuple(o.shape)),
                    f"{o.max_abs_error:.3g}",
                    f"{o.max_rel_error:.3g}",
                    f"{o.mismatched}/{o.size * report.trials}",
                )
            stderr.print(table)
        stderr.print(report.summary())
    return 0 if report.ok else 1
