"""The SQLite timing cache: hits, first-writer-wins, persistence and concurrency across processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tensor_eqsat.cost import TimingCache
from tensor_eqsat.cost.timing_cache import CACHE_FILE, ENV_CACHE_DIR, default_cache_dir

SRC = str(Path(__file__).resolve().parents[3] / "src")
KEY = ("cpu:test", "torch 0", "relu", "[]", "[[4,4]]")


def test_put_get_and_first_writer_wins(tmp_path):
    path = tmp_path / "t.sqlite3"
    with TimingCache(path) as cache:
        assert cache.get(*KEY) is None
        assert cache.put(*KEY, 1.5, 10) == 1.5
        assert cache.get(*KEY) == 1.5
        # A later measurement of the same key does not replace the stored one.
        assert cache.put(*KEY, 9.0, 10) == 1.5
        assert len(cache) == 1
        assert cache.load("cpu:test", "torch 0") == {("relu", "[]", "[[4,4]]"): 1.5}
        assert cache.load("cpu:other", "torch 0") == {}
    with TimingCache(path) as again:
        assert again.get(*KEY) == 1.5


def test_wal_mode(tmp_path):
    cache = TimingCache(tmp_path / "t.sqlite3")
    cache.put(*KEY, 1.0, 3)
    conn = cache._connect()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    cache.close()


def test_default_location_and_env_override(monkeypatch, tmp_path):
    monkeypatch.setenv(ENV_CACHE_DIR, str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c"
    assert TimingCache().path == tmp_path / "c" / CACHE_FILE
    monkeypatch.delenv(ENV_CACHE_DIR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert default_cache_dir() == tmp_path / "xdg" / "tensor-eqsat"


_WRITER = textwrap.dedent(
    """
    import sys
    from tensor_eqsat.cost import TimingCache
    path, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    cache = TimingCache(path)
    won = 0
    for i in range(n):
        # Every process writes the shared keys and its own keys.
        value = cache.put("cpu:test", "torch 0", "relu", "[]", f"[[{i}]]", float(len(tag)), 1)
        won += value == float(len(tag))
        cache.put("cpu:test", "torch 0", "relu", tag, f"[[{i}]]", 1.0, 1)
    print(won)
    """
)


def _spawn(path: Path, tag: str, n: int) -> subprocess.Popen[str]:
    env = {"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"}
    return subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path), tag, str(n)], stdout=subprocess.PIPE, text=True, env=env
    )


def test_persistence_and_concurrent_writers_across_processes(tmp_path):
    path = tmp_path / "shared.sqlite3"
    n = 150
    procs = [_spawn(path, "a", n), _spawn(path, "bb", n)]
    wins = []
    for p in procs:
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0
        wins.append(int(out))
    # Each shared key was won by exactly one process, and both processes saw the winner's value.
    assert sum(wins) == n
    with TimingCache(path) as cache:
        assert len(cache) == 3 * n
        shared = {k: v for k, v in cache.load("cpu:test", "torch 0").items() if k[1] == "[]"}
        assert len(shared) == n and set(shared.values()) <= {1.0, 2.0}


def _unusable_paths(tmp_path):
    """Database paths the cache cannot open, also for root (who writes read-only folders): a
    folder at the file's name, a file where its folder should be, and a file that is no database."""
    folder = tmp_path / "a" / CACHE_FILE
    folder.mkdir(parents=True)
    (tmp_path / "b").write_text("a file, not a folder\n")
    junk = tmp_path / "c" / CACHE_FILE
    junk.parent.mkdir()
    junk.write_bytes(b"not a database" * 100)
    return [folder, tmp_path / "b" / CACHE_FILE, junk]


def test_a_cache_that_cannot_be_opened_is_no_error_and_warns_once_naming_it(tmp_path, caplog):
    for path in _unusable_paths(tmp_path):
        caplog.clear()
        cache = TimingCache(path)
        assert cache.get(*KEY) is None
        assert cache.put(*KEY, 1.5, 10) == 1.5  # the measured value, not remembered
        assert cache.load("cpu:test", "torch 0") == {} and len(cache) == 0
        assert cache.unusable
        warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert len(warned) == 1 and "timing cache" in warned[0] and str(path) in warned[0], warned
        assert "results database" not in warned[0]


def test_a_read_only_database_is_left_alone_mid_run(tmp_path, monkeypatch, caplog):
    import sqlite3

    cache = TimingCache(tmp_path / "t.sqlite3")
    cache.put(*KEY, 1.0, 3)
    conn = cache._connect()

    class ReadOnly:
        def execute(self, sql, *args):
            if sql.startswith("INSERT"):
                raise sqlite3.OperationalError("attempt to write a readonly database")
            return conn.execute(sql, *args)

        def close(self):
            conn.close()

    cache._conn = ReadOnly()
    assert cache.put("cpu:test", "torch 0", "relu", "[]", "[[8,8]]", 2.0, 3) == 2.0
    assert cache.unusable == "attempt to write a readonly database"
    assert cache.get(*KEY) is None  # given up: measured again from now on, no error
