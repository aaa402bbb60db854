"""The CLI as a new or careless user meets it: mistakes refused before any work, with a message
that names them; results and progress where a user looks for them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tensor_eqsat import zoo
from tensor_eqsat.cli import main
from tensor_eqsat.ir.serialize import save


@pytest.fixture
def graph_file(tmp_path: Path) -> Path:
    path = tmp_path / "squeeze.json"
    save(zoo.get("squeezenet", image=47, width_divisor=8, classes=10), path)
    return path


def _code(argv: list[str]) -> int:
    """The exit code of one CLI invocation, whether the parser or the command ended it."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def _no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if the e-graph is built or the search starts: mistakes are refused first."""

    def refuse(*args, **kwargs):
        raise AssertionError("the work started before the mistake was refused")

    module = sys.modules["tensor_eqsat.deliver"]
    monkeypatch.setattr(module, "optimize", refuse)
    monkeypatch.setattr(module.Source, "of", refuse)


@pytest.mark.parametrize("name", ["settings.json", "stats.json", "optimized.json", "complete.json"])
def test_an_output_that_is_one_of_the_run_directorys_files_is_refused(name, tmp_path, capsys, monkeypatch):
    rd = tmp_path / "rd"
    rd.mkdir()
    _no_work(monkeypatch)
    assert _code(["optimize", "squeezenet", "-o", str(rd / name), "--run-dir", str(rd)]) == 2
    err = capsys.readouterr().err
    assert f"the run directory {rd} writes its own {name} there" in err
    assert list(rd.iterdir()) == []


def test_an_output_beside_the_run_files_is_written(graph_file, tmp_path, capsys):
    rd = tmp_path / "rd"
    rd.mkdir()
    out = rd / "model.json"
    argv = ["optimize", str(graph_file), "--search", "saturate", "--node-limit", "200", "--no-check"]
    assert main([*argv, "-o", str(out), "--run-dir", str(rd), "--target", "a100"]) == 0
    assert out.is_file() and (rd / "settings.json").is_file()
    assert "nodes" in out.read_text()  # the graph, not the run's settings
