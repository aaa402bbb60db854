"""Doctests clean up after themselves (issue 28, defect 15): every ``pytest`` run used to leave
the temporary folders of the ``outputs`` and ``bench.db`` examples behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULES = ["src/tensor_eqsat/outputs.py", "src/tensor_eqsat/bench/db.py", "src/tensor_eqsat/io/onnx_files.py"]


@pytest.mark.parametrize("module", MODULES)
def test_a_doctest_run_leaves_nothing_in_the_temporary_folder(tmp_path, module):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {**os.environ, "TMPDIR": str(tmpdir), "PYTHONPATH": str(ROOT / "src")}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--doctest-modules", module]
    argv += ["--basetemp", str(tmp_path / "basetemp")]  # pytest's own folders: not the doctests'
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert " passed" in proc.stdout
    assert sorted(p.name for p in tmpdir.iterdir()) == []
