"""Tables are not wrapped when the output is not a terminal (issue 28, defect 16): rich fell
back to 80 columns, so piped or logged tables had every long cell broken over several lines."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tensor_eqsat.cli import main
from tensor_eqsat.commands._common import stdout

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _row(text: str, name: str) -> str:
    [row] = [line for line in text.splitlines() if f" {name} " in line]
    return row


def test_a_piped_table_keeps_each_row_on_one_line():
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONPATH"] = SRC
    proc = subprocess.run(
        [sys.executable, "-m", "tensor_eqsat", "rules"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout + proc.stderr
    row = _row(out, "matmul-assoc-1")
    assert "(matmul (matmul ?a ?b) ?c) => (matmul ?a (matmul ?b ?c))" in row
    assert max(len(line) for line in out.splitlines()) > 80


def test_columns_still_sets_the_width(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    assert main(["zoo", "bert"]) == 0
    captured = capsys.readouterr()
    assert max(len(line) for line in (captured.out + captured.err).splitlines()) <= 60


def test_a_captured_table_in_process_is_not_wrapped(capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert not stdout.is_terminal
    assert main(["zoo", "bert"]) == 0
    captured = capsys.readouterr()
    assert "relu:1 matmul:48 reshape:32 transpose:32 noop:8" in _row(captured.out + captured.err, "bert")
