"""The README's Python example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_python_example_runs(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README has no python example"
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(blocks[0], scope)
    assert (tmp_path / "block.json").exists()
    assert scope["out"].shape == (1, 64, 56, 56)
    assert np.all(scope["out"] >= 0)  # fused relu
