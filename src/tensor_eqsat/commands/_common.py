"""Helpers shared by CLI subcommands: reading a graph argument, printing JSON and tables."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from tensor_eqsat.errors import FormatError
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.serialize import load

stderr = Console(stderr=True)
"""Console for progress, warnings and logs: never mixed into a command's output."""

stdout = Console()
"""Console for a command's human-readable result (``show``'s table). Commands print here only
when ``--json`` is off, so ``--json`` output stays alone on stdout."""


def print_json(data: Any) -> None:
    """Machine-readable output: JSON on stdout alone."""
    json.dump(data, sys.stdout, indent=2)
    sys.stdout.write("\n")


def parse_input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``NAME=D0,D1,...`` as (name, dims); argparse reports the ArgumentTypeError it raises.

    >>> parse_input_shape("input_ids=1,128")
    ('input_ids', (1, 128))
    """
    name, sep, dims = text.rpartition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=D0,D1,... (e.g. input_ids=1,128)")
    try:
        values = tuple(int(d) for d in dims.split(",")) if dims else ()
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: dims must be integers, as in {name}=1,128") from None
    if any(d < 1 for d in values):
        raise argparse.ArgumentTypeError(f"{text!r}: every dim must be >= 1")
    return name, values


def add_input_shape_argument(p: argparse.ArgumentParser) -> None:
    """The repeatable ``--input-shape NAME=D0,D1,...`` of every command that reads ONNX."""
    p.add_argument(
        "--input-shape",
        action="append",
        type=parse_input_shape,
        default=[],
        metavar="NAME=D0,D1,...",
        help="static shape for an ONNX input with symbolic dims (repeatable), e.g. input_ids=1,128",
    )


def input_shapes_arg(args: argparse.Namespace) -> dict[str, tuple[int, ...]]:
    """The ``--input-shape`` values as a dict; FormatError when a name is given twice."""
    out: dict[str, tuple[int, ...]] = {}
    for name, dims in getattr(args, "input_shape", None) or []:
        if name in out and out[name] != dims:
            raise FormatError(f"--input-shape gives {name!r} twice ({out[name]} and {dims})")
        out[name] = dims
    return out


def load_graph_arg(
    spec: str, *, strict: bool = False, input_shapes: Mapping[str, Sequence[int]] | None = None
) -> Graph:
    """A graph from a CLI argument: a ``.json`` graph file, an ``.onnx`` model or a zoo model name.

    strict: for ONNX files, refuse operators the IR does not model instead of keeping them as
    opaque nodes. input_shapes: static shapes for ONNX inputs with symbolic dims
    (``--input-shape``); an error for other files. Raises FormatError naming the argument when
    it is none of these.
    """
    path = Path(spec)
    if input_shapes and path.suffix != ".onnx":
        raise FormatError(f"{spec}: --input-shape applies to ONNX files only")
    if path.suffix in (".json", ".onnx") or path.exists():
        if path.suffix == ".onnx":
            from tensor_eqsat.io.onnx_import import import_onnx  # onnx is an optional extra

            return import_onnx(path, strict=strict, input_shapes=input_shapes)
        if path.suffix != ".json":
            raise FormatError(f"{spec}: unsupported file type {path.suffix!r} (expected .json or .onnx)")
        return load(path)
    try:
        zoo = importlib.import_module("tensor_eqsat.zoo")
    except ImportError:
        raise FormatError(f"{spec}: no such file") from None
    if spec not in zoo.names():
        raise FormatError(f"{spec}: no such file or zoo model (models: {', '.join(zoo.names())})")
    return zoo.get(spec)
