"""Lossless, versioned JSON for graphs.

Format (version 2)::

    {"format": "tensor-eqsat-graph", "version": 2,
     "nodes": [{"id": 0, "op": "input", "attrs": {"shape": [1, 3], "name": "x", "dtype": "float32"},
                "inputs": []}, ...],
     "outputs": [[node, index], ...],
     "weights": {"w_0": {"shape": [...], "dtype": "float16", "data": "<base64 little-endian>"}}}

A graph with symbolic dims (ir/symbolic.py) adds ``"symbols": {"s0": {"hint": 8, "min": 2, "max":
null}, ...}`` and writes each symbolic dim of a shape attribute as its polynomial's text
(``"shape": ["s0", "12*s0", 64]``); a file without symbolic dims has no ``symbols`` key.

Weight data is stored in the weight's dtype: float32 and float16 as IEEE little-endian, bfloat16
as the upper 16 bits of its float32 value. Version 1 (before dtypes) has no ``dtype`` attribute on
leaves and float32 data only; it loads as a float32 graph.

Node ids are positions; inputs must refer to earlier nodes. Loading rebuilds the graph through the
validating builder, so a hand-edited file with a shape error fails with the node named.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tensor_eqsat.errors import FormatError, TensorEqsatError
from tensor_eqsat.ir.dtypes import DType, round_to
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.ops import get_op
from tensor_eqsat.ir.symbolic import Symbol, SymDim, dim_from_json, dim_to_json
from tensor_eqsat.outputs import atomic_write

FORMAT = "tensor-eqsat-graph"
VERSION = 2
READS = (1, 2)
"""The versions :func:`from_dict` reads."""

_CODES = {"float32": "<f4", "float16": "<f2", "bfloat16": "<u2"}


def _encode(arr: np.ndarray, dtype: str) -> str:
    if dtype == "bfloat16":
        bits = np.ascontiguousarray(round_to(arr, dtype), dtype=np.float32).view(np.uint32) >> 16
        raw = bits.astype("<u2").tobytes()
    else:
        raw = np.ascontiguousarray(arr, dtype=_CODES[dtype]).tobytes()
    return base64.b64encode(raw).decode()


def _decode(data: str, dtype: str) -> np.ndarray:
    if dtype == "float64":
        return np.frombuffer(base64.b64decode(data), dtype="<f8").copy()
    raw = np.frombuffer(base64.b64decode(data), dtype=_CODES[dtype])
    if dtype == "bfloat16":
        return (raw.astype(np.uint32) << 16).view(np.float32)
    return raw.astype(DType(dtype).storage_dtype)


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [dim_to_json(v) if isinstance(v, SymDim) else v for v in value]
    return dim_to_json(value) if isinstance(value, SymDim) else value


def _dims_from_json(spec: Any, attrs: dict[str, Any], symbols: Mapping[str, Symbol]) -> dict[str, Any]:
    """``attrs`` with the symbolic dims' text of its ``dims`` attributes parsed."""
    out = dict(attrs)
    for a in spec.attrs:
        value = out.get(a.name)
        if a.kind == "dims" and isinstance(value, list) and any(isinstance(v, str) for v in value):
            out[a.name] = [dim_from_json(v, symbols) for v in value]
    return out


def _symbols_from_json(data: Any, source: str) -> dict[str, Symbol]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise FormatError(f"{source}: 'symbols' must be an object mapping names to hint, min and max")
    try:
        return {name: Symbol.from_json(name, v if isinstance(v, dict) else {}) for name, v in data.items()}
    except TensorEqsatError as exc:
        raise FormatError(f"{source}: {exc}") from None


def to_dict(graph: Graph, *, include_weights: bool = True) -> dict[str, Any]:
    """The JSON-ready dict of a graph (weight data base64-encoded when present)."""
    nodes = []
    for n in graph.nodes:
        nodes.append(
            {
                "id": n.id,
                "op": n.op,
                "attrs": {k: _jsonable(v) for k, v in n.spec.attr_dict(n.attrs).items()},
                "inputs": [list(r) for r in n.inputs],
            }
        )
    out: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "nodes": nodes,
        "outputs": [list(r) for r in graph.outputs],
    }
    symbols = graph.symbols()
    if symbols:
        out["symbols"] = {name: s.to_json() for name, s in sorted(symbols.items())}
    if include_weights and graph.weight_data:
        dtypes = {graph.name_of(n.id): n.dtypes[0] for n in graph.weights()}
        out["weights"] = {
            name: {
                "shape": list(arr.shape),
                "dtype": dtypes.get(name, "float32"),
                "data": _encode(arr, dtypes.get(name, "float32")),
            }
            for name, arr in sorted(graph.weight_data.items())
        }
    return out


MAX_INT_DIGITS = 400
"""JSON integers longer than this are read as :class:`_Oversized` (no attribute of a graph needs
more: a float's range ends at about 1.8e308), so a 100,000-digit number is reported with its
node instead of failing Python's int conversion limit (4,300 digits) in the JSON parser."""


class _Oversized:
    """A JSON integer of more than :data:`MAX_INT_DIGITS` digits, kept unconverted."""

    def __init__(self, text: str) -> None:
        self.digits = len(text.lstrip("-"))

    def __repr__(self) -> str:
        return f"<integer of {self.digits} digits>"


def _parse_int(text: str) -> int | _Oversized:
    return int(text) if len(text) <= MAX_INT_DIGITS else _Oversized(text)


def _oversized(value: Any) -> bool:
    return isinstance(value, _Oversized) or (isinstance(value, list) and any(_oversized(v) for v in value))


def _out_of_range(value: Any) -> str | None:
    """Why ``value`` (an attribute, possibly a list) holds an integer no attribute can take, or None."""
    if isinstance(value, _Oversized):
        return f"an integer of {value.digits} digits is out of range"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 2**63:
        return f"an integer of {len(str(abs(value)))} digits is out of range"
    if isinstance(value, list):
        for v in value:
            why = _out_of_range(v)
            if why is not None:
                return why
    return None


def _is_ref(value: Any) -> bool:
    """True for a [node, index] pair of non-negative ints (JSON true/false are not ints here)."""
    return (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)
    )


def from_dict(data: Any, source: str = "<dict>") -> Graph:
    """Rebuild a Graph from :func:`to_dict` output; raises FormatError naming the field or node."""
    if not isinstance(data, dict):
        raise FormatError(f"{source}: top level must be a JSON object")
    if data.get("format") != FORMAT:
        raise FormatError(f"{source}: not a tensor-eqsat graph (format is {data.get('format')!r})")
    if data.get("version") not in READS:
        raise FormatError(
            f"{source}: unsupported version {data.get('version')!r} (this reads {', '.join(map(str, READS))})"
        )
    nodes = data.get("nodes")
    if not isinstance(nodes, list):
        raise FormatError(f"{source}: 'nodes' must be a list")
    symbols = _symbols_from_json(data.get("symbols"), source)
    g = Graph()
    for pos, entry in enumerate(nodes):
        where = f"{source}: node {pos}"
        if not isinstance(entry, dict) or not isinstance(entry.get("op"), str):
            raise FormatError(f"{where}: must be an object with an 'op' string")
        if entry.get("id", pos) != pos:
            raise FormatError(f"{where}: id {entry.get('id')!r} does not match its position")
        inputs = entry.get("inputs", [])
        attrs = entry.get("attrs", {})
        if not isinstance(inputs, list) or not all(_is_ref(r) for r in inputs):
            raise FormatError(f"{where} ({entry['op']}): 'inputs' must be a list of [node, index] pairs")
        if not isinstance(attrs, dict):
            raise FormatError(f"{where} ({entry['op']}): 'attrs' must be an object")
        try:
            spec = get_op(entry["op"])
            for node_id, _ in inputs:
                if not 0 <= node_id < pos:
                    raise FormatError(f"{where} ({entry['op']}): input node {node_id} is not an earlier node")
            for key, value in attrs.items():
                if _oversized(value):
                    raise FormatError(f"{where} ({entry['op']}): attribute {key!r}: {_out_of_range(value)}")
            canon = spec.make_attrs(**(_dims_from_json(spec, attrs, symbols) if symbols else attrs))
            g.add_node(spec.name, canon, [tuple(r) for r in inputs])
        except FormatError:
            raise
        except (OverflowError, ValueError) as exc:
            # float(10**400) or int64(2**70): name the attribute that holds the huge integer.
            bad = [(k, why) for k, v in attrs.items() if (why := _out_of_range(v)) is not None]
            if not bad:
                raise FormatError(f"{where} ({entry['op']}): {type(exc).__name__}: {exc}") from exc
            raise FormatError(f"{where} ({entry['op']}): attribute {bad[0][0]!r}: {bad[0][1]}") from exc
        except TensorEqsatError as exc:
            raise FormatError(f"{where} ({entry['op']}): {exc}") from exc
    outputs = data.get("outputs")
    if not isinstance(outputs, list) or not outputs:
        raise FormatError(f"{source}: 'outputs' must be a non-empty list of [node, index] pairs")
    for ref in outputs:
        if not _is_ref(ref) or not ref[0] < len(g.nodes) or not ref[1] < len(g.nodes[ref[0]].shapes):
            raise FormatError(f"{source}: output {ref!r} does not name an existing tensor")
        g.outputs.append((ref[0], ref[1]))
    weights = data.get("weights")
    if weights is None:
        weights = {}
    if not isinstance(weights, dict):
        raise FormatError(f"{source}: 'weights' must be an object mapping weight names to data")
    for name, w in weights.items():
        dtype = w.get("dtype", "float32") if isinstance(w, dict) else None
        if dtype not in WEIGHT_DTYPES:
            raise FormatError(
                f"{source}: weight {name!r}: dtype {dtype!r} is not supported "
                f"(one of {', '.join(WEIGHT_DTYPES)})"
            )
        try:
            arr = _decode(w["data"], dtype).reshape(w["shape"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise FormatError(f"{source}: weight {name!r}: bad data ({dtype}: {exc})") from exc
        leaf = g._names.get(name)
        if leaf is None or g.nodes[leaf].op != "weight":
            raise FormatError(f"{source}: data given for unknown weight {name!r}")
        leaf_dtype = g.nodes[leaf].dtypes[0]
        if dtype != leaf_dtype:
            # A float32 weight reads float16/bfloat16 data exactly and float64 data (as numpy
            # writes it) rounded once; a reduced-precision weight takes only its own precision.
            if leaf_dtype != "float32":
                raise FormatError(f"{source}: weight {name!r} data is {dtype}, the weight {leaf_dtype}")
            arr = arr.astype(np.float32)
        if arr.shape != g.nodes[leaf].shapes[0]:
            raise FormatError(
                f"{source}: weight {name!r} data shape {arr.shape} != declared {g.nodes[leaf].shapes[0]}"
            )
        g.weight_data[name] = arr
    return g


WEIGHT_DTYPES = {"float32": "<f4", "float16": "<f2", "bfloat16": "<u2", "float64": "<f8"}
"""Weight data types a graph JSON may declare (``dtype``; little-endian): a weight's own precision;
a float32 weight also reads float16 and bfloat16 data (exactly) and float64 (rounded once)."""


def dumps(graph: Graph, *, include_weights: bool = True, indent: int | None = None) -> str:
    """JSON text of a graph."""
    return json.dumps(to_dict(graph, include_weights=include_weights), indent=indent)


def loads(text: str, source: str = "<string>") -> Graph:
    """Graph from JSON text; raises FormatError on malformed JSON with line and column."""
    try:
        data = json.loads(text, parse_int=_parse_int)
    except json.JSONDecodeError as exc:
        raise FormatError(
            f"{source}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from exc
    except RecursionError:
        raise FormatError(f"{source}: invalid JSON: nested too deeply") from None
    return from_dict(data, source)


def save(graph: Graph, path: str | os.PathLike[str], *, include_weights: bool = True) -> None:
    """Write a graph as JSON atomically (a temp file renamed into place: never half-written).

    A symlink is followed (its target is replaced); see :func:`tensor_eqsat.outputs.atomic_write`.
    Raises OutputError naming the path when it cannot be written.
    """
    atomic_write(path, dumps(graph, include_weights=include_weights))


def load(path: str | os.PathLike[str]) -> Graph:
    """Read a graph written by :func:`save`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise FormatError(f"{path}: cannot read ({exc.strerror})") from exc
    except UnicodeDecodeError as exc:
        raise FormatError(f"{path}: not a UTF-8 text file (byte {exc.start}: {exc.reason})") from exc
    return loads(text, str(path))
