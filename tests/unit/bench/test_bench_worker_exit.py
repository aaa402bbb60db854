"""Sweep workers exit when the sweep that started them dies (even by SIGKILL)."""

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


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}


def test_a_worker_whose_parent_is_gone_exits():
    # The watcher is told its parent is a process that is not its parent: as after the real
    # parent died, it must exit instead of sleeping for a minute.
    code = (
        "import os, time\n"
        "from tensor_eqsat.workers import exit_with_parent\n"
        "exit_with_parent(os.getppid() + 7919)\n"
        "time.sleep(60)\n"
    )
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", code], env=_env(), capture_output=True, text=True, timeout=50
    )
    assert proc.returncode == 1 and proc.stderr == ""  # exited by the watcher, not by an error
    assert time.monotonic() - start < 45


@pytest.mark.slow
def test_a_worker_whose_parent_lives_keeps_working():
    code = (
        "import os, time\n"
        "from tensor_eqsat.workers import exit_with_parent, PARENT_POLL_S\n"
        "exit_with_parent(os.getppid())\n"
        "time.sleep(4 * PARENT_POLL_S)\n"
        "print('done')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=_env(), capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "done"


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_bench_jobs_killed_with_sigkill_leaves_no_workers(tmp_path):
    argv = [sys.executable, "-m", "tensor_eqsat", "bench", "--models", "vgg", "resnet50"]
    argv += ["--configs", "ocf-ilp", "--jobs", "2", "--db", str(tmp_path / "r.sqlite")]
    bench = subprocess.Popen(argv, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        workers: set[int] = set()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(workers) < 2:
            time.sleep(0.5)
            # the pool's workers, not multiprocessing's resource tracker
            workers = {
                c for c in children(bench.pid) if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()
            }
        assert len(workers) == 2, "the sweep did not start its workers"
        time.sleep(3)  # let them import and start an experiment
    finally:
        bench.send_signal(signal.SIGKILL)
        bench.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(alive(w) for w in workers):
        time.sleep(0.5)
    left = [w for w in workers if alive(w)]
    for w in left:  # do not leave them behind even when the test fails
        os.kill(w, signal.SIGKILL)
    assert not left, f"workers {left} outlived the sweep"
