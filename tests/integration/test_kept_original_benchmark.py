"""benchmarks/kept_original.py: the three arms compile, run and are timed (a smoke run)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]


def test_the_three_arms_are_timed_against_freezing(tmp_path):
    out = tmp_path / "row.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "kept_original.py"), "mobilenet_v2", "--quick",
           "--blocks", "2", "--runs", "2", "--json", str(out)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    row = json.loads(out.read_text())
    assert set(row["ms"]) == {"freezing", "compile_frozen", "tensor_eqsat"}
    assert all(v > 0 for v in row["ms"].values()) and row["vs_freezing_pct"]["freezing"] == 0.0
    assert set(row["noise_pct"]) == {"compile_frozen", "tensor_eqsat"}
    # The harness verified the arms: freezing and compile_frozen each froze their graph's weights,
    # and the backend reported on its graph.
    assert "froze 1" in row["arms"]["freezing"] and "froze 1" in row["arms"]["compile_frozen"]
    assert "weights as constants" in row["arms"]["compile_frozen"]
    assert row["backend"] and "tensor_eqsat [" in row["backend"][0]


def test_bad_counts_are_refused():
    cmd = [sys.executable, str(ROOT / "benchmarks" / "kept_original.py"), "mobilenet_v2", "--runs", "0"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2 and "--runs must be at least 1" in done.stderr
