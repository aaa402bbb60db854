"""The project's exception hierarchy.

Every error a user can provoke (a bad graph, a bad attribute, a malformed file) is a subclass of
:class:`TensorEqsatError`, so the CLI can turn it into a one-line message and a non-zero exit code
instead of a traceback.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import TypeVar


class ExitCode(IntEnum):
    """The command line's exit statuses, one meaning each (docs/reference.md lists them)."""

    OK = 0
    """Done: the model handed back (optimized, or the original kept, with why) was reported and
    written where asked."""
    CHECK_FAILED = 1
    """A numeric check failed: the result differs from the original and was not written
    (``optimize``); the two models differ (``verify``); a rule failed its check (``rules``); a
    run failed (``bench``)."""
    USAGE = 2
    """Bad input: an unknown option or a setting out of range, a malformed or unreadable model or
    file, an output that cannot be written."""
    RESOURCES = 3
    """The machine cannot do what was asked: refused before any work (a model whose tensors do
    not fit in the memory available, an export that cannot fit the time budget), or out of
    memory while running."""
    INTERNAL = 4
    """An internal error, a bug of tensor-eqsat: the traceback is printed; please report it."""
    INTERRUPTED = 130
    """Ctrl-C (128 + SIGINT, as shells report it): what is safe was handed back."""
    BROKEN_PIPE = 141
    """The reader of stdout went away (``... | head``; 128 + SIGPIPE)."""


class TensorEqsatError(Exception):
    """Base class of every error raised on purpose by tensor-eqsat.

    cli: the same message as the command line should show it, when the message names a setting
        (``input_shapes={...}`` in Python is ``--input-shape NAME=D0,...`` on the command line;
        see :class:`Setting` and :func:`naming`). Default None: the message is the same.

    >>> e = FormatError("m.onnx: give input_shapes={...}", cli="m.onnx: give --input-shape NAME=D0,...")
    >>> str(e), e.cli_text()
    ('m.onnx: give input_shapes={...}', 'm.onnx: give --input-shape NAME=D0,...')
    """

    def __init__(self, *args: object, cli: str | None = None) -> None:
        super().__init__(*args)
        self.cli_message = cli

    def cli_text(self) -> str:
        """The message as the command line prints it."""
        cli = getattr(self, "cli_message", None)  # a subclass may not have called __init__
        return str(self) if cli is None else cli


@dataclass(frozen=True)
class Setting:
    """How a message tells the user to give a setting: as Python code, and as a CLI option."""

    python: str
    cli: str


TE = TypeVar("TE", bound=TensorEqsatError)


def naming(error: type[TE], head: str, setting: Setting, tail: str = "") -> TE:
    """``error`` whose message is ``head + setting + tail``, with ``setting`` spelled as Python
    code in ``str()`` and as the CLI option in :meth:`~TensorEqsatError.cli_text`.

    >>> shapes = Setting("input_shapes={...}", "--input-shape NAME=D0,...")
    >>> e = naming(FormatError, "x.onnx: give static shapes with ", shapes)
    >>> print(str(e)); print(e.cli_text())
    x.onnx: give static shapes with input_shapes={...}
    x.onnx: give static shapes with --input-shape NAME=D0,...
    """
    return error(head + setting.python + tail, cli=head + setting.cli + tail)


class ShapeError(TensorEqsatError):
    """An operator's inputs have shapes it cannot accept.

    The message names the op, the offending attribute (if any) and every input shape.

    >>> str(ShapeError("matmul", "inner dims differ: 3 vs 4", [(2, 3), (4, 5)]))
    'matmul: inner dims differ: 3 vs 4 (input shapes: (2, 3), (4, 5))'
    """

    def __init__(
        self,
        op: str,
        message: str,
        shapes: Sequence[tuple[int, ...]] = (),
        attr: str | None = None,
    ) -> None:
        self.op = op
        self.attr = attr
        self.shapes = tuple(tuple(s) for s in shapes)
        where = f"{op}.{attr}" if attr else op
        shown = ", ".join(str(s) for s in self.shapes)
        suffix = f" (input shapes: {shown})" if self.shapes else ""
        super().__init__(f"{where}: {message}{suffix}")


class AttributeValueError(TensorEqsatError):
    """An operator attribute is missing, unknown, or of the wrong type or value."""

    def __init__(self, op: str, attr: str, message: str) -> None:
        self.op = op
        self.attr = attr
        super().__init__(f"{op}.{attr}: {message}")


class GraphError(TensorEqsatError):
    """A graph is malformed (unknown op, wrong arity, tensor from another graph, no outputs...)."""


class FormatError(TensorEqsatError):
    """A file could not be read: it names the file and, where known, the line or field."""


class ResourceError(TensorEqsatError):
    """The machine cannot do what was asked (a model whose weights do not fit in its memory):
    refused before the work, naming what is needed and what there is."""


class ConfigError(TensorEqsatError, ValueError):
    """A setting has a bad value or names an unknown strategy (search, extractor, rule set).

    It is also a ValueError, the type such errors had before they joined this hierarchy."""


E = TypeVar("E", bound=Enum)


def parse_enum(
    enum_type: type[E],
    value: E | str,
    what: str,
    error: type[TensorEqsatError] = ConfigError,
    *,
    where: str = "",
) -> E:
    """The member of ``enum_type`` named by ``value`` (a member passes through), or ``error``
    saying ``{where}unknown {what} {value!r} (known: ...)``. The one place enum names are parsed.

    >>> from tensor_eqsat.ir.types import Padding
    >>> parse_enum(Padding, "same", "padding")
    <Padding.SAME: 'same'>
    >>> parse_enum(Padding, "full", "padding")
    Traceback (most recent call last):
    ...
    tensor_eqsat.errors.ConfigError: unknown padding 'full' (known: same, valid)
    """
    if isinstance(value, enum_type):
        return value
    try:
        return enum_type(value)
    except ValueError:
        known = ", ".join(str(m.value) for m in enum_type)
        raise error(f"{where}unknown {what} {value!r} (known: {known})") from None


def check_positive_int(value: object, what: str, error: type[ValueError] = ConfigError) -> None:
    """Raise ``error`` saying ``{what} must be a positive integer or None, got {value!r}`` unless
    ``value`` is None or an int of at least 1 (a bool is not a count).

    >>> check_positive_int(100, "node_limit")
    >>> check_positive_int(0, "node_limit")
    Traceback (most recent call last):
    ...
    tensor_eqsat.errors.ConfigError: node_limit must be a positive integer or None, got 0
    """
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise error(f"{what} must be a positive integer or None, got {value!r}")
