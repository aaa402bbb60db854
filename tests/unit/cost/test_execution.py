"""The eager composition of isolated op times, and its fit to whole-graph latencies."""

from __future__ import annotations

import pytest

from tensor_eqsat.cost.execution import (
    DEFAULT_EAGER,
    EagerLaunch,
    eager_graph_ms,
    fit_eager_launch,
)


def test_small_ops_hide_under_the_launch_floor_and_large_ones_lose_the_event_cost():
    e = EagerLaunch(launch_ms=0.01, event_ms=0.005, view_ms=0.002)
    assert e.op_ms(0.001) == 0.01
    assert e.op_ms(0.012) == 0.01
    assert e.op_ms(0.5) == pytest.approx(0.495)
    assert eager_graph_ms(e, [0.001, 0.5], views=3) == pytest.approx(0.01 + 0.495 + 0.006)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), "x", True])
def test_constants_are_validated(bad):
    with pytest.raises(ValueError, match="launch_ms"):
        EagerLaunch(launch_ms=bad, event_ms=0.0, view_ms=0.0)


def test_dict_round_trip_and_errors_name_the_source():
    assert EagerLaunch.from_dict(DEFAULT_EAGER.to_dict()) == DEFAULT_EAGER
    with pytest.raises(ValueError, match=r"f\.json: 'eager' lacks field 'view_ms'"):
        EagerLaunch.from_dict({"launch_ms": 0.1, "event_ms": 0.0}, "f.json")


def test_the_fit_recovers_the_constants_that_made_the_latencies():
    truth = EagerLaunch(0.012, 0.006, 0.003)
    graphs = [
        ([0.02] * 40 + [0.3] * 5, 10),
        ([0.02] * 20 + [0.3] * 5, 30),
        ([0.015] * 100, 0),
        ([0.015] * 60 + [0.05] * 10, 5),
        ([0.5, 0.4, 0.02, 0.02], 50),
        ([0.5, 0.02], 20),
    ]
    samples = [(iso, v, eager_graph_ms(truth, iso, v)) for iso, v in graphs]
    pairs = [(samples[0], samples[1]), (samples[2], samples[3]), (samples[4], samples[5])]
    fit = fit_eager_launch(pairs)
    for iso, views, ms in samples:
        assert eager_graph_ms(fit, iso, views) == pytest.approx(ms, rel=0.02)


def test_the_fit_needs_data():
    with pytest.raises(ValueError, match="no whole-graph measurements"):
        fit_eager_launch([])


def test_the_pass_cost_is_paid_once_per_graph_and_older_profiles_read_as_zero():
    e = EagerLaunch(launch_ms=0.01, event_ms=0.0, view_ms=0.0, pass_ms=0.3)
    assert eager_graph_ms(e, [0.02] * 10, views=0) == pytest.approx(0.3 + 0.2)
    old = {k: v for k, v in e.to_dict().items() if k != "pass_ms"}
    assert EagerLaunch.from_dict(old).pass_ms == 0.0
    assert EagerLaunch.from_dict(e.to_dict()) == e


def test_the_fit_uses_a_fixed_cost_per_pass_to_match_the_levels():
    truth = EagerLaunch(0.01, 0.005, 0.002, pass_ms=0.2)
    graphs = [([0.02] * n + [0.3] * k, v) for n, k, v in ((40, 5, 10), (20, 5, 30), (100, 0, 0), (60, 10, 5))]
    samples = [(iso, v, eager_graph_ms(truth, iso, v)) for iso, v in graphs]
    fit = fit_eager_launch([(samples[0], samples[1]), (samples[2], samples[3])])
    # Four graphs do not pin four constants apart (the pass trades against the event cost); the
    # fit takes a pass cost and matches the levels and speedups closely.
    assert fit.pass_ms > 0.05
    for iso, views, ms in samples:
        assert eager_graph_ms(fit, iso, views) == pytest.approx(ms, rel=0.05)
