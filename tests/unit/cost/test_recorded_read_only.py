"""Reading a recorded profile (a timing-cache SQLite file) changes nothing beside it and works
where nothing can be written."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import pytest

from tensor_eqsat.cost.recorded import RecordedCostModel, load_table
from tensor_eqsat.cost.timing_cache import TimingCache


def _profile(folder, name="p.sqlite"):
    path = folder / name
    with TimingCache(path) as cache:
        cache.put("cuda:Test GPU", "torch 9", "relu", "[]", "[[1,8]]", 0.02, 5)
    for suffix in ("-wal", "-shm"):
        assert not os.path.exists(f"{path}{suffix}")  # closed cleanly: checkpointed
    return path


def test_reading_a_profile_leaves_no_wal_or_shm_beside_it(tmp_path):
    path = _profile(tmp_path)
    m = RecordedCostModel(str(path), mode="isolated")
    assert m.op_cost("relu", (), ((1, 8),), False) == 0.02
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.sqlite"]


def test_a_profile_named_with_uri_characters_is_read(tmp_path):
    path = _profile(tmp_path, "a?b#c%20.sqlite")
    assert load_table(str(path)).device == "cuda:Test GPU"


def test_rows_still_in_the_write_ahead_log_are_read(tmp_path):
    path = _profile(tmp_path)
    # A writer that has not checkpointed (still open): its row lives in the -wal file alone.
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute(
        "INSERT INTO op_timings (device, library, op, attrs, shapes, ms, runs, measured_at) "
        "SELECT device, library, 'tanh', attrs, shapes, 0.05, runs, measured_at FROM op_timings"
    )
    try:
        assert os.path.exists(f"{path}-wal")
        table = load_table(str(path))
        assert ("tanh", "[]", "[[1,8]]") in table.entries
    finally:
        writer.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs unshare (Linux)")
def test_a_profile_on_read_only_storage_is_read(tmp_path):
    path = _profile(tmp_path)
    code = (
        "import sys; from tensor_eqsat.cost.recorded import load_table; "
        f"print(len(load_table({str(path)!r}).entries))"
    )
    # A read-only bind mount of the folder (root in a private mount namespace): like a CD, a
    # read-only NFS export or a container's read-only volume.
    script = (
        f"mount --bind {tmp_path} {tmp_path} && mount -o remount,bind,ro {tmp_path} && "
        f"{sys.executable} -c {code!r}"
    )
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("no unprivileged mount namespaces here")
    proc = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "1"
