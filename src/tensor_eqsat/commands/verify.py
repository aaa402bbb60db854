"""``tensor-eqsat verify A B``: check that two models compute the same function."""

from __future__ import annotations

import argparse
from typing import Any

from rich.table import Table

from tensor_eqsat.commands._common import (
    add_input_shape_argument,
    input_shapes_arg,
    non_negative_float,
    positive_int,
    print_json,
    seed,
    stdout,
)
from tensor_eqsat.errors import ExitCode, FormatError
from tensor_eqsat.io.equivalence import BACKENDS, verify

NAME = "verify"
HELP = "check numerically that two models (.onnx or .json) compute the same outputs; exit 1 if not"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("original", metavar="A", help="the reference model: .onnx or .json graph file")
    p.add_argument("optimized", metavar="B", help="the model to check: .onnx or .json graph file")
    p.add_argument(
        "--rtol",
        type=non_negative_float,
        default=None,
        help="relative tolerance (default 1e-3 for fp32; fp16 and bf16: judged by the original's own error)",
    )
    p.add_argument(
        "--atol",
        type=non_negative_float,
        default=None,
        help="absolute tolerance (default 1e-4 for fp32; fp16 and bf16: judged by the original's own error)",
    )
    p.add_argument("--trials", type=positive_int, default=3, help="random input draws (default 3)")
    p.add_argument("--seed", type=seed, default=0, help="seed of inputs and data-less weights (default 0)")
    p.add_argument(
        "--backend",
        choices=BACKENDS,
        default="auto",
        help=(
            "what runs the models: auto = interpreter for .json, onnxruntime for .onnx "
            "(torch for fp16 and bf16 ones) (default auto)"
        ),
    )
    add_input_shape_argument(p)
    p.add_argument("--json", action="store_true", help="print the report as JSON on stdout")


def _with_shapes(path: str, shapes: dict[str, tuple[int, ...]]) -> Any:
    """An ONNX file with ``--input-shape`` applied (as a model), other files as they are."""
    if not shapes or not path.endswith(".onnx"):
        return path
    from tensor_eqsat.io.inputs import with_input_shapes
    from tensor_eqsat.io.onnx_common import load_model

    return with_input_shapes(load_model(path), shapes, path)


def run(args: argparse.Namespace) -> int:
    shapes = input_shapes_arg(args)
    if shapes and not (args.original.endswith(".onnx") or args.optimized.endswith(".onnx")):
        raise FormatError("--input-shape applies to ONNX files only")
    report = verify(
        _with_shapes(args.original, shapes),
        _with_shapes(args.optimized, shapes),
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
            stdout.print(table)
        stdout.print(report.summary(), markup=False, highlight=False)
    return ExitCode.OK if report.ok else ExitCode.CHECK_FAILED
