"""A real Ctrl-C (SIGINT sent to the process) during a backend compile reaches the user's program,
which stops there, and nothing is cached (issue 44, item 13). test_backend_cache_trust.py raises
KeyboardInterrupt inside the search; this sends the signal to a separate Python process, as a
terminal does, while its search runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

pytestmark = pytest.mark.slow  # a process of its own that imports torch (about 10 s here)

SRC = Path(__file__).resolve().parents[3] / "src"

PROGRAM = textwrap.dedent(
    """
    import sys, time
    import torch
    import tensor_eqsat.torch  # noqa: F401 (the backend)
    from tensor_eqsat.search import portfolio

    real = portfolio.Portfolio._schedule

    def marked(self, *args, **kwargs):  # the search has started: say so, then search for long
        print("SEARCHING", flush=True)
        time.sleep(120)  # (an interruptible stand-in for a long search)
        return real(self, *args, **kwargs)

    portfolio.Portfolio._schedule = marked

    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v = (torch.nn.Linear(32, 32) for _ in range(3))

        def forward(self, x):
            a = torch.softmax(self.q(x) @ self.k(x).transpose(-1, -2) / 32**0.5, dim=-1)
            return a @ self.v(x)

    model = Attention().eval()
    f = torch.compile(model, backend="tensor_eqsat", dynamic=False, options={"time_budget": 300})
    with torch.no_grad():
        f(torch.randn(1, 6, 32))
    print("THE PROGRAM WENT ON", flush=True)
    """
)


def test_sigint_during_a_backend_compile_stops_the_program_and_caches_nothing(tmp_path):
    cache = tmp_path / "cache"
    env = {**os.environ, "TENSOR_EQSAT_CACHE_DIR": str(cache), "PYTHONPATH": str(SRC)}
    proc = subprocess.Popen(
        [sys.executable, "-c", PROGRAM],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until the search has started (or the process ends)
        assert line.strip() == "SEARCHING", (line, proc.stderr.read() if proc.poll() is not None else "")
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "THE PROGRAM WENT ON" not in out  # the Ctrl-C was not swallowed
    assert proc.returncode != 0 and "KeyboardInterrupt" in err, (proc.returncode, err[-2000:])
    folder = cache / "torch-backend"
    assert not folder.exists() or list(folder.iterdir()) == []  # no interrupted search cached
