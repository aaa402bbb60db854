"""The docs that state facts about the code are generated from it, and the guide runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_reference_and_decisions_match_the_code():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "make_reference.py"), "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert proc.returncode == 0, proc.stderr


def test_the_reference_names_every_setting_flag_target_and_stop_reason():
    from tensor_eqsat.config import OptimizeConfig
    from tensor_eqsat.deliver import DeliveryConfig
    from tensor_eqsat.search.stop import StopReason
    from tensor_eqsat.target.targets import TARGETS

    text = (ROOT / "docs" / "reference.md").read_text()
    for cls in (OptimizeConfig, DeliveryConfig):
        for name in cls.__dataclass_fields__:
            assert f"| `{name}` |" in text, name
    for reason in StopReason:
        assert f"| `{reason.value}` |" in text
    for name in TARGETS:
        assert f"| `{name}` |" in text
    for flag in ("--time-budget", "--target", "--no-guard", "--input-shape"):
        assert f"`{flag}" in text


def _python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


@pytest.mark.parametrize("page", ["guide.md"])
def test_the_guide_runs_as_written(page, tmp_path, monkeypatch):
    blocks = _python_blocks(ROOT / "docs" / page)
    assert blocks, f"docs/{page} has no python example"
    monkeypatch.chdir(tmp_path)
    scope: dict[str, object] = {}
    for block in blocks:
        exec(compile(block, f"docs/{page}", "exec"), scope)
