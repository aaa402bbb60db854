"""Output files: checks before the work, atomic writes through symlinks, special files, run dirs."""

from __future__ import annotations

import json
import os
import stat
import threading

import pytest

from tensor_eqsat import Graph
from tensor_eqsat.extract.serialize import problem_from_json, save_problem
from tensor_eqsat.ir.serialize import load, save
from tensor_eqsat.outputs import (
    COMPLETE,
    OutputError,
    atomic_write,
    check_output,
    check_output_dir,
    write_dir,
)


def _graph() -> Graph:
    g = Graph()
    x = g.input((2, 3), name="x")
    g.output(g.relu(x))
    return g


def _leftovers(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_save_writes_through_a_symlink_to_its_target(tmp_path):
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    save(_graph(), link)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert load(target).op_counts() == {"relu": 1}
    assert _leftovers(tmp_path) == []


def test_a_dangling_symlink_is_written_at_its_target(tmp_path):
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "new.json")
    atomic_write(link, "x")
    assert link.is_symlink() and (tmp_path / "new.json").read_text() == "x"


def test_existing_permissions_are_kept(tmp_path):
    path = tmp_path / "g.json"
    path.write_text("old")
    path.chmod(0o640)
    save(_graph(), path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_a_fifo_is_written_directly_not_replaced(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    atomic_write(fifo, "through the pipe")
    reader.join(timeout=10)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got == [b"through the pipe"]


def test_a_failed_write_leaves_no_temporary_file_and_the_old_file_intact(tmp_path, monkeypatch):
    path = tmp_path / "g.json"
    path.write_text("old")

    def fail(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OutputError, match=r"cannot write .*g\.json: No space left on device"):
        save(_graph(), path)
    assert path.read_text() == "old"
    assert _leftovers(tmp_path) == []


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(OutputError, match="is a directory"):
        atomic_write(tmp_path, "x")
    with pytest.raises(OutputError, match="is a directory"):
        check_output(tmp_path)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing" / "x.json", "directory .*missing does not exist"),
        (lambda d: d, "is a directory"),
        (lambda d: d / "file.txt" / "x.json", "is not a directory"),
        (lambda d: "", "empty path"),
    ],
)
def test_check_output_names_the_problem(tmp_path, make, message):
    (tmp_path / "file.txt").write_text("")
    with pytest.raises(OutputError, match=message):
        check_output(make(tmp_path))


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into read-only directories")
def test_check_output_refuses_a_read_only_directory(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(OutputError, match="not writable"):
            check_output(ro / "x.json")
        with pytest.raises(OutputError, match="not writable"):
            check_output_dir(ro / "run")
    finally:
        ro.chmod(0o700)


def test_check_output_refuses_an_unwritable_directory_even_as_root(tmp_path, monkeypatch):
    # Root passes the permission bits, so the refusal is simulated where the check asks.
    ro = tmp_path / "ro"
    ro.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p) == str(ro) else real(p, mode))
    with pytest.raises(OutputError, match=r"directory .*ro is not writable"):
        check_output(ro / "x.json")
    with pytest.raises(OutputError, match="not writable"):
        check_output_dir(ro)


def test_check_output_dir_refuses_a_file_and_accepts_new_nested_dirs(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(OutputError, match="exists and is not a directory"):
        check_output_dir(tmp_path / "f")
    with pytest.raises(OutputError, match="is not a directory"):
        check_output_dir(tmp_path / "f" / "run")
    assert check_output_dir(tmp_path / "a" / "b") == tmp_path / "a" / "b"


def test_save_problem_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "e.json"
    path.write_text("old")
    monkeypatch.setattr(os, "replace", lambda s, d: (_ for _ in ()).throw(OSError(5, "I/O error")))
    problem = problem_from_json(
        '{"nodes": {"x": {"op": "x", "eclass": "c", "cost": 1.0}}, "root_eclasses": ["c"]}'
    )
    with pytest.raises(OutputError):
        save_problem(problem, path)
    assert path.read_text() == "old" and _leftovers(tmp_path) == []


def test_write_dir_new_directory_appears_complete(tmp_path):
    out = write_dir(tmp_path / "run", {"a.json": "1", "b.dot": "2"})
    marker = json.loads((out / COMPLETE).read_text())
    assert sorted(marker["files"]) == ["a.json", "b.dot"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no temporary directory left


def test_write_dir_failure_in_an_existing_directory_leaves_no_completion_marker(tmp_path, monkeypatch):
    out = write_dir(tmp_path / "run", {"a.json": "1", "b.dot": "2"})
    real = os.replace
    calls = []

    def fail_second(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real(src, dst)

    monkeypatch.setattr(os, "replace", fail_second)
    with pytest.raises(OutputError):
        write_dir(out, {"a.json": "new", "b.dot": "new"})
    assert not (out / COMPLETE).exists()  # the mixed set is not passed off as a finished run
    assert _leftovers(out) == []


def test_write_dir_failure_in_a_new_directory_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "rename", lambda s, d: (_ for _ in ()).throw(OSError(5, "I/O error")))
    with pytest.raises(OutputError, match="I/O error"):
        write_dir(tmp_path / "run", {"a.json": "1"})
    assert list(tmp_path.iterdir()) == []
