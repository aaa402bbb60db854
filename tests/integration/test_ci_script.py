"""CI runs the README's set-up commands exactly as written, then the extras the README names."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _setup_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Set up", 1)[1].split("\n## ", 1)[0]
    first = re.findall(r"```bash\n(.*?)```", section, flags=re.S)[0]
    return [line.split("#", 1)[0].strip() for line in first.splitlines() if line.split("#", 1)[0].strip()]


def test_ci_runs_the_readme_setup_commands_as_written():
    commands = _setup_commands()
    assert commands == ['pip install -e ".[dev]"', "pytest"]
    script = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    install = script.index(commands[0])
    assert "run_tests" in script[install + 1 :] and "pytest" in " ".join(script)


def test_ci_adds_exactly_the_extras_the_readme_tells_testers_to_add():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Set up", 1)[1].split("\n## ", 1)[0]
    named = re.findall(r'pip install -e "\.\[dev,([a-z,]+)\]"', section)
    assert named, "the README names no extras for the tests"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    (extras,) = re.findall(r"^EXTRAS=\(([^)]*)\)", ci, flags=re.M)
    assert sorted(extras.split()) == sorted(named[0].split(","))
