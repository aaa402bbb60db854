"""Messages that misled (issue 28, defect 11): the out-of-memory error suggested ``--no-check``
when it had been given."""

from __future__ import annotations

import pytest

import tensor_eqsat.commands.optimize as optimize_command
from tensor_eqsat.cli import main


def _out_of_memory(args):
    raise MemoryError


@pytest.mark.parametrize("no_check", [False, True])
def test_out_of_memory_suggests_no_check_only_when_it_was_not_given(monkeypatch, capsys, no_check):
    monkeypatch.setattr(optimize_command, "run", _out_of_memory)
    argv = ["optimize", "nasrnn"] + (["--no-check"] if no_check else [])
    assert main(argv) == 3  # out of memory: the machine cannot do it (ExitCode.RESOURCES)
    err = capsys.readouterr().err
    assert err.startswith("error: out of memory")
    assert ("--no-check" in err) is not no_check


def test_out_of_memory_in_another_command_does_not_suggest_an_optimize_option(monkeypatch, capsys):
    import tensor_eqsat.commands.show as show_command

    monkeypatch.setattr(show_command, "run", _out_of_memory)
    assert main(["show", "nasrnn"]) == 3
    assert "--no-check" not in capsys.readouterr().err
