"""An output interrupted by SIGTERM while it is written leaves no temporary file behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

SCRIPT = """
import os, signal, sys
from tensor_eqsat.outputs import atomic_target
with atomic_target(sys.argv[1]) as tmp:
    open(tmp, "wb").write(b"half")
    os.kill(os.getpid(), signal.SIGTERM)  # what `timeout` or a service manager sends
    raise SystemExit("SIGTERM did not end the process")
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigterm_during_a_write_removes_the_temporary_file(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "m.onnx")], env=env, capture_output=True, timeout=120
    )
    assert proc.returncode == -signal.SIGTERM, proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_previous_sigterm_handler_is_back_after_a_write(tmp_path):
    from tensor_eqsat.outputs import atomic_write

    before = signal.getsignal(signal.SIGTERM)
    atomic_write(tmp_path / "a.txt", "x")
    assert signal.getsignal(signal.SIGTERM) is before


HUP_SCRIPT = """
import os, signal, sys
from tensor_eqsat.outputs import atomic_target
with atomic_target(sys.argv[1]) as tmp:
    open(tmp, "wb").write(b"half")
    os.kill(os.getpid(), signal.SIGHUP)  # the terminal closed
    raise SystemExit("SIGHUP did not end the process")
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sighup_during_a_write_removes_the_temporary_file(tmp_path):
    # Issue 44, item 18: SIGHUP during an ONNX write left a 130 MB temporary file.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(
        [sys.executable, "-c", HUP_SCRIPT, str(tmp_path / "m.onnx")],
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGHUP, proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_previous_sighup_handler_is_back_after_a_write(tmp_path):
    from tensor_eqsat.outputs import atomic_write

    before = signal.getsignal(signal.SIGHUP)
    atomic_write(tmp_path / "a.txt", "x")
    assert signal.getsignal(signal.SIGHUP) is before
