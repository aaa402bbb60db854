"""Every command the README shows parses with the real CLI (subcommand, flags and values)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tensor_eqsat.cli import build_parser

README = Path(__file__).resolve().parents[2] / "README.md"


def _commands() -> list[str]:
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S):
        for line in block.splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith("tensor-eqsat "):
                lines.append(line)
    return lines


def test_readme_shows_commands():
    assert len(_commands()) >= 10


@pytest.mark.parametrize("line", _commands())
def test_readme_command_parses(line):
    args = build_parser().parse_args(shlex.split(line)[1:])
    assert getattr(args, "_run", None) is not None, line
