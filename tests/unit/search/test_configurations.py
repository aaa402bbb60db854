"""The op configurations a saturated e-graph prices, and profiling them into a timing file."""

from __future__ import annotations

import pytest

from tensor_eqsat.cost.model import UnitCostModel, node_costs
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.search.configurations import (
    RecordingCostModel,
    config_key,
    model_configurations,
    profile_models,
)


def _graph() -> Graph:
    g = Graph()
    x = g.input((1, 8, 6, 6), name="x")
    a = g.conv2d(x, g.weight((8, 8, 3, 3)), activation="relu")
    b = g.conv2d(x, g.weight((8, 8, 3, 3)), activation="relu")
    g.output(g.ewadd(a, b))
    return g


def test_the_recorder_sees_exactly_the_costed_ops():
    g = _graph()
    rec = RecordingCostModel()
    rec.graph_cost(g)
    costed = {config_key(n.op, n.attrs, [g.shape_of(r) for r in n.inputs])
              for n, c in node_costs(UnitCostModel(), g) if c > 0}  # fmt: skip
    assert {config_key(*c) for c in rec.configurations} == costed


def test_saturation_adds_the_rewritten_configurations():
    g = _graph()
    base = model_configurations(g, node_limit=1)
    full = model_configurations(g, node_limit=300)
    assert base.keys < full.keys  # the merged conv, its split outputs' consumers ...
    ops = {op for op, _, _ in full.configurations}
    assert "conv2d" in ops and full.enodes > base.enodes
    assert model_configurations(g, node_limit=300).keys == full.keys  # deterministic


def test_a_zoo_model_is_saturated_with_its_own_rules():
    r = model_configurations("vgg")
    assert r.model == "vgg" and len(r.configurations) == 32  # as in the H200 table


class _Timer:
    """Stands in for the measured model: times nothing, remembers what it was asked."""

    def __init__(self, stored=()):
        self.stored = set(stored)
        self.measured = 0

    def kernel_ms(self, spec, attrs, shapes):
        key = config_key(spec.name, attrs, shapes)
        if key not in self.stored:
            self.stored.add(key)
            self.measured += 1
        return 1.0


def test_profiling_times_each_configuration_once_and_resumes():
    g = _graph()
    timer = _Timer()
    first = profile_models([("g", g)], timer, node_limit=100)
    assert first[0].timed == first[0].configurations > 0 and first[0].already == 0
    again = profile_models([("g", g)], timer, node_limit=100)
    assert again[0].timed == 0 and again[0].already == first[0].configurations
    partial = _Timer(list(timer.stored)[:2])
    resumed = profile_models([("g", g)], partial, node_limit=100)
    assert resumed[0].timed == first[0].configurations - 2


def test_profiling_with_the_measured_model_writes_a_recorded_profile(tmp_path):
    pytest.importorskip("torch")
    from tensor_eqsat.cost.measured import MeasuredCostModel
    from tensor_eqsat.cost.recorded import RecordedCostModel

    path = tmp_path / "cpu.sqlite"
    g = _graph()
    timer = MeasuredCostModel(device="cpu", cache_path=path, repeats=3, warmup=0, max_seconds=0.01)
    report = profile_models([("g", g)], timer, node_limit=1)  # the graph as it is: 2 configurations
    recorded = RecordedCostModel(str(path))
    assert recorded.mode.value == "isolated"  # a CPU table
    recorded.graph_cost(g)
    assert recorded.misses == 0 and recorded.hits == 2  # the two convs share one configuration
    assert report[0].timed == report[0].configurations
    fresh = MeasuredCostModel(device="cpu", cache_path=path, repeats=3, warmup=0, max_seconds=0.01)
    assert profile_models([("g", g)], fresh, node_limit=1)[0].timed == 0
