"""When the original is handed back, the command's table, its last line and ``--json`` say so, say
why truly, and speak of what was handed back (issue 44, items 15 and 18)."""

from __future__ import annotations

import importlib
import json

import pytest

from tensor_eqsat import Graph
from tensor_eqsat.cli import main
from tensor_eqsat.ir.serialize import save

deliver_module = importlib.import_module("tensor_eqsat.deliver")
SMALL = ["--search", "saturate", "--node-limit", "60", "--final-extractor", "greedy-dag"]


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TENSOR_EQSAT_CACHE_DIR", str(tmp_path / "cache"))


def chain_file(tmp_path) -> str:
    """x·W1·W2 as graph JSON: the rewrite halves its cost."""
    g = Graph()
    x = g.input((1, 64), name="x")
    g.output(g.matmul(g.matmul(x, g.weight((64, 64), name="w1")), g.weight((64, 64), name="w2")))
    path = tmp_path / "chain.json"
    save(g, path)
    return str(path)


def unmeasured(monkeypatch, tmp_path, *extra: str) -> list[str]:
    """The command line of a run that is checked but whose guard cannot fit the time left."""
    monkeypatch.setattr(deliver_module, "_guard_estimate", lambda *a, **k: 1e6)
    return ["optimize", chain_file(tmp_path), "--target", "ort-cpu", "--cost-model", "roofline:a100",
            "--time-budget", "30", *SMALL, *extra]  # fmt: skip


def test_a_kept_original_is_reported_as_kept_with_its_true_reason(monkeypatch, tmp_path, capsys):
    # `optimize bert --time-budget 2` printed "predicted speedup 14.87 %" with no result row, and
    # the written line said "not checked or measured" for a result that had been checked.
    out = tmp_path / "o.json"
    assert main(unmeasured(monkeypatch, tmp_path, "-o", str(out))) == 0
    cap = capsys.readouterr()
    assert "predicted speedup │ 50.00 %" not in cap.out.replace("  ", " ")
    assert "(not handed back)" in cap.out and "original kept: not measured within the time budget" in cap.out
    assert "equivalent:" in cap.out  # it was checked
    assert f"original model (not measured within the time budget) written to {out}" in cap.err
    assert "not checked or measured" not in cap.err


def test_the_json_of_a_kept_original_speaks_of_what_was_handed_back(monkeypatch, tmp_path, capsys):
    # The JSON had speedup_pct 15.95 beside kept_original: true.
    assert main(unmeasured(monkeypatch, tmp_path, "--json")) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kept_original"] is True and data["kept_reason"] == "not measured within the time budget"
    assert data["speedup_pct"] == 0.0 and data["optimized_cost_ms"] == data["original_cost_ms"]
    assert data["found"]["speedup_pct"] == pytest.approx(50.0)


def test_the_json_of_a_result_handed_back_has_its_gain_as_the_headline(tmp_path, capsys):
    args = ["optimize", chain_file(tmp_path), "--target", "a100", *SMALL, "--json"]
    assert main(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kept_original"] is False and data["kept_reason"] is None
    assert data["speedup_pct"] == data["found"]["speedup_pct"] == pytest.approx(50.0)


def test_a_budget_too_small_to_find_anything_does_not_say_optimized_graph_written(tmp_path, capsys):
    # Issue 44, item 18: `--time-budget 0.2` printed "optimized graph written" for the original.
    out = tmp_path / "t.json"
    assert main(["optimize", "squeezenet", "--time-budget", "1e-9", "--no-check", "-o", str(out)]) == 0
    cap = capsys.readouterr()
    assert "optimized graph written" not in cap.err
    assert f"original model (the search found nothing within the time budget) written to {out}" in cap.err
    assert "original kept: the search found nothing within the time budget" in cap.out


def test_every_key_of_the_json_is_documented(tmp_path, capsys, monkeypatch):
    # docs/reference.md says what each key means, from REPORT_KEYS: no key goes without it.
    from tensor_eqsat.deliver import REPORT_KEYS

    seen: set[str] = set()
    assert main(["optimize", chain_file(tmp_path), "--target", "a100", *SMALL, "--json"]) == 0
    seen |= set(json.loads(capsys.readouterr().out))
    assert main(unmeasured(monkeypatch, tmp_path, "--json")) == 0
    seen |= set(json.loads(capsys.readouterr().out))
    idle = Graph()
    idle.output(idle.relu(idle.input((1, 4), name="x")))
    save(idle, tmp_path / "idle.json")
    assert main(["optimize", str(tmp_path / "idle.json"), "--json"]) == 0
    seen |= set(json.loads(capsys.readouterr().out))
    assert seen - set(REPORT_KEYS) == set() and all(REPORT_KEYS[k] for k in seen)
