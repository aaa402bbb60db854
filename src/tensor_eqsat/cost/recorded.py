"""Recorded device profiles: price ops from a timing table measured on a real device.

TASO's method, shipped as data: each op configuration is timed once on the device (the measured
cost model does this, ``tensor-eqsat profile`` does it for whole models) and the table then
prices graphs on any machine. A table is either

* a timing-cache SQLite file (:mod:`tensor_eqsat.cost.timing_cache`; what ``profile -o`` and
  ``$TENSOR_EQSAT_CACHE_DIR`` hold), or
* a JSON export of one (:func:`export_table`), the form the package ships: ``recorded:h200`` is
  ``cost/tables/h200.json``, 932 configurations timed on an NVIDIA H200 (its ``source`` field
  and ``cost/tables/README.md`` say how).

A configuration in the table costs its recorded time; one the table lacks is priced by a GPU
roofline fitted to the table (:mod:`tensor_eqsat.cost.fitted`), so a search may explore rewrites
nobody timed. By default the model prices the **eager** execution mode: each op's recorded time
goes through the table's :class:`~tensor_eqsat.cost.execution.EagerLaunch` composition (the
profile's own when it ships one, else the H200 fit), so a graph's price predicts a PyTorch eager
forward pass, launch floor included; ``mode="isolated"`` prices the bare recorded times.

**In the graph** (issue 35). Isolated timings of some rewrites do not compose into whole-graph
time on the GPU, so the eager mode prices them by what whole graphs showed:

* a grouped convolution costs no less than the same convolution recorded with finer groups
  (:func:`monotone_groups`): the merged grouped convolutions that the table records as faster
  (TASO's merge_gconv) ran slower in every whole-graph run (ResNeXt-50 6 % slower eager for a
  predicted 5.3 % gain, MobileNet-v2 5 %), and no run confirmed one;
* an activation concatenation costs :data:`IN_GRAPH_MS` more than its isolated time (the copy
  into a fresh buffer and what follows it, fitted on the first set's 13 whole-graph pairs:
  ``benchmarks/gpu_whole_graph_fit.py``).

Fitted on ``calibration/h200-2026-11`` and tested on ``h200-2026-11b`` (10 graphs the project's
defaults made, none of them in the first set): none predicted faster that ran slower, within 5
points of the measured eager gain on 8 of 10 (before: 2 predicted faster ran slower, 5 of 10).

Alternatives rejected: shipping the SQLite file itself (a read-only package resource cannot be
opened in the cache's WAL mode, and JSON diffs and reviews), and refusing configurations the table
lacks (every search would stop at the first rewrite nobody timed).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import math
import os
import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from tensor_eqsat.cost.dtype_rates import compute_scale
from tensor_eqsat.cost.execution import DEFAULT_EAGER, EagerLaunch, ExecutionMode
from tensor_eqsat.cost.fitted import FittedRoofline
from tensor_eqsat.cost.model import CostModelError, KernelCostModel, WeightOps
from tensor_eqsat.cost.steady import FloorCorrection, steady_state
from tensor_eqsat.cost.timing_cache import encode_attrs, key_dtype, shapes_key
from tensor_eqsat.errors import TensorEqsatError
from tensor_eqsat.ir.dtypes import DType
from tensor_eqsat.ir.ops import get_op
from tensor_eqsat.ir.opspec import Attrs, OpSpec
from tensor_eqsat.ir.types import Shape

log = logging.getLogger(__name__)

SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")
"""File endings read as timing-cache databases; ``.json`` files are read as exports."""

TableKey = tuple[str, str, str]


@dataclass(frozen=True)
class TimingTable:
    """Recorded times of one device and library: ``(op, attrs text, shapes text) -> ms``.

    name: the profile's name (``h200``, or the file's stem). device, library: the timing cache's
    keys (``cuda:NVIDIA H200``, ``torch 2.11.0+cu130``). source: where the table comes from.
    entries: the times pricing uses. eager: the table's own eager composition, if it ships one.
    recorded: the times as recorded, when ``entries`` were brought to the steady launch floor
        (:meth:`steady`, :mod:`tensor_eqsat.cost.steady`); None when they are the same.
    recorded_at: when each entry was recorded (seconds), if known.
    correction: what the steady-state correction did, when it was tried.
    dtype: the precision the table's configurations were timed in (a JSON export's ``dtype``
        field; ``float32`` for tables written before it, and the timing cache's rows).
    """

    name: str
    device: str
    library: str
    source: str
    entries: Mapping[TableKey, float]
    eager: EagerLaunch | None = None
    description: str = ""
    recorded: Mapping[TableKey, float] | None = None
    recorded_at: Mapping[TableKey, float] | None = None
    correction: FloorCorrection | None = None
    dtype: str = "float32"
    _fit: list[FittedRoofline] = field(default_factory=list, repr=False, compare=False)

    @classmethod
    def steady(
        cls,
        name: str,
        device: str,
        library: str,
        source: str,
        recorded: Mapping[TableKey, float],
        recorded_at: Mapping[TableKey, float] | None,
        *,
        eager: EagerLaunch | None = None,
        description: str = "",
    ) -> TimingTable:
        """A table whose entries are ``recorded`` brought to the steady launch floor (see
        :mod:`tensor_eqsat.cost.steady`; left as recorded where that cannot be done)."""
        decode: dict[TableKey, tuple[str, tuple[Shape, ...]]] = {}
        for key in recorded:
            op, _, shapes = key
            try:
                get_op(op)
                decode[key] = (op, decode_shapes(shapes))
            except (TensorEqsatError, ValueError, TypeError):
                continue  # rows() names an undecodable entry when the table is fitted
        entries, correction = steady_state(recorded, recorded_at, decode, device=device)
        if correction.offsets:
            summary = correction.to_dict()
            log.info(
                "recorded: %s: %d of %d entries brought to the steady launch floor (%.4f ms; "
                "median offset %.4f ms)",
                source,
                summary["corrected"],
                len(recorded),
                correction.base_ms,
                summary["median_offset_ms"],
            )
        return cls(
            name,
            device,
            library,
            source,
            entries,
            eager=eager,
            description=description,
            recorded=dict(recorded) if correction.offsets else None,
            recorded_at=dict(recorded_at) if recorded_at else None,
            correction=correction,
        )

    @property
    def as_recorded(self) -> Mapping[TableKey, float]:
        """The times as recorded (``entries`` when no correction changed them)."""
        return self.recorded if self.recorded is not None else self.entries

    def __len__(self) -> int:
        return len(self.entries)

    def rows(self) -> Iterator[tuple[str, Attrs, tuple[Shape, ...], float]]:
        """Every entry decoded: (op, attribute tuple, input shapes, ms). Entries of ops this
        version does not know (a table from a newer one) are left out, with a warning.

        Raises CostModelError naming the table and the entry when one cannot be decoded.
        """
        unknown: set[str] = set()
        for (op, attrs, shapes), ms in self.entries.items():
            try:
                get_op(op)
            except TensorEqsatError:
                unknown.add(op)
                continue
            try:
                decoded = decode_attrs(attrs), decode_shapes(shapes)
            except (ValueError, TypeError) as exc:
                raise CostModelError(
                    f"recorded: {self.source}: entry ({op}, {attrs}, {shapes}) cannot be decoded ({exc})"
                ) from None
            yield op, decoded[0], decoded[1], ms
        if unknown:
            log.warning("recorded: %s: unknown ops left out: %s", self.source, sorted(unknown))

    @property
    def fit(self) -> FittedRoofline:
        """The roofline fitted to this table (computed on first use, then kept).

        Raises CostModelError naming the table when an entry does not suit its op.
        """
        if not self._fit:
            try:
                self._fit.append(FittedRoofline.fit(self.rows()))
            except (TensorEqsatError, ValueError) as exc:
                if isinstance(exc, CostModelError):
                    raise
                raise CostModelError(f"recorded: {self.source}: cannot fit a roofline ({exc})") from None
        return self._fit[0]

    def without(self, keys: set[TableKey] | frozenset[TableKey]) -> TimingTable:
        """A copy without ``keys`` (held-out evaluation); a corrected table's correction is made
        again from the entries left, so nothing of the removed entries reaches the copy."""
        if self.correction is not None:
            raw = {k: v for k, v in self.as_recorded.items() if k not in keys}
            at = {k: v for k, v in (self.recorded_at or {}).items() if k not in keys}
            return TimingTable.steady(
                self.name, self.device, self.library, self.source, raw, at or None, eager=self.eager
            )
        kept = {k: v for k, v in self.entries.items() if k not in keys}
        return TimingTable(self.name, self.device, self.library, self.source, kept, self.eager)


def decode_attrs(text: str) -> Attrs:
    """The attribute tuple :func:`~tensor_eqsat.cost.timing_cache.encode_attrs` wrote.

    >>> decode_attrs('[[2,2],"same","relu"]')
    ((2, 2), 'same', 'relu')
    """

    def tup(v: Any) -> Any:
        return tuple(tup(x) for x in v) if isinstance(v, list) else v

    return tuple(tup(v) for v in json.loads(text))


def decode_shapes(text: str) -> tuple[Shape, ...]:
    """The input shapes :func:`~tensor_eqsat.cost.timing_cache.shapes_key` wrote.

    >>> decode_shapes("[[1,8],[8,8]]")
    ((1, 8), (8, 8))
    """
    return tuple(tuple(int(d) for d in s) for s in json.loads(text))


def shipped_tables() -> list[str]:
    """Names of the recorded profiles shipped with the package.

    >>> shipped_tables()
    ['h200']
    """
    folder = resources.files("tensor_eqsat.cost").joinpath("tables")
    return sorted(p.name[: -len(".json")] for p in folder.iterdir() if p.name.endswith(".json"))


def _is_path(name: str) -> bool:
    return name.endswith((".json", *SQLITE_SUFFIXES)) or "/" in name or os.sep in name


@functools.lru_cache(maxsize=8)
def _load_cached(name_or_path: str, device: str | None) -> TimingTable:
    if not _is_path(name_or_path):
        if name_or_path not in shipped_tables():
            known = ", ".join(shipped_tables())
            raise CostModelError(
                f"recorded: unknown profile {name_or_path!r} (shipped: {known}; or a timing file "
                f"ending in {', '.join((*SQLITE_SUFFIXES, '.json'))})"
            )
        text = resources.files("tensor_eqsat.cost").joinpath("tables", f"{name_or_path}.json").read_text()
        return _from_json(text, f"tables/{name_or_path}.json", name_or_path)
    return read_table_file(name_or_path, device=device)


def read_table_file(path: str | os.PathLike[str], *, device: str | None = None) -> TimingTable:
    """A timing file read now (SQLite timing cache or JSON export), not through
    :func:`load_table`'s cache: for a file that is being written. Errors as :func:`load_table`."""
    path = Path(path)
    if not path.is_file():
        raise CostModelError(f"recorded: {path}: no such timing file")
    if path.suffix == ".json":
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CostModelError(f"recorded: {path}: cannot read timing table ({exc})") from None
        return _from_json(text, str(path), path.stem)
    return _from_sqlite(path, device)


def load_table(name_or_path: str, *, device: str | None = None) -> TimingTable:
    """A shipped profile by name (``"h200"``) or a timing file (SQLite timing cache or JSON export).

    device: for a SQLite file holding several devices, the one to use (its device key, or a
        part of it such as ``"H200"``). Default None: the file must hold exactly one.

    Raises CostModelError naming the file (missing, unreadable, not a timing table, empty,
    several devices) or the unknown profile name.

    >>> t = load_table("h200")
    >>> t.device, len(t)
    ('cuda:NVIDIA H200', 932)
    """
    return _load_cached(str(name_or_path), device)


def _from_json(text: str, source: str, stem: str) -> TimingTable:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CostModelError(f"recorded: {source}: line {exc.lineno}: invalid JSON ({exc.msg})") from None
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise CostModelError(f"recorded: {source}: not a timing table export (no 'rows' list)")
    entries: dict[TableKey, float] = {}
    recorded_at: dict[TableKey, float] = {}
    for i, row in enumerate(data["rows"]):
        ok = isinstance(row, list) and len(row) >= 4 and all(isinstance(v, str) for v in row[:3])
        if not ok or not _positive(row[3]):
            raise CostModelError(
                f"recorded: {source}: row {i} must be [op, attrs, shapes, ms > 0, ...], got {row!r}"
            )
        key = (row[0], row[1], row[2])
        entries[key] = float(row[3])
        if len(row) >= 5:
            if isinstance(row[4], bool) or not isinstance(row[4], int | float) or not math.isfinite(row[4]):
                raise CostModelError(
                    f"recorded: {source}: row {i}: the fifth column (recorded at, seconds) must be a "
                    f"number, got {row[4]!r}"
                )
            recorded_at[key] = float(row[4])
    if not entries:
        raise CostModelError(f"recorded: {source}: the timing table is empty")
    if recorded_at and len(recorded_at) != len(entries):
        raise CostModelError(
            f"recorded: {source}: {len(recorded_at)} of {len(entries)} rows say when they were "
            f"recorded; give the fifth column on every row or on none"
        )
    eager = None
    if "eager" in data:
        try:
            eager = EagerLaunch.from_dict(data["eager"], source)
        except ValueError as exc:
            raise CostModelError(f"recorded: {exc}") from None
    dtype = data.get("dtype", "float32")
    if dtype not in ("float32", "float16", "bfloat16"):
        raise CostModelError(f"recorded: {source}: dtype must be float32, float16 or bfloat16, got {dtype!r}")
    table = TimingTable.steady(
        name=str(data.get("name") or stem),
        device=str(data.get("device", "unknown")),
        library=str(data.get("library", "unknown")),
        source=str(data.get("source", source)),
        recorded=entries,
        recorded_at=recorded_at or None,
        eager=eager,
        description=str(data.get("description", "")),
    )
    return table if dtype == "float32" else dataclasses.replace(table, dtype=dtype)


def _positive(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and value > 0


def _open_read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection to a timing database that creates nothing beside it.

    Without a ``-wal`` file beside it every row is in the file itself, so it is opened
    ``immutable=1``: no ``-wal`` or ``-shm`` is created (reading works on read-only storage and
    leaves the folder as it was). With one (a writer is at work, or rows are not checkpointed
    yet), ``mode=ro`` reads them too; where that cannot open (read-only storage: the WAL index
    needs ``-shm``), the file alone is read, with a warning.
    """
    from urllib.parse import quote

    uri = "file:" + quote(str(path.resolve()))
    wal = Path(f"{path}-wal")
    if not wal.exists():
        return sqlite3.connect(f"{uri}?immutable=1", uri=True)
    try:
        conn = sqlite3.connect(f"{uri}?mode=ro", uri=True)
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        return conn
    except sqlite3.OperationalError as exc:
        log.warning("recorded: %s: cannot read its write-ahead log (%s); reading the file alone", path, exc)
        return sqlite3.connect(f"{uri}?immutable=1", uri=True)


def _from_sqlite(path: Path, device: str | None) -> TimingTable:
    try:
        conn = _open_read_only(path)
    except sqlite3.Error as exc:
        raise CostModelError(f"recorded: {path}: cannot open timing database ({exc})") from None
    try:
        groups = conn.execute(
            "SELECT device, library, COUNT(*) FROM op_timings GROUP BY device, library ORDER BY 3 DESC"
        ).fetchall()
        if device is not None:
            exact = [g for g in groups if device == g[0]]
            groups = exact or [g for g in groups if device in g[0]]
        if not groups:
            what = f" for device {device!r}" if device is not None else ""
            raise CostModelError(f"recorded: {path}: the timing table has no entries{what}")
        if len(groups) > 1:
            listed = "; ".join(f"{d} / {lib} ({n} entries)" for d, lib, n in groups)
            raise CostModelError(
                f"recorded: {path}: holds several devices or library versions ({listed}); "
                f"name one with device=..."
            )
        dev, lib, _ = groups[0]
        rows = conn.execute(
            "SELECT op, attrs, shapes, ms, measured_at FROM op_timings WHERE device = ? AND library = ?",
            (dev, lib),
        ).fetchall()
    except sqlite3.DatabaseError as exc:
        raise CostModelError(f"recorded: {path}: not a timing-cache database ({exc})") from None
    finally:
        conn.close()
    entries = {(op, a, s): float(ms) for op, a, s, ms, _ in rows}
    recorded_at = {(op, a, s): float(t) for op, a, s, _, t in rows}
    table = TimingTable.steady(path.stem, dev, lib, str(path), entries, recorded_at)
    dtype = key_dtype(dev)
    return table if dtype == "float32" else dataclasses.replace(table, dtype=dtype)


def export_table(table: TimingTable, path: str | os.PathLike[str], **meta: Any) -> Path:
    """Write ``table`` as a JSON export (the shipped form); ``meta`` adds top-level fields
    (``description``, ``source``, ``eager`` as a dict ...). Rows are sorted, so the file is
    the same for the same table. Each row holds the time as recorded, and when the table knows
    when its entries were recorded, that too (seconds after the first), so a reader makes the
    same steady-state correction (:mod:`tensor_eqsat.cost.steady`)."""
    data: dict[str, Any] = {
        "name": table.name,
        "description": table.description,
        "device": table.device,
        "library": table.library,
        "source": table.source,
        **({"dtype": table.dtype} if table.dtype != "float32" else {}),
        **({"eager": table.eager.to_dict()} if table.eager is not None else {}),
        **meta,
        "columns": ["op", "attrs", "shapes", "ms"],
        "rows": [[op, a, s, ms] for (op, a, s), ms in sorted(table.as_recorded.items())],
    }
    at = table.recorded_at
    if at and all(k in at for k in table.as_recorded):
        first = min(at.values())
        data["columns"].append("recorded_s")
        for row in data["rows"]:
            row.append(round(at[(row[0], row[1], row[2])] - first, 4))
    out = Path(path)
    body = ",\n".join(json.dumps(r, separators=(",", ":")) for r in data.pop("rows"))
    head = json.dumps(data, indent=1)[:-2]
    out.write_text(f'{head},\n "rows": [\n{body}\n ]\n}}\n', encoding="utf-8")
    return out


IN_GRAPH_MS: dict[str, float] = {"concat": 0.03}
"""Milliseconds an eager pass pays for an op beyond its recorded isolated time (activation ops
only), by op: fitted by non-negative least squares on the whole-graph residuals of the first
H200 set (``benchmarks/gpu_whole_graph_fit.py``)."""


def monotone_groups(
    table: TimingTable, spec: OpSpec, attrs: Attrs, in_shapes: tuple[Shape, ...], ms: float
) -> float:
    """``ms``, the price of a conv2d, raised to the most the table records for the same
    convolution with finer groups (every multiple of its groups that divides both channel
    counts): a merge of grouped convolutions is never priced as a gain no whole graph showed.

    >>> key = ("conv2d", '[[1,1],"same","none"]', "[[1,8,4,4],[8,1,3,3]]")
    >>> t = TimingTable("t", "cuda:x", "", "", {key: 0.5})
    >>> spec = get_op("conv2d")
    >>> monotone_groups(t, spec, ((1, 1), "same", "none"), ((1, 8, 4, 4), (8, 2, 3, 3)), 0.1)
    0.5
    >>> monotone_groups(t, spec, ((1, 1), "same", "none"), ((1, 8, 4, 4), (8, 1, 3, 3)), 0.5)
    0.5
    """
    if spec.name != "conv2d" or len(in_shapes) < 2:
        return ms
    x, w = in_shapes[0], in_shapes[1]
    if len(x) != 4 or len(w) != 4 or w[1] <= 0:
        return ms
    cin, cout = x[1], w[0]
    groups = cin // w[1]
    finer = groups * 2
    key = encode_attrs(attrs)
    while finer <= cin:
        if cin % finer == 0 and cout % finer == 0:
            shapes = (x, (cout, cin // finer, w[2], w[3]), *in_shapes[2:])
            got = table.entries.get((spec.name, key, shapes_key(shapes)))
            if got is not None:
                ms = max(ms, got)
        finer += groups
    return ms


class RecordedCostModel(KernelCostModel):
    """Prices ops from a recorded timing table; the fitted roofline covers what it lacks.

    A graph in another precision than the table's (:meth:`with_dtype`) is priced by the fit with
    that dtype's bytes and units (:mod:`tensor_eqsat.cost.dtype_rates`); a configuration the table
    holds keeps its recorded time, scaled by the fit's ratio between the two dtypes (so the
    table's launch floors, which no dtype changes, stay what was measured).

    table: a :class:`TimingTable`, a shipped profile name (``"h200"``) or a timing file path.
    mode: ``"eager"`` (the price of a PyTorch eager forward pass, see
        :mod:`tensor_eqsat.cost.execution`) or ``"isolated"`` (the recorded times as they are).
        Default None: eager for a GPU table, isolated for a CPU one (``cpu:...`` device key:
        CPU ops run synchronously, so their times add up as recorded).
    eager: the composition for eager mode. Default: the table's own, else
        :data:`~tensor_eqsat.cost.execution.DEFAULT_EAGER` (the H200 fit).
    device: for a SQLite file with several devices, which one (see :func:`load_table`).
    weight_ops, taso_compat: see :class:`~tensor_eqsat.cost.model.KernelCostModel`.

    ``hits`` and ``misses`` count the configurations priced from the table and by the fit.

    >>> m = RecordedCostModel("h200", mode="isolated")
    >>> round(m.op_cost("conv2d", ((1, 1), "same", "relu"), ((1, 128, 56, 56), (128, 8, 3, 3)), False), 4)
    0.123

    (recorded at 0.1328 ms while the launch floor stood 0.0098 ms above its steady level; see
    :mod:`tensor_eqsat.cost.steady`)
    >>> m.hits, m.misses
    (1, 0)
    """

    def __init__(
        self,
        table: TimingTable | str = "h200",
        *,
        mode: ExecutionMode | str | None = None,
        eager: EagerLaunch | None = None,
        device: str | None = None,
        weight_ops: WeightOps | str = WeightOps.FOLD,
        taso_compat: bool = False,
    ) -> None:
        super().__init__(weight_ops=weight_ops, taso_compat=taso_compat)
        self.table = table if isinstance(table, TimingTable) else load_table(table, device=device)
        if mode is None:
            mode = ExecutionMode.ISOLATED if self.table.device.startswith("cpu") else ExecutionMode.EAGER
        try:
            self.mode = ExecutionMode(mode)
        except ValueError:
            choices = ", ".join(m.value for m in ExecutionMode)
            raise CostModelError(f"recorded: mode must be one of {choices}, got {mode!r}") from None
        if self.mode is ExecutionMode.EAGER:
            self.execution = eager or self.table.eager or DEFAULT_EAGER
        self.spec = f"recorded:{self.table.name}"
        self.hits = 0
        self.misses = 0

    def recorded_ms(self, spec: OpSpec, attrs: Attrs, in_shapes: tuple[Shape, ...]) -> float | None:
        """The table's isolated time of one configuration, or None when it lacks it."""
        return self.table.entries.get((spec.name, encode_attrs(attrs), shapes_key(in_shapes)))

    def kernel_ms(self, spec: OpSpec, attrs: Attrs, in_shapes: tuple[Shape, ...]) -> float:
        ms = self.recorded_ms(spec, attrs, in_shapes)
        if ms is not None:
            self.hits += 1
        else:
            self.misses += 1
        if self.dtype.value == self.table.dtype:
            if ms is None:
                ms = self.table.fit.price_spec(spec, attrs, in_shapes)
        else:
            # Another precision than the table's: the fit prices it with the dtype's bytes and units
            # (the fit's byte term counts 4 bytes per element of the table's dtype), and a recorded
            # configuration keeps its recorded time scaled by the fit's ratio of the two dtypes.
            table_dtype = DType(self.table.dtype)
            scale = compute_scale(self.table.name, spec.kind, self.dtype, recorded=table_dtype)
            itemsize = self.itemsize * 4 // table_dtype.itemsize
            fit = self.table.fit
            priced = fit.price_spec(spec, attrs, in_shapes, itemsize=itemsize, compute_scale=scale)
            ms = priced if ms is None else ms * priced / fit.price_spec(spec, attrs, in_shapes)
        if self.mode is ExecutionMode.EAGER:  # in the graph (module docstring)
            ms = monotone_groups(self.table, spec, attrs, in_shapes, ms) + IN_GRAPH_MS.get(spec.name, 0.0)
        return ms

    def __repr__(self) -> str:
        return (
            f"RecordedCostModel(spec={self.spec!r}, mode={self.mode.value!r}, entries={len(self.table)}, "
            f"weight_ops={self.weight_ops.value!r})"
        )
