"""Measured cost models time operators within the call's deadline (issue 44, item 8: an ONNX input
with a 4M×64 activation searched 75-122 s of a 30 s budget)."""

from __future__ import annotations

import time

import pytest

from tensor_eqsat.clock import Deadline
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.ops import get_op

pytest.importorskip("onnxruntime", reason="the ort cost model needs the 'onnx' extra")

from tensor_eqsat.cost.ort import OrtCostModel

FAST = dict(warmup=1, repeats=5, max_seconds=0.05)


def _model(tmp_path, **kw) -> OrtCostModel:
    return OrtCostModel(cache_path=tmp_path / "t.sqlite3", **{**FAST, **kw})


def test_past_the_deadline_a_configuration_is_priced_without_being_timed(tmp_path, monkeypatch):
    from tensor_eqsat.cost.bounded import bound_timing

    cm = _model(tmp_path)
    relu, matmul = get_op("relu"), get_op("matmul")
    timed = cm.kernel_ms(relu, relu.make_attrs(), ((64, 64),))  # before any deadline: timed
    assert cm.measured == 1 and timed > 0
    bound_timing(cm, Deadline.after(-1.0))  # the search's deadline has passed
    calls = []
    monkeypatch.setattr(cm, "time_op", lambda *a: calls.append(a) or pytest.fail("timed past the deadline"))
    ms = cm.kernel_ms(matmul, matmul.make_attrs(), ((64, 64), (64, 64)))
    assert ms > 0 and calls == [] and cm.timing_bound.estimated == 1
    assert cm.measured == 1  # and not cached as if it had been measured
    again = _model(tmp_path)
    assert again.timing_bound.deadline is None


def test_a_configuration_one_run_of_which_would_overrun_is_not_timed(tmp_path, monkeypatch):
    from tensor_eqsat.cost.bounded import bound_timing

    cm = _model(tmp_path)
    bound_timing(cm, Deadline.after(0.5))
    monkeypatch.setattr(cm, "time_op", lambda *a: pytest.fail("timed a run longer than the time left"))
    huge = ((1 << 22, 4096), (4096, 4096))  # a product the roofline prices at seconds
    assert cm.kernel_ms(get_op("matmul"), get_op("matmul").make_attrs(), huge) > 0.5e3


@pytest.mark.slow
def test_a_search_priced_by_timing_ends_within_its_budget(tmp_path, monkeypatch):
    monkeypatch.setenv("TENSOR_EQSAT_CACHE_DIR", str(tmp_path / "cache"))
    from tensor_eqsat import optimize

    g = Graph()
    x = g.input((1 << 18, 64), name="x")  # a 64 MB activation: each timing takes a while
    h = g.relu(g.matmul(x, g.weight((64, 64), name="a")))
    h = g.ewadd(g.matmul(h, g.weight((64, 64), name="b")), g.matmul(h, g.weight((64, 64), name="c")))
    g.output(g.tanh(g.matmul(h, g.weight((64, 64), name="d"))))
    t0 = time.perf_counter()
    r = optimize(g, search="auto", time_budget=6.0, cost_model="measured:ort-cpu")
    wall = time.perf_counter() - t0
    assert r.optimized_cost_ms <= r.original_cost_ms
    assert wall <= 6.0 * 1.1 + 1.0, wall
