"""Ctrl-C during a search with worker processes ends the command, however often it is pressed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tensor_eqsat import zoo
from tensor_eqsat.ir.serialize import save

DRIVER = Path(__file__).resolve().parents[2] / "interrupt_driver.py"


@pytest.mark.slow
@pytest.mark.parametrize("search", ["mcts", "auto"])
def test_two_ctrl_c_with_two_workers_end_the_run(search, tmp_path):
    graph = tmp_path / "squeeze.json"
    save(zoo.get("squeezenet", image=47, width_divisor=8, classes=10), graph)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    # The CLI with a marker when the first MCTS step starts its workers (not a fixed sleep, which
    # on a loaded machine landed before the pool, while the e-graph was built).
    cmd = [sys.executable, str(DRIVER), "pool", "work", "optimize", str(graph), "--search", search,
           "--workers", "2", "--target", "a100", "--no-check", "--time-budget", "300",
           "--budget", "4000"]  # fmt: skip
    # A session of its own, as a terminal's foreground job: Ctrl-C reaches the workers too.
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True, start_new_session=True
    )
    try:
        assert proc.stderr is not None
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if line.strip() == "PHASE pool":
                break
        assert seen and seen[-1].strip() == "PHASE pool", "".join(seen)[-3000:]
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.3)
        os.killpg(proc.pid, signal.SIGINT)
        sent = time.monotonic()
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert time.monotonic() - sent < 30
    # 130: the CLI's "interrupted"; -SIGINT: the second Ctrl-C ended the process as Ctrl-C does.
    assert proc.returncode in (130, -signal.SIGINT), err[-3000:]
    assert "Traceback" not in err and "Exception ignored" not in err, err[-3000:]


@pytest.mark.parametrize("when", ["inside", "shutdown"])
def test_an_interrupt_kills_the_workers_instead_of_joining_them(when, monkeypatch):
    from tensor_eqsat.search import parallel
    from tensor_eqsat.search.mcts import MctsConfig

    killed = []
    monkeypatch.setattr(
        parallel, "kill_workers", lambda pool: killed.append(pool) or pool.shutdown(wait=False)
    )

    class Env:
        pass

    config = MctsConfig(workers=2, budget=4)
    with pytest.raises(KeyboardInterrupt), parallel.worker_pool(config, Env()) as pool:
        assert pool.submit(pow, 2, 5).result() == 32
        if when == "inside":
            raise KeyboardInterrupt
        real = pool.shutdown

        def interrupted_join(wait=True, **kw):
            if wait:
                raise KeyboardInterrupt  # the second Ctrl-C, while the pool is joined
            return real(wait=wait, **kw)

        monkeypatch.setattr(pool, "shutdown", interrupted_join)
    assert len(killed) == 1
