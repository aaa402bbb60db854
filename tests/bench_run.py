"""What the benchmark smoke tests share: one benchmark script run as a process, its JSON rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def benchmark_rows(script: str, tmp_path: Path, *args: str) -> Any:
    """The rows ``benchmarks/SCRIPT`` writes with ``--json``, run with ``args`` in a fresh process
    (the project's ``src`` on its path, its cache under ``tmp_path``); fails the test with the
    script's stderr when it exits non-zero."""
    out = tmp_path / "r.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "TENSOR_EQSAT_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args, "--json", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text())
