"""``tensor-eqsat profile -o FILE``: a file that is no timing file is named as such, and two
runs sharing one file count each configuration once between them."""

from __future__ import annotations

import json
import sqlite3

import pytest

from tensor_eqsat.cli import main

ARGS = [
    "--target",
    "torch-cpu",
    "--node-limit",
    "1",
    "--repeats",
    "3",
    "--warmup",
    "0",
    "--max-seconds",
    "0.01",
]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"this is not a database" * 20, "-o {out}: not a timing file"),
        (None, "-o {out}: an SQLite file, but not a timing file (no op_timings table)"),
    ],
)
def test_an_output_that_is_no_timing_file_is_named_as_one(content, message, graph_file, tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "t.sqlite"
    if content is None:
        sqlite3.connect(out).executescript("CREATE TABLE runs (id INTEGER); INSERT INTO runs VALUES (1);")
    else:
        out.write_bytes(content)
    assert main(["profile", str(graph_file), "-o", str(out), *ARGS]) == 2
    err = capsys.readouterr().err
    assert message.format(out=out) in err
    assert "results database" not in err


def test_a_key_another_run_stored_first_is_not_counted_as_timed_here(
    graph_file, tmp_path, capsys, monkeypatch
):
    pytest.importorskip("torch")
    from tensor_eqsat.cost.timing_cache import TimingCache

    out = tmp_path / "t.sqlite"
    real = TimingCache.put

    def other_run_first(self, device, library, op, attrs, shapes, ms, runs):
        if op == "relu":  # another process, timing the same configuration, stored it just before
            other = TimingCache(self.path)
            real(other, device, library, op, attrs, shapes, 99.0, runs)
            other.close()
        return real(self, device, library, op, attrs, shapes, ms, runs)

    monkeypatch.setattr(TimingCache, "put", other_run_first)
    assert main(["profile", str(graph_file), "-o", str(out), *ARGS, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["timed"] == 1 and data["already_recorded"] == 1
