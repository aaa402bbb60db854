"""The command line's start-up: a command line that names its command builds that command alone
(issue 35: a 2 s budget cannot spare the imports of the eleven others)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tensor_eqsat.cli import build_parser, command_names, requested_command

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["optimize", "squeezenet", "--time-budget", "2"], "optimize"),
        (["-vv", "zoo"], "zoo"),
        (["--verbose", "optimize", "--help"], "optimize"),
        (["-h", "optimize"], None),  # the top-level help lists every command
        (["--help"], None),
        ([], None),
        (["optimise", "vgg"], None),  # unknown: the parser names the choices
        (["--version"], None),
    ],
)
def test_the_command_a_line_names(argv, command):
    assert requested_command(argv) == command


def test_every_command_module_is_named_for_its_command():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert sorted(sub.choices) == command_names() and len(command_names()) >= 10


def test_one_command_built_alone_parses_as_the_full_parser_does():
    argv = ["optimize", "squeezenet", "--time-budget", "2", "--no-check"]
    alone, full = vars(build_parser("optimize").parse_args(argv)), vars(build_parser().parse_args(argv))
    assert alone.keys() == full.keys()
    assert {k: v for k, v in alone.items() if k != "_run"} == {k: v for k, v in full.items() if k != "_run"}


def test_the_top_level_help_still_lists_every_command(capsys):
    with pytest.raises(SystemExit):
        build_parser(requested_command(["--help"])).parse_args(["--help"])
    out = capsys.readouterr().out
    assert all(name in out for name in command_names()) and "SQLite" in out  # (the bench help)


def test_an_unknown_command_names_the_choices(capsys):
    argv = ["optimise", "vgg"]
    with pytest.raises(SystemExit):
        build_parser(requested_command(argv)).parse_args(argv)
    assert "invalid choice: 'optimise'" in capsys.readouterr().err


def test_building_one_command_imports_no_other_commands_module():
    code = (
        "import sys, json\n"
        "from tensor_eqsat.cli import build_parser\n"
        "build_parser('zoo')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('tensor_eqsat.'))))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    mods = set(json.loads(out.stdout))
    assert "tensor_eqsat.commands.zoo" in mods
    commands = {m for m in mods if m.startswith("tensor_eqsat.commands.")}
    assert commands - {"tensor_eqsat.commands.zoo", "tensor_eqsat.commands._common"} == set()
    assert not {m for m in mods if m.startswith("tensor_eqsat.bench")}
