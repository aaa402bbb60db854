"""The README's set-up (``pip install -e ".[dev]"`` then ``pytest``) passes without the optional
extras: doctests that need one are skipped with the reason instead of failing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# torch hidden as if not installed: a None entry in sys.modules makes both `import torch` and
# importlib.util.find_spec("torch") report it missing.
_RUN_WITHOUT_TORCH = (
    "import sys; sys.modules['torch'] = None; import pytest; "
    "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '-rs', 'src/tensor_eqsat/io/torch_exec.py']))"
)


def test_torch_doctests_skip_with_the_reason_when_torch_is_missing():
    proc = subprocess.run(
        [sys.executable, "-c", _RUN_WITHOUT_TORCH],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "failed" not in proc.stdout
    assert "doctest needs torch (optional extra, not installed)" in proc.stdout
    assert "skipped" in proc.stdout
