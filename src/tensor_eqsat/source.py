"""``Source``: what the user brought, decided once.

A model reaches the optimizer as a zoo name, a graph JSON file, an ONNX file (with static shapes
for its symbolic inputs), or a :class:`~tensor_eqsat.ir.graph.Graph` in memory. :meth:`Source.of`
looks at the argument once and records what it is; everything after (the default target, what the
numeric check and the guard compare against, how a kept original is written) reads that record
instead of asking again. File suffixes are compared without case (``M.ONNX`` is ONNX), and the
output format of a path is decided by :func:`output_format`, the same rule.

Alternatives rejected: deciding from the argument string wherever it matters (five places did,
two of them case-sensitive, and disagreed about ``M.ONNX``).
"""

from __future__ import annotations

import enum
import functools
import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tensor_eqsat.errors import FormatError
from tensor_eqsat.ir.graph import Graph


class SourceKind(enum.Enum):
    """What a source is."""

    ZOO = "zoo"
    JSON = "json"
    ONNX = "onnx"
    GRAPH = "graph"


class OutputFormat(enum.Enum):
    """What a written model is: ONNX for a path ending in ``.onnx`` (any case), else graph JSON."""

    ONNX = "onnx"
    JSON = "json"


def output_format(path: str | Path) -> OutputFormat:
    """The format a model written to ``path`` takes.

    >>> output_format("out.ONNX"), output_format("out.json")
    (<OutputFormat.ONNX: 'onnx'>, <OutputFormat.JSON: 'json'>)
    """
    return OutputFormat.ONNX if Path(path).suffix.lower() == ".onnx" else OutputFormat.JSON


def zoo_names() -> list[str]:
    """The zoo's model names (empty when the zoo cannot be imported)."""
    try:
        return list(importlib.import_module("tensor_eqsat.zoo").names())
    except ImportError:
        return []


@dataclass(frozen=True)
class Source:
    """A model as the user brought it.

    kind: what it is. graph: the model in the IR (an ONNX file imported, opaque regions kept).
    name: how messages name it (the zoo name, the path, or ``"graph"``). model: the zoo name for
    a zoo model, else None. path: the file, for JSON and ONNX. input_shapes: the static shapes
    given for ONNX inputs with symbolic dims. dtype: the precision the model was cast to
    (``--dtype``), None when it is used as it came. shapes: the sizes of an ONNX model's
    symbolic dims (``--shapes``): the first point is the representative one (the symbols'
    hints), the others are checked too; empty: the default hints, and
    :func:`~tensor_eqsat.io.onnx_dims.other_points` checked.
    """

    kind: SourceKind
    graph: Graph
    name: str
    model: str | None = None
    path: Path | None = None
    input_shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    dtype: str | None = None
    shapes: tuple[Mapping[str, int], ...] = ()

    @classmethod
    def of(
        cls,
        source: Source | Graph | str | Path,
        *,
        input_shapes: Mapping[str, Sequence[int]] | None = None,
        strict: bool = False,
        model: str | None = None,
        dtype: str | None = None,
        shapes: Sequence[Mapping[str, int]] = (),
    ) -> Source:
        """The source ``source`` names: a Source (returned as it is), a Graph, a zoo model name, or
        the path of a ``.json`` or ``.onnx`` file (suffixes in any case).

        input_shapes: static shapes for ONNX inputs with symbolic dims (``--input-shape``);
            FormatError for other sources. strict: refuse ONNX operators the IR does not model
            instead of keeping them as opaque nodes. model: the zoo name of an in-memory Graph
            built from the zoo (its rule set and k_multi). shapes: sizes of an ONNX model's
            symbolic dims, the first point the representative one (``--shapes``). dtype: cast the
            model's floating inputs and weights to this precision (``float16``/``fp16``,
            ``bfloat16``/``bf16``, ``float32``), as :func:`~tensor_eqsat.ir.cast.cast_graph` does;
            None (default) keeps the model's own. A zoo model is then built in that precision.

        Raises FormatError naming the argument when it is none of these.

        >>> Source.of("squeezenet").kind, Source.of("squeezenet").default_target in ("cuda", "h200")
        (<SourceKind.ZOO: 'zoo'>, True)
        """
        shapes_given = {k: tuple(int(d) for d in v) for k, v in (input_shapes or {}).items()}
        if dtype is not None:
            src = cls.of(source, input_shapes=input_shapes, strict=strict, model=model, shapes=shapes)
            return src.cast(dtype)
        if isinstance(source, Source):
            return source
        if isinstance(source, Graph):
            if shapes_given or shapes:
                raise FormatError("input_shapes apply to ONNX files only, not to an in-memory Graph")
            return cls(SourceKind.GRAPH, source, model or "graph", model)
        spec = str(source)
        if not spec:
            raise FormatError("empty graph argument: give a graph file (.json or .onnx) or a zoo model name")
        path = Path(spec)
        suffix = path.suffix.lower()
        if (input_shapes or shapes) and suffix != ".onnx":
            what = "--input-shape" if input_shapes else "--shapes"
            raise FormatError(f"{spec}: {what} applies to ONNX files only")
        names = zoo_names()
        if spec in names:  # a zoo name has no suffix, so a file named like a model cannot shadow it
            graph = importlib.import_module("tensor_eqsat.zoo").get(spec)
            return cls(SourceKind.ZOO, graph, spec, spec)
        if path.is_dir():
            raise FormatError(f"{spec}: is a directory, not a graph file (.json or .onnx) or zoo model")
        if suffix == ".onnx":
            from tensor_eqsat.io.onnx_import import import_onnx  # onnx is an optional extra

            points = tuple(dict(p) for p in shapes)
            hints = points[0] if points else None
            graph = import_onnx(path, strict=strict, input_shapes=input_shapes or None, hints=hints)
            if points and not graph.is_symbolic:
                raise FormatError(f"{spec}: --shapes given, but the model has no symbolic dims")
            return cls(SourceKind.ONNX, graph, spec, None, path, shapes_given, shapes=points)
        if suffix == ".json":
            from tensor_eqsat.ir.serialize import load

            return cls(SourceKind.JSON, load(path), spec, None, path)
        if path.exists():
            raise FormatError(f"{spec}: unsupported file type {path.suffix!r} (expected .json or .onnx)")
        if not names:
            raise FormatError(f"{spec}: no such file")
        raise FormatError(f"{spec}: no such file or zoo model (models: {', '.join(names)})")

    def cast(self, dtype: str) -> Source:
        """This source in precision ``dtype`` (itself when it is in that precision already);
        FormatError for an unknown dtype name."""
        from dataclasses import replace

        from tensor_eqsat.ir.cast import cast_graph, precision
        from tensor_eqsat.ir.dtypes import DType

        try:
            target = DType.parse(dtype)
        except ValueError as exc:
            raise FormatError(f"{self.name}: {exc}") from None
        if not target.is_float:
            raise FormatError(
                f"{self.name}: --dtype must be a floating dtype (fp32, fp16, bf16), got {dtype!r}"
            )
        if precision(self.graph) is target and all(
            DType(n.dtypes[0]) in (target, DType.INT64) for n in self.graph.nodes if n.spec.is_leaf
        ):
            return self
        return replace(self, graph=cast_graph(self.graph, target), dtype=target.value)

    @property
    def is_onnx(self) -> bool:
        """Whether the user brought an ONNX file."""
        return self.kind is SourceKind.ONNX

    @property
    def default_target(self) -> str:
        """The target a run on this source defaults to (``ort-cpu`` for ONNX, else the GPU target
        of this machine: ``cuda``, or the recorded ``h200`` profile)."""
        from tensor_eqsat.target.targets import default_target

        return default_target(str(self.path) if self.is_onnx else None).name

    def reference(self) -> Any:
        """What results are checked and timed against: the user's ONNX file itself (a copy with
        the static input shapes, when they were given), so an import or export bug cannot hide
        behind a round trip through the IR; the graph otherwise."""
        if not self.is_onnx or self.dtype is not None:  # a cast model is checked as the graph
            return self.graph
        assert self.path is not None
        if not self.input_shapes and not self.graph.is_symbolic:
            return str(self.path)
        return self._reference_model

    @functools.cached_property
    def _reference_model(self) -> Any:
        """The user's model with the static input shapes or the symbols' hints, made once (the
        check and the guard both read it; BERT-base is 440 MB)."""
        from tensor_eqsat.io.inputs import with_input_shapes
        from tensor_eqsat.io.onnx_common import load_model
        from tensor_eqsat.io.onnx_dims import set_model_symbols

        assert self.path is not None
        model = with_input_shapes(load_model(self.path), self.input_shapes, str(self.path))
        # The symbols' hints go with it: it is run, checked and timed at the representative shape.
        set_model_symbols(model, self.graph.symbols())
        return model

    def symbols_note(self) -> str:
        """What a delivery says about a symbolic model: its symbols, the representative shape it
        is priced, checked and measured at, and the other shapes it is checked at."""
        syms = self.graph.symbols()
        rep = ", ".join(f"{n}={s.hint}" for n, s in sorted(syms.items()))
        given = "given by --shapes" if self.shapes else "default hints: 1 for batch-like names, else 128"
        others = "; ".join(", ".join(f"{k}={v}" for k, v in sorted(p.items())) for p in self.check_points())
        return (
            f"symbolic dims {', '.join(sorted(syms))} kept: priced and measured at {rep} ({given}), "
            f"checked there and at {others or 'no other shape'}"
        )

    def check_points(self) -> tuple[dict[str, int], ...]:
        """The shapes besides the representative one that a symbolic model is checked at: the
        ``--shapes`` points after the first, else :func:`~tensor_eqsat.io.onnx_dims.other_points`
        (empty for a static graph)."""
        if not self.graph.is_symbolic:
            return ()
        if len(self.shapes) > 1:
            return tuple(dict(p) for p in self.shapes[1:])
        from tensor_eqsat.io.onnx_dims import other_points

        return other_points(self.graph.symbols())
