"""Helpers shared by CLI subcommands: option validators, reading a graph argument, printing JSON.

Every numeric option is checked by argparse with one of the ``type=`` validators below, so a bad
value ends at parse time with a one-line ``error: argument --budget: ...`` and exit code 2, before
any work starts.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rich.console import Console, ConsoleDimensions

from tensor_eqsat.errors import FormatError, TensorEqsatError
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.ops_common import MAX_ELEMENTS

PIPE_WIDTH = 1000
"""Width of a console that writes to no terminal (a pipe, a file, CI's log) when ``COLUMNS`` is
not set: wide enough that no table is wrapped. Tables are as wide as their cells, not this."""


class CliConsole(Console):
    """A rich Console that does not wrap at 80 columns when its output is not a terminal.

    rich falls back to 80 columns when no standard stream is a terminal, so a table piped to a
    file or read in a CI log had every long cell broken over several lines. Here a console whose
    own stream is not a terminal is :data:`PIPE_WIDTH` wide unless ``COLUMNS`` says otherwise
    (or a width is given); on a terminal it is the terminal's width, as before. Decided at each
    print, so a stream replaced later (``contextlib.redirect_stdout``, a test's capture) counts.
    """

    @property
    def size(self) -> ConsoleDimensions:
        dims = super().size
        if self._width is None and not self.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
            return ConsoleDimensions(PIPE_WIDTH, dims.height)
        return dims

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        width, height = new_size
        self._width = width
        self._height = height


stderr = CliConsole(stderr=True)
"""Console for progress, warnings and logs: never mixed into a command's output."""

stdout = CliConsole()
"""Console for a command's human-readable result (``show``'s table). Commands print here only
when ``--json`` is off, so ``--json`` output stays alone on stdout."""


MAX_SEED = 2**32 - 1
"""The largest seed: every random generator the project seeds (numpy, PyTorch, onnx tools)
accepts 0..2**32-1."""


def _parse_int(text: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def _parse_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    return value


def int_at_least(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse ``type=``: an integer ``>= low`` (and ``<= high`` when given).

    >>> int_at_least(1)("3")
    3
    >>> int_at_least(1)("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be >= 1, got 0
    """

    def parse(text: str) -> int:
        value = _parse_int(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"must be <= {high}, got {value}")
        return value

    parse.__name__ = "integer"  # argparse names the type in "invalid integer value" messages
    return parse


def float_above(low: float, *, inclusive: bool = False) -> Callable[[str], float]:
    """An argparse ``type=``: a finite number ``> low`` (``>= low`` when ``inclusive``).

    >>> float_above(0)("1.5")
    1.5
    >>> float_above(0)("nan")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a finite number, got nan
    """

    def parse(text: str) -> float:
        value = _parse_float(text)
        if value < low or (value == low and not inclusive):
            raise argparse.ArgumentTypeError(f"must be {'>=' if inclusive else '>'} {low:g}, got {text}")
        return value

    parse.__name__ = "number"
    return parse


positive_int = int_at_least(1)
"""An integer >= 1 (budgets, limits, counts, threads)."""

_SIZE_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def byte_size(text: str) -> int:
    """An argparse ``type=``: a memory size in bytes, ``500M``, ``2G``, ``1.5G``, ``64K`` or plain
    bytes (binary units; a trailing ``B`` or ``iB`` is accepted).

    >>> byte_size("2G"), byte_size("500M"), byte_size("1.5k"), byte_size("4096")
    (2147483648, 524288000, 1536, 4096)
    >>> byte_size("2X")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a size such as 500M or 2G, got 2X
    """
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = t[-1:] if t[-1:] in _SIZE_UNITS else ""
    try:
        value = float(t[: len(t) - len(unit)]) * _SIZE_UNITS[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a size such as 500M or 2G, got {text}") from None
    if not 1 <= value < 2**63:
        raise argparse.ArgumentTypeError(f"must be at least 1 byte and finite, got {text}")
    return int(value)


non_negative_int = int_at_least(0)
"""An integer >= 0 (depths, k_multi)."""

seed = int_at_least(0, MAX_SEED)
"""A seed: an integer in 0..2**32-1."""

positive_float = float_above(0)
"""A finite number > 0 (time limits in seconds)."""

non_negative_float = float_above(0, inclusive=True)
"""A finite number >= 0 (tolerances)."""


def rule_set(text: str) -> str:
    """An argparse ``type=``: ``default``, a built-in rule set name, or a rule file that loads.

    The file is read at parse time, so a typo or a malformed rule fails before any work.
    """
    if text == "default":
        return text
    from tensor_eqsat.rules.sets import resolve_rule_set

    try:
        resolve_rule_set(text)
    except TensorEqsatError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def print_json(data: Any) -> None:
    """Machine-readable output: standard JSON on stdout alone.

    Non-finite floats (an overflowing cost) become ``null``, not the non-standard ``Infinity``
    and ``NaN`` that strict JSON readers refuse.
    """
    json.dump(finite_json(data), sys.stdout, indent=2, allow_nan=False)
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
    if math.prod(values) > MAX_ELEMENTS:
        raise argparse.ArgumentTypeError(f"{text!r}: more than 2**60 elements")
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


def parse_shape_points(text: str) -> tuple[dict[str, int], ...]:
    """``NAME=SIZE,NAME=SIZE;NAME=SIZE,...``: sizes of an ONNX model's symbolic dims (its
    ``dim_param`` s), one point per ``;``-separated group; argparse reports the
    ArgumentTypeError it raises.

    >>> parse_shape_points("batch=1,seq=128;batch=8,seq=64")
    ({'batch': 1, 'seq': 128}, {'batch': 8, 'seq': 64})
    """
    points = []
    for group in text.split(";"):
        point: dict[str, int] = {}
        for pair in group.split(","):
            name, sep, value = pair.strip().partition("=")
            if not sep or not name.strip():
                raise argparse.ArgumentTypeError(
                    f"{text!r}: expected NAME=SIZE pairs separated by ',', points by ';' "
                    "(e.g. batch=1,seq=128;batch=8,seq=64)"
                )
            try:
                size = int(value)
            except ValueError:
                raise argparse.ArgumentTypeError(f"{text!r}: size {value!r} is not an integer") from None
            if size < 1:
                raise argparse.ArgumentTypeError(f"{text!r}: every size must be >= 1")
            if point.setdefault(name.strip(), size) != size:
                raise argparse.ArgumentTypeError(f"{text!r}: {name.strip()} is given twice in one point")
        points.append(point)
    return tuple(points)


def add_shapes_argument(p: argparse.ArgumentParser) -> None:
    """The ``--shapes`` of commands that optimize ONNX with symbolic dims."""
    p.add_argument(
        "--shapes",
        type=parse_shape_points,
        default=(),
        metavar="NAME=SIZE,...;...",
        help="sizes of an ONNX model's symbolic dims (dim_params), kept symbolic in the result: the "
        "first point is where it is priced, checked and measured, the others are checked too, e.g. "
        "batch=1,seq=128;batch=8,seq=64 (default: 1 for batch-like names, else 128, and three other "
        "shapes checked)",
    )


DTYPE_CHOICES = ("fp32", "fp16", "bf16", "float32", "float16", "bfloat16")


def add_dtype_argument(p: argparse.ArgumentParser) -> None:
    """The ``--dtype`` of commands that read a model: cast it (a zoo model: build it) in that
    precision."""
    p.add_argument(
        "--dtype",
        choices=DTYPE_CHOICES,
        default=None,
        metavar="{fp32,fp16,bf16}",
        help="run the model in this precision: its floating inputs and weights cast to it "
        "(default: the model's own; the zoo's is fp32)",
    )


def input_shapes_arg(args: argparse.Namespace) -> dict[str, tuple[int, ...]]:
    """The ``--input-shape`` values as a dict; FormatError when a name is given twice."""
    out: dict[str, tuple[int, ...]] = {}
    for name, dims in getattr(args, "input_shape", None) or []:
        if name in out and out[name] != dims:
            raise FormatError(f"--input-shape gives {name!r} twice ({out[name]} and {dims})")
        out[name] = dims
    return out


def finite_json(data: Any) -> Any:
    """``data`` with every non-finite float replaced by None (JSON ``null``).

    >>> finite_json({"a": [1.0, float("inf")], "b": float("nan")})
    {'a': [1.0, None], 'b': None}
    """
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {k: finite_json(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [finite_json(v) for v in data]
    return data


def zoo_model_name(spec: str) -> str | None:
    """The zoo model a graph argument names, or None when it names a file.

    A zoo name always means the model: graph files end in ``.json`` or ``.onnx`` and zoo names
    have no extension, so a folder named like a model in the working directory does not shadow it.
    """
    try:
        zoo = importlib.import_module("tensor_eqsat.zoo")
    except ImportError:
        return None
    if spec not in zoo.names():
        return None
    return spec


def load_graph_arg(
    spec: str,
    *,
    strict: bool = False,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    dtype: str | None = None,
) -> Graph:
    """A graph from a CLI argument: a ``.json`` graph file, an ``.onnx`` model or a zoo model name
    (decided by :meth:`tensor_eqsat.source.Source.of`, suffixes in any case).

    strict: for ONNX files, refuse operators the IR does not model instead of keeping them as
    opaque nodes. input_shapes: static shapes for ONNX inputs with symbolic dims
    (``--input-shape``); an error for other files. Raises FormatError naming the argument when
    it is none of these. dtype: cast the model to this precision (``--dtype``); None keeps its own.
    """
    from tensor_eqsat.source import Source

    return Source.of(spec, input_shapes=input_shapes, strict=strict, dtype=dtype).graph
