"""deliver() refuses, before any work, what the machine cannot do within the call: weights that
do not fit in memory, an ONNX output that cannot be written within the time budget."""

from __future__ import annotations

import sys
import time

import pytest

from tensor_eqsat import Graph, deliver
from tensor_eqsat.errors import ResourceError


def _wide(side: int) -> Graph:
    g = Graph()
    x = g.input((1, side), name="x")
    g.output(g.matmul(g.matmul(x, g.weight((side, side), name="w1")), g.weight((side, side), name="w2")))
    return g


def test_an_onnx_output_that_cannot_be_written_within_the_budget_is_refused_up_front(tmp_path, monkeypatch):
    pytest.importorskip("onnx")
    module = sys.modules["tensor_eqsat.deliver"]
    # 2 x 4 MB of weights at 100 kB/s: 80 s to write, with a 5 s budget.
    monkeypatch.setattr(sys.modules["tensor_eqsat.preflight"], "EXPORT_BYTES_PER_S", 100e3)
    monkeypatch.setattr(module, "optimize", lambda *a, **k: pytest.fail("the search started"))
    t0 = time.perf_counter()
    with pytest.raises(
        ResourceError, match=r"writing graph as ONNX makes and exports 8 MB of weights, about 84 s"
    ):
        deliver(_wide(1024), output=tmp_path / "x.onnx", time_budget=5, target="a100", search="saturate")
    assert time.perf_counter() - t0 < 3
    assert list(tmp_path.iterdir()) == []


def test_graph_json_output_or_no_budget_is_not_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules["tensor_eqsat.preflight"], "EXPORT_BYTES_PER_S", 100e3)
    d = deliver(_wide(256), output=tmp_path / "x.json", time_budget=20, target="a100", search="saturate",
                node_limit=60, final_extractor="greedy-dag")  # fmt: skip
    assert d.output is not None and d.output.is_file()


def test_the_json_without_a_search_result_has_the_head_of_every_result(tmp_path):
    # A graph no rule matches is handed back without a search result.
    g = Graph()
    g.output(g.relu(g.input((1, 8), name="x")))
    d = deliver(g, target="a100", time_budget=1.0, output=tmp_path / "g.json")
    assert d.result is None and d.kept_original and d.message
    data = d.to_dict()
    assert data["target"] == d.target.name and data["cost_model"] == d.config.cost_model_spec()
    assert data["original_cost_ms"] is None and data["optimized_cost_ms"] is None
    assert data["kept_original"] is True and "stop_reason" in data
    assert data["delivery"]["time_budget"] == 1.0 and data["delivery"]["output"] == str(tmp_path / "g.json")


def test_the_default_auto_budget_is_reported_not_null():
    d = deliver(_wide(64), search="auto", target="a100", node_limit=60, final_extractor="greedy-dag")
    assert d.config.time_budget is None
    assert d.to_dict()["delivery"]["time_budget"] == 60.0


def test_a_result_too_costly_to_check_names_how_to_skip_the_check(monkeypatch):
    # Every check predicted at a day: the search runs, its result is not checked, and the note
    # saying so names the switches that skip the check.
    from tensor_eqsat import check

    monkeypatch.setattr(check.Checker, "whole_s", lambda self: 86400.0)
    monkeypatch.setattr(check.Checker, "_part_s", lambda self, part: 86400.0)
    monkeypatch.setattr(check.Checker, "one_trial_s", lambda self: 86400.0)
    d = deliver(_wide(64), search="saturate", target="a100", time_budget=5, node_limit=60,
                final_extractor="greedy-dag")  # fmt: skip
    assert d.kept_original
    note = " ".join(d.notes)
    assert "not checked" in note and "--no-check" in note and "check=False" in note


def test_where_only_the_first_trials_fit_the_result_is_checked_on_them_and_handed_back(monkeypatch):
    # Neither the whole check nor the check of what changed fits, but the whole graph's first
    # trial does: it runs (as many trials as fit) and the result found is handed back checked.
    from tensor_eqsat import check

    monkeypatch.setattr(check.Checker, "whole_s", lambda self: 86400.0)
    monkeypatch.setattr(check.Checker, "_part_s", lambda self, part: 86400.0)
    d = deliver(_wide(64), search="saturate", target="a100", time_budget=5, node_limit=60,
                final_extractor="greedy-dag")  # fmt: skip
    assert d.result is not None and d.result.graph is not d.source.graph  # the search found a result
    assert not d.kept_original and d.verify.ok and d.verify.scope == "whole graph"
