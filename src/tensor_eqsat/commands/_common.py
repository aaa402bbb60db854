"""Helpers shared by CLI subcommands: reading a graph argument, printing JSON and tables."""

from __future__ import annotations

import importlib
import json
import sys
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


def load_graph_arg(spec: str, *, strict: bool = False) -> Graph:
    """A graph from a CLI argument: a ``.json`` graph file, an ``.onnx`` model or a zoo model name.

    strict: for ONNX files, refuse operators the IR does not model instead of keeping them as
    opaque nodes. Raises FormatError naming the argument when it is none of these.
    """
    path = Path(spec)
    if path.suffix in (".json", ".onnx") or path.exists():
        if path.suffix == ".onnx":
            from tensor_eqsat.io.onnx_import import import_onnx  # onnx is an optional extra

            return import_onnx(path, strict=strict)
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
