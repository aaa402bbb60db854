"""Persistent cache of measured operator times: one SQLite file shared by every process.

Measuring an op configuration takes milliseconds to seconds; an e-graph search asks for thousands
of them, and the next run asks for the same ones again. So every measurement is stored, keyed by
(device, library version, op, attributes, input shapes), in a SQLite database in the user's cache
directory: ``$TENSOR_EQSAT_CACHE_DIR`` if set, else the platform cache folder
(``$XDG_CACHE_HOME`` or ``~/.cache`` on Linux, ``~/Library/Caches`` on macOS, ``%LOCALAPPDATA%``
on Windows) under ``tensor-eqsat/``.

Several processes may measure at once (a sweep runs one optimizer per model). The database uses
WAL journaling (readers never block the writer), a busy timeout, ``INSERT OR IGNORE`` (the first
measurement of a key wins and every process then reads that one value, so processes agree) and
retries with back-off when the file is locked anyway.

A cache that cannot be used (a read-only folder, a path that is not a file) is no error: the run
goes on without it, measuring what it needs, with one warning naming the timing cache and why
(issue 44, item 11: it stopped every measured optimize with "results database: unable to open
database file", which named another database).

The precision of a timing is part of its device key: ``cuda:NVIDIA H200|dtype=bfloat16`` holds
bfloat16 timings, a key without ``|dtype=`` float32 ones, so files written before dtypes read as
float32 and one file can hold both (:func:`device_key_for`, :func:`key_dtype`).

Alternatives rejected: a ``dtype`` column (a new primary key: every existing file would need a
table rebuild, for what the device key already separates); one JSON file per device (lost
updates under concurrent writers) and ``shelve``/dbm (no safe concurrent access).
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from tensor_eqsat.ir.opspec import Attrs
from tensor_eqsat.ir.types import Shape

log = logging.getLogger(__name__)

ENV_CACHE_DIR = "TENSOR_EQSAT_CACHE_DIR"
"""Environment variable naming the folder of the timing cache (overrides the platform default)."""

CACHE_FILE = "op_timings.sqlite3"
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS op_timings (
    device TEXT NOT NULL,
    library TEXT NOT NULL,
    op TEXT NOT NULL,
    attrs TEXT NOT NULL,
    shapes TEXT NOT NULL,
    ms REAL NOT NULL,
    runs INTEGER NOT NULL,
    measured_at REAL NOT NULL,
    PRIMARY KEY (device, library, op, attrs, shapes)
) WITHOUT ROWID;
"""

T = TypeVar("T")


DTYPE_TAG = "|dtype="
"""Separates a device key from the dtype its timings were taken in (float32 keys have none)."""


def device_key_for(device_key: str, dtype: str) -> str:
    """The key of ``device_key``'s timings in ``dtype``: itself for float32.

    >>> device_key_for("cuda:NVIDIA H200", "bfloat16"), device_key_for("cpu:x", "float32")
    ('cuda:NVIDIA H200|dtype=bfloat16', 'cpu:x')
    """
    return device_key if dtype == "float32" else f"{device_key}{DTYPE_TAG}{dtype}"


def key_dtype(device_key: str) -> str:
    """The dtype of a device key's timings (float32 when it names none).

    >>> key_dtype("cuda:NVIDIA H200|dtype=bfloat16"), key_dtype("cuda:NVIDIA H200")
    ('bfloat16', 'float32')
    """
    return device_key.rpartition(DTYPE_TAG)[2] if DTYPE_TAG in device_key else "float32"


def default_cache_dir() -> Path:
    """The folder of the timing cache: ``$TENSOR_EQSAT_CACHE_DIR`` or the platform cache folder."""
    env = os.environ.get(ENV_CACHE_DIR)
    if env:
        return Path(env).expanduser()
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local"))
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "tensor-eqsat"


def encode_attrs(attrs: Attrs) -> str:
    """Canonical text of an attribute tuple (tuples as lists, floats exactly).

    >>> encode_attrs(((2, 2), "same", "relu"))
    '[[2,2],"same","relu"]'
    """
    return json.dumps(attrs, separators=(",", ":"))


def shapes_key(shapes: Sequence[Shape]) -> str:
    """Canonical text of input shapes.

    >>> shapes_key([(1, 64), (64, 8)])
    '[[1,64],[64,8]]'
    """
    return json.dumps([list(s) for s in shapes], separators=(",", ":"))


class TimingCache:
    """The SQLite timing store (see the module docstring).

    path: the database file. Default: ``default_cache_dir() / "op_timings.sqlite3"``. The folder is
        created on first use.
    timeout: seconds to wait for a lock before retrying. Default 30.
    retries: attempts for an operation that keeps finding the database locked. Default 8.
    """

    def __init__(
        self, path: str | os.PathLike[str] | None = None, *, timeout: float = 30.0, retries: int = 8
    ):
        self.path = Path(path) if path is not None else default_cache_dir() / CACHE_FILE
        self.timeout = timeout
        self.retries = retries
        self._conn: sqlite3.Connection | None = None
        self.unusable: str | None = None
        """Why the file cannot be used (the cache then stores nothing and finds nothing), or None."""
        self.inserted = 0
        """Rows this object stored (a key another process stored first is not counted)."""

    # -- connection ----------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection | None:
        """The connection, opened on first use; None when the file cannot be used
        (:attr:`unusable` says why, and a warning said it once)."""
        if self._conn is None and self.unusable is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
            except (OSError, sqlite3.Error) as exc:
                self._give_up(exc)
                return None
            self._conn = conn
            try:
                self._retry(lambda: self._init_schema(conn))
            except sqlite3.DatabaseError as exc:  # read-only, or not a database at all
                conn.close()
                self._conn = None
                self._give_up(exc)
            except BaseException:
                conn.close()
                self._conn = None
                raise
        return self._conn

    def _give_up(self, exc: BaseException) -> None:
        """Go on without the file, and say so once."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self.unusable = str(exc) or type(exc).__name__
        log.warning(
            "the timing cache %s cannot be used (%s); measuring without it, nothing is remembered "
            "(set %s to a writable folder)",
            self.path,
            self.unusable,
            ENV_CACHE_DIR,
        )

    def _query(self, fn: Callable[[sqlite3.Connection], T], default: T) -> T:
        """``fn`` on the connection (retried while locked), or ``default`` when the file cannot
        be used or stops being usable (written read-only, say)."""
        conn = self._connect()
        if conn is None:
            return default
        try:
            return self._retry(lambda: fn(conn))
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise
            self._give_up(exc)
            return default

    @staticmethod
    def _init_schema(conn: sqlite3.Connection) -> None:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.executescript(_SCHEMA)
        conn.execute(
            "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
        )

    def _retry(self, fn: Callable[[], T]) -> T:
        delay = 0.05
        for attempt in range(self.retries):
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                transient = "locked" in str(exc) or "busy" in str(exc)
                if not transient or attempt == self.retries - 1:
                    raise
                log.debug("timing cache %s is locked (%s); retrying in %.2fs", self.path, exc, delay)
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Close the connection (it reopens on next use)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> TimingCache:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- queries -------------------------------------------------------------------------------
    def load(self, device: str, library: str) -> dict[tuple[str, str, str], float]:
        """Every stored time of one (device, library): ``(op, attrs text, shapes text) -> ms``."""
        rows: list[Any] = self._query(
            lambda conn: conn.execute(
                "SELECT op, attrs, shapes, ms FROM op_timings WHERE device = ? AND library = ?",
                (device, library),
            ).fetchall(),
            [],
        )
        return {(op, attrs, shapes): float(ms) for op, attrs, shapes, ms in rows}

    def get(self, device: str, library: str, op: str, attrs: str, shapes: str) -> float | None:
        """The stored time of one key, or None."""
        row = self._query(
            lambda conn: conn.execute(
                "SELECT ms FROM op_timings WHERE device = ? AND library = ? AND op = ? AND attrs = ? "
                "AND shapes = ?",
                (device, library, op, attrs, shapes),
            ).fetchone(),
            None,
        )
        return None if row is None else float(row[0])

    def put(self, device: str, library: str, op: str, attrs: str, shapes: str, ms: float, runs: int) -> float:
        """Store a time unless the key is already present; return the value the cache now holds.

        When another process stored the key first, its value is returned (and kept), so every
        process prices the configuration the same; :attr:`inserted` counts the keys stored here.
        """
        rowcount = self._query(
            lambda conn: (
                conn.execute(
                    "INSERT OR IGNORE INTO op_timings (device, library, op, attrs, shapes, ms, runs, "
                    "measured_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (device, library, op, attrs, shapes, float(ms), int(runs), time.time()),
                ).rowcount
            ),
            0,
        )
        self.inserted += rowcount > 0
        stored = self.get(device, library, op, attrs, shapes)
        return float(ms) if stored is None else stored

    def __len__(self) -> int:
        return int(self._query(lambda conn: conn.execute("SELECT COUNT(*) FROM op_timings").fetchone()[0], 0))

    def __repr__(self) -> str:
        return f"TimingCache({str(self.path)!r})"
