"""MCTS workers die with their parent (issue 28, defect 3): SIGTERM or SIGKILL to
``optimize --workers 2`` left both workers alive, blocked on a pipe, for as long as one waited."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from procs import alive, children

SRC = str(Path(__file__).resolve().parents[3] / "src")
pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")


def _search_then_kill(sig: int) -> tuple[int, list[int]]:
    """Start a long 2-worker MCTS search, send ``sig`` once its workers run; return the
    search's exit status and the workers still alive 10 s later (killed before returning)."""
    argv = [sys.executable, "-m", "tensor_eqsat", "optimize", "nasrnn", "--search", "mcts"]
    argv += ["--workers", "2", "--budget", "100000", "--no-check", "--json"]
    env = {**os.environ, "PYTHONPATH": SRC}
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(workers) < 2 and proc.poll() is None:
            time.sleep(0.2)
            workers = children(proc.pid)
        assert len(workers) >= 2, "the search did not start its workers"
        time.sleep(1.0)  # let them take a planning task
        workers = children(proc.pid)
    finally:
        proc.send_signal(sig)
        status = proc.wait(timeout=60)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(alive(w) for w in workers):
        time.sleep(0.1)
    left = [w for w in workers if alive(w)]
    for w in left:  # never leave them behind, even when the test fails
        os.kill(w, signal.SIGKILL)
    return status, left


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_mcts_workers_die_with_their_parent(sig):
    status, left = _search_then_kill(sig)
    assert status == -sig  # the search itself still ends the way the signal says
    assert left == [], f"workers {left} outlived the search"
