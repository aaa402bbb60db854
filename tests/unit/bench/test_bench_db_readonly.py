"""Reading a results database that cannot be written (issue 28, defect 12): ``report`` could not
read one in a read-only folder, and left ``-wal``/``-shm`` files beside a read-only one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from bench_fakes import fake_record

from tensor_eqsat.bench import BenchError, ResultsDB, Settings, build_grid

SRC = str(Path(__file__).resolve().parents[3] / "src")
READ = (
    "import sys\n"
    "from tensor_eqsat.bench.db import ResultsDB\n"
    "with ResultsDB(sys.argv[1], create=False) as db:\n"
    "    print(len(db.runs()))\n"
)


def _as_unprivileged() -> list[str]:
    """A command prefix that makes file permissions apply (root ignores them)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: read-only permissions cannot be tested")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search", "--"]


def _read(path: Path) -> str:
    env = {**os.environ, "PYTHONPATH": SRC}
    argv = [*_as_unprivileged(), sys.executable, "-c", READ, str(path)]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.fixture
def grid():
    return build_grid(["vgg"], ["tensat"], [0, 1], Settings(budget=4, node_limit=300))


def _db(folder: Path, grid) -> Path:
    folder.mkdir()
    path = folder / "r.sqlite"
    with ResultsDB(path) as db:
        for exp in grid:
            db.add_run(exp, fake_record(exp))
    assert sorted(p.name for p in folder.iterdir()) == ["r.sqlite"]
    return path


def test_a_database_in_a_read_only_folder_can_be_read(tmp_path, grid):
    path = _db(tmp_path / "ro", grid)
    os.chmod(path.parent, 0o555)
    try:
        assert _read(path) == "2"
        assert sorted(p.name for p in path.parent.iterdir()) == ["r.sqlite"]
    finally:
        os.chmod(path.parent, 0o755)


def test_reading_a_read_only_database_leaves_no_wal_or_shm_file(tmp_path, grid):
    path = _db(tmp_path / "f", grid)
    os.chmod(path, 0o444)
    assert _read(path) == "2"
    assert sorted(p.name for p in path.parent.iterdir()) == ["r.sqlite"]


def test_a_read_only_database_being_written_shows_the_writes_in_its_wal(tmp_path, grid):
    path = _db(tmp_path / "w", grid[:1])
    with ResultsDB(path) as writer:  # open: its second run is in r.sqlite-wal, not in r.sqlite
        writer.add_run(grid[1], fake_record(grid[1]))
        assert Path(f"{path}-wal").stat().st_size > 0
        os.chmod(path, 0o444)
        assert _read(path) == "2"


def test_a_database_opened_for_reading_refuses_writes_and_leaves_nothing(tmp_path, grid):
    path = _db(tmp_path / "rw", grid[:1])
    with ResultsDB(path, create=False) as db, pytest.raises(BenchError, match="opened for reading"):
        db.add_run(grid[1], fake_record(grid[1]))
    assert sorted(p.name for p in path.parent.iterdir()) == ["r.sqlite"]
    with ResultsDB(path, create=False) as db:
        assert len(db.runs()) == 1
