"""The results database: one SQLite file holding a sweep's settings, runs and failures.

Tables:

* ``settings(digest, json)``: each distinct :class:`~tensor_eqsat.bench.grid.Settings`.
* ``runs``: one row per finished experiment, unique on (model, config, seed, settings digest):
  the configuration's search and extractors, k_multi, original/optimized cost, speedup %, wall
  times, stop reason, rule counts and step log (JSON), package version, host and finish time.
* ``failures``: experiments that raised or whose worker died, with the error and traceback; a
  run that later succeeds removes its failures in the same transaction.
* ``accuracy``: predicted runtime of each model's initial graph per extractor (the paper's
  extraction-accuracy table), keyed by (model, cost model, extractor).

Every finished run is written in one transaction and a second write of the same key is ignored
(``ON CONFLICT DO NOTHING``): a killed sweep leaves no partial row, and two sweeps racing on the
same file never duplicate a run. Only the sweep's driver process writes; workers return data.
WAL journaling lets a report read the file while a sweep is writing it.

Alternatives rejected: append-only JSON lines per run (the artifact's choice, which needed a
de-duplication notebook after restarts) and one file per run (no atomic multi-table writes, no
queries).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tensor_eqsat import __version__
from tensor_eqsat.bench.grid import BenchError, Experiment, Settings
from tensor_eqsat.bench.record import RunFailure, RunRecord

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS settings (digest TEXT PRIMARY KEY, json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    model TEXT NOT NULL,
    config TEXT NOT NULL,
    seed INTEGER NOT NULL,
    settings_digest TEXT NOT NULL REFERENCES settings(digest),
    search TEXT NOT NULL,
    main_extractor TEXT,
    final_extractor TEXT NOT NULL,
    k_multi INTEGER,
    original_cost_ms REAL NOT NULL,
    optimized_cost_ms REAL NOT NULL,
    speedup_pct REAL NOT NULL,
    wall_s REAL NOT NULL,
    run_wall_s REAL NOT NULL,
    stop_reason TEXT NOT NULL,
    rule_counts TEXT NOT NULL,
    steps TEXT NOT NULL,
    extra TEXT NOT NULL,
    version TEXT NOT NULL,
    host TEXT NOT NULL,
    finished_at TEXT NOT NULL,
    UNIQUE (model, config, seed, settings_digest)
);
CREATE TABLE IF NOT EXISTS failures (
    id INTEGER PRIMARY KEY,
    model TEXT NOT NULL,
    config TEXT NOT NULL,
    seed INTEGER NOT NULL,
    settings_digest TEXT NOT NULL,
    error TEXT NOT NULL,
    traceback TEXT NOT NULL,
    run_wall_s REAL NOT NULL,
    host TEXT NOT NULL,
    failed_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS accuracy (
    model TEXT NOT NULL,
    cost_model TEXT NOT NULL,
    extractor TEXT NOT NULL,
    predicted_ms REAL NOT NULL,
    time_s REAL NOT NULL,
    PRIMARY KEY (model, cost_model, extractor)
);
"""

Key = tuple[str, str, int, str]


@dataclass(frozen=True)
class StoredRun:
    """A row of ``runs``: the experiment's identity, its settings and its record."""

    model: str
    config: str
    seed: int
    settings_digest: str
    search: str
    main_extractor: str | None
    final_extractor: str
    k_multi: int | None
    record: RunRecord
    version: str
    host: str
    finished_at: str

    @property
    def key(self) -> Key:
        return (self.model, self.config, self.seed, self.settings_digest)


@dataclass(frozen=True)
class StoredFailure:
    """A row of ``failures``."""

    model: str
    config: str
    seed: int
    settings_digest: str
    error: str
    traceback: str
    failed_at: str


@dataclass(frozen=True)
class AccuracyRecord:
    """Predicted runtime (ms) of a model's initial graph by one extractor under one cost model."""

    model: str
    cost_model: str
    extractor: str
    predicted_ms: float
    time_s: float


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class ResultsDB:
    """A results database file (created with its schema if absent).

    >>> import tempfile, pathlib
    >>> from tensor_eqsat.bench.grid import build_grid
    >>> from tensor_eqsat.bench.record import RunRecord
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = pathlib.Path(tmp.name) / "r.sqlite"
    >>> [e] = build_grid(["vgg"], ["tensat"], [0])
    >>> with ResultsDB(path) as db:
    ...     db.add_run(e, RunRecord(2.0, 1.5, 25.0, 0.1, "node limit"))
    ...     db.add_run(e, RunRecord(2.0, 1.0, 50.0, 0.1, "node limit"))  # same key: ignored
    ...     [r.record.speedup_pct for r in db.runs()]
    True
    False
    [25.0]
    >>> tmp.cleanup()
    """

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        """Open ``path``; with ``create=False`` it must already be a results database, and it is
        opened for reading only (reports; see :meth:`_connect_for_reading`)."""
        self.path = Path(path)
        self.check_path(self.path, create=create)
        self.read_only = not create
        try:
            # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE ... COMMIT) below.
            if create:
                self._conn = sqlite3.connect(str(self.path), timeout=60.0, isolation_level=None)
            else:
                self._conn = self._connect_for_reading()
            if self.path.exists() and self.path.stat().st_size:
                self._check_integrity()
            if create:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.executescript(_SCHEMA)
                self._check_version()
            else:
                self._require_schema()
        except sqlite3.OperationalError as exc:
            if "readonly" in str(exc) or "unable to open" in str(exc):
                raise BenchError(
                    f"{self.path}: cannot open the results database for writing ({exc})"
                ) from None
            raise BenchError(f"{self.path}: not a results database ({exc})") from None
        except sqlite3.DatabaseError as exc:
            raise BenchError(f"{self.path}: not a results database ({exc})") from None
        self._host = socket.gethostname()

    def _connect_for_reading(self) -> sqlite3.Connection:
        """A connection that cannot write and leaves no ``-wal``/``-shm`` file behind.

        SQLite removes a WAL database's ``-wal`` and ``-shm`` files when the last connection
        closes, but only a connection that can write the file and the folder can; a read-only
        one (``mode=ro``) creates them and leaves them, and cannot open the file at all in a
        read-only folder. So: a writable database is opened as usual with ``query_only``; a
        database that cannot be written (file or folder read-only) is opened ``immutable``
        (nothing can be changing it) unless a ``-wal`` file holds writes not yet in the file,
        when it is opened ``mode=ro`` to read them too.
        """
        path = self.path
        uri = Path(os.path.abspath(path)).as_uri()
        kwargs: dict[str, Any] = {"timeout": 60.0, "isolation_level": None}
        if os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK):
            conn = sqlite3.connect(str(path), **kwargs)
            conn.execute("PRAGMA query_only = ON")
            return conn
        if Path(f"{path}-wal").exists():
            try:
                conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, **kwargs)
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
                return conn
            except sqlite3.OperationalError:
                log.warning(
                    "%s: read-only, and its %s-wal file cannot be read here: writes not yet "
                    "checkpointed into the database are not shown",
                    path,
                    path.name,
                )
        return sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True, **kwargs)

    @staticmethod
    def check_path(path: Path, *, create: bool = True) -> None:
        """Raise BenchError if ``path`` cannot be opened as a results database (with ``create``:
        created or appended to), without creating anything."""
        if not create and not path.is_file():
            raise BenchError(f"{path}: no such results database")
        if create and not path.parent.is_dir():
            raise BenchError(f"{path}: directory {path.parent} does not exist")
        if path.is_dir():
            raise BenchError(f"{path}: is a directory, not a results database")
        if create:
            # WAL needs the directory writable (for the -wal and -shm files) as well as the file.
            if not os.access(path.parent, os.W_OK | os.X_OK):
                raise BenchError(f"{path}: directory {path.parent} is not writable")
            if path.exists() and not os.access(path, os.W_OK):
                raise BenchError(f"{path}: the results database is read-only")

    def _check_integrity(self) -> None:
        """Refuse a damaged file (a corrupted page) before reading from or appending to it."""
        rows = self._conn.execute("PRAGMA quick_check").fetchall()
        if [r[0] for r in rows] != ["ok"]:
            raise BenchError(
                f"{self.path}: damaged results database (sqlite quick_check: {rows[0][0]}); "
                "restore a copy or start a new database"
            )

    def _check_version(self) -> None:
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is None:
            self._conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        elif int(row[0]) != SCHEMA_VERSION:
            raise BenchError(f"{self.path}: schema version {row[0]}, this build reads {SCHEMA_VERSION}")

    def _require_schema(self) -> None:
        tables = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        missing = {"meta", "settings", "runs", "failures", "accuracy"} - tables
        if missing:
            raise BenchError(
                f"{self.path}: not a results database (missing tables {', '.join(sorted(missing))})"
            )
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is None or int(row[0]) != SCHEMA_VERSION:
            raise BenchError(
                f"{self.path}: schema version {row and row[0]}, this build reads {SCHEMA_VERSION}"
            )

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> ResultsDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        if self.read_only:
            raise BenchError(f"{self.path}: opened for reading (create=False); cannot write to it")
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    # -- writing ---------------------------------------------------------------------------------

    def add_run(self, experiment: Experiment, record: RunRecord) -> bool:
        """Store a finished run (and its settings) in one transaction; clear its failures.

        Returns False, changing nothing, if the run's key is already stored.
        """
        model, config, seed, digest = experiment.key
        cfg = experiment.config
        with self._transaction() as c:
            c.execute(
                "INSERT INTO settings VALUES (?, ?) ON CONFLICT DO NOTHING",
                (digest, json.dumps(experiment.settings.to_dict(), sort_keys=True)),
            )
            cur = c.execute(
                "INSERT INTO runs (model, config, seed, settings_digest, search, main_extractor, "
                "final_extractor, k_multi, original_cost_ms, optimized_cost_ms, speedup_pct, wall_s, "
                "run_wall_s, stop_reason, rule_counts, steps, extra, version, host, finished_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (
                    model,
                    config,
                    seed,
                    digest,
                    cfg.search.value,
                    cfg.main_extractor,
                    cfg.final_extractor,
                    experiment.k_multi(),
                    record.original_cost_ms,
                    record.optimized_cost_ms,
                    record.speedup_pct,
                    record.wall_s,
                    record.run_wall_s,
                    record.stop_reason,
                    json.dumps({str(k): v for k, v in record.rule_counts.items()}),
                    json.dumps(record.steps, default=_json_default),
                    json.dumps(record.extra, default=_json_default),
                    __version__,
                    self._host,
                    _now(),
                ),
            )
            inserted = cur.rowcount == 1
            if inserted:
                c.execute(
                    "DELETE FROM failures WHERE model = ? AND config = ? AND seed = ? "
                    "AND settings_digest = ?",
                    (model, config, seed, digest),
                )
        return inserted

    def add_failure(self, experiment: Experiment, failure: RunFailure) -> None:
        """Record a failed attempt (a later success removes it)."""
        model, config, seed, digest = experiment.key
        with self._transaction() as c:
            c.execute(
                "INSERT INTO failures (model, config, seed, settings_digest, error, traceback, run_wall_s, "
                "host, failed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    model,
                    config,
                    seed,
                    digest,
                    failure.error,
                    failure.traceback,
                    failure.run_wall_s,
                    self._host,
                    _now(),
                ),
            )

    def add_accuracy(self, rows: Iterable[AccuracyRecord]) -> None:
        """Store (replace) accuracy rows in one transaction."""
        with self._transaction() as c:
            c.executemany(
                "INSERT OR REPLACE INTO accuracy VALUES (?, ?, ?, ?, ?)",
                [(r.model, r.cost_model, r.extractor, r.predicted_ms, r.time_s) for r in rows],
            )

    # -- reading ---------------------------------------------------------------------------------

    def finished_keys(self) -> set[Key]:
        """Keys of every stored run."""
        return {
            (m, c, int(s), d)
            for m, c, s, d in self._conn.execute("SELECT model, config, seed, settings_digest FROM runs")
        }

    def settings(self) -> dict[str, Settings]:
        """Every stored settings by digest."""
        out = {}
        for d, j in self._conn.execute("SELECT digest, json FROM settings"):
            try:
                out[d] = Settings.from_dict(json.loads(j))
            except (ValueError, TypeError, KeyError, AttributeError, BenchError) as exc:
                raise BenchError(f"{self.path}: damaged settings row {d}: {exc}") from None
        return out

    def runs(self) -> list[StoredRun]:
        """Every stored run, in insertion order."""
        rows = self._conn.execute(
            "SELECT model, config, seed, settings_digest, search, main_extractor, final_extractor, k_multi, "
            "original_cost_ms, optimized_cost_ms, speedup_pct, wall_s, run_wall_s, stop_reason, rule_counts, "
            "steps, extra, version, host, finished_at FROM runs ORDER BY id"
        ).fetchall()
        out = []
        for r in rows:
            try:
                out.append(_stored_run(r))
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                raise BenchError(
                    f"{self.path}: damaged run row ({r[0]} {r[1]} seed {r[2]}): {type(exc).__name__}: {exc}"
                ) from None
        return out

    def failures(self) -> list[StoredFailure]:
        """Failures not superseded by a finished run, latest attempt per key, in time order."""
        rows = self._conn.execute(
            "SELECT model, config, seed, settings_digest, error, traceback, failed_at FROM failures "
            "WHERE id IN (SELECT MAX(id) FROM failures GROUP BY model, config, seed, settings_digest) "
            "ORDER BY id"
        ).fetchall()
        return [StoredFailure(m, c, int(s), d, e, t, f) for m, c, s, d, e, t, f in rows]

    def accuracy(self) -> list[AccuracyRecord]:
        """Every accuracy row, by model then extractor."""
        rows = self._conn.execute(
            "SELECT model, cost_model, extractor, predicted_ms, time_s FROM accuracy ORDER BY rowid"
        ).fetchall()
        return [AccuracyRecord(m, c, e, float(p), float(t)) for m, c, e, p, t in rows]

    def count(self) -> int:
        """Number of stored runs."""
        return int(self._conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0])


def _json_default(value: Any) -> Any:
    # Step logs may carry enums or numpy scalars; store what they print as.
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "value"):
        return value.value
    return str(value)


def _stored_run(row: tuple[Any, ...]) -> StoredRun:
    (model, config, seed, digest, search, main, final, k_multi) = row[:8]
    (orig, opt, speedup, wall, run_wall, stop, rules, steps, extra, version, host, finished) = row[8:]
    record = RunRecord(
        original_cost_ms=orig,
        optimized_cost_ms=opt,
        speedup_pct=speedup,
        wall_s=wall,
        stop_reason=stop,
        rule_counts={int(k): int(v) for k, v in json.loads(rules).items()},
        steps=json.loads(steps),
        extra=json.loads(extra),
        run_wall_s=run_wall,
    )
    return StoredRun(
        model, config, int(seed), digest, search, main, final, k_multi, record, version, host, finished
    )
