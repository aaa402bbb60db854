"""The reference interpreter: seeded data, given values, errors, live-node evaluation."""

from __future__ import annotations

import numpy as np
import pytest

from tensor_eqsat.errors import GraphError
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.interpreter import leaf_values, random_input, random_weight, run, run_all


def net(extra_branch: bool = False) -> Graph:
    g = Graph()
    x = g.input((2, 3, 5, 5), name="x")
    w = g.weight((4, 3, 3, 3), name="w")
    y = g.conv2d(x, w, activation="relu")
    if extra_branch:
        y = g.ewadd(y, g.conv2d(x, g.weight((4, 3, 1, 1), name="other")))
    bn = [g.weight((4,), name=n) for n in ("scale", "bias", "mean", "var")]
    g.output(g.batchnorm(y, *bn))
    return g


def test_same_seed_same_values():
    g = net()
    a, b = run(g, seed=7), run(g, seed=7)
    np.testing.assert_array_equal(a[0], b[0])
    c = run(g, seed=8)
    assert not np.array_equal(a[0], c[0])


def test_data_depends_on_seed_and_name_only():
    small, big = leaf_values(net(), seed=5), leaf_values(net(extra_branch=True), seed=5)
    assert set(big) - set(small) == {"other"}
    for name, arr in small.items():
        np.testing.assert_array_equal(big[name], arr)
    np.testing.assert_array_equal(small["x"], random_input("x", (2, 3, 5, 5), seed=5))
    np.testing.assert_array_equal(small["w"], random_weight("w", (4, 3, 3, 3), seed=5))
    assert not np.array_equal(random_input("x", (4,), seed=5), random_input("y", (4,), seed=5))


def test_random_data_statistics():
    x = random_input("x", (200, 200), seed=0)
    assert x.dtype == np.float32
    assert abs(float(x.mean())) < 0.02 and abs(float(x.std()) - 1) < 0.02
    w = random_weight("w", (64, 100), seed=0)  # fan_in 100: std 0.1
    assert abs(float(w.std()) - 0.1) < 0.005
    v = random_weight("v", (1000,), seed=0, positive=True)
    assert v.min() >= 0.5 and v.max() <= 1.5


def test_batchnorm_variance_is_positive_so_outputs_are_finite():
    g = net()
    values = leaf_values(g, seed=0)
    assert values["var"].min() >= 0.5  # a normal draw would give negative variances and NaNs
    assert values["mean"].min() < 0  # the other batchnorm parameters are ordinary weights
    assert np.all(np.isfinite(run(g, seed=0)[0]))


def test_given_values_override_random_and_stored_data():
    g = Graph()
    x = g.input((2,), name="x")
    w = g.weight((2,), name="w", data=np.array([10, 20], np.float32))
    g.output(g.ewadd(x, w))
    xv = np.array([1, 2], np.float32)
    np.testing.assert_array_equal(run(g, {"x": xv})[0], [11, 22])
    np.testing.assert_array_equal(run(g, {"x": xv}, {"w": [0.5, 0.5]})[0], [1.5, 2.5])
    # stored weight data is used under every seed; the input is drawn per seed
    assert run(g, seed=1)[0][0] != run(g, seed=2)[0][0]
    np.testing.assert_array_equal(run(g, seed=1)[0] - leaf_values(g, seed=1)["x"], [10, 20])


def test_given_value_of_the_wrong_shape():
    g = net()
    with pytest.raises(GraphError, match=r"input 'x': value has shape \(3, 5, 5\), expected \(2, 3, 5, 5\)"):
        run(g, {"x": np.zeros((3, 5, 5))})


def test_unknown_names_are_refused():
    g = net()
    with pytest.raises(GraphError, match=r"values given for unknown inputs: \['y'\] \(graph inputs: x\)"):
        run(g, {"y": np.zeros(1)})
    # a weight's name passed as an input would otherwise be ignored silently
    with pytest.raises(GraphError, match=r"unknown inputs: \['w'\]"):
        run(g, {"w": np.zeros((4, 3, 3, 3))})
    with pytest.raises(
        GraphError, match=r"unknown weights: \['x'\] \(graph weights: bias, mean, scale, var, w\)"
    ):
        run(g, weights={"x": np.zeros((2, 3, 5, 5))})


def test_graph_without_outputs():
    g = Graph()
    g.input((2,))
    with pytest.raises(GraphError, match="graph has no outputs"):
        run(g)


def test_run_all_and_dead_nodes():
    g = Graph()
    x = g.input((3,), name="x")
    dead = g.sigmoid(x)
    y = g.relu(x)
    a, b = g.split(y, axis=0, sizes=(1, 2))
    g.output(b)
    xv = np.array([-1, 2, -3], np.float32)
    values = run_all(g, {"x": xv})
    assert dead.ref not in values
    np.testing.assert_array_equal(values[y.ref], [0, 2, 0])
    np.testing.assert_array_equal(values[a.ref], [0])  # every output of a live node is computed
    everything = run_all(g, {"x": xv}, only_live=False)
    np.testing.assert_allclose(everything[dead.ref], 1 / (1 + np.exp(-xv)), rtol=1e-6)


def test_outputs_in_order_and_repeated():
    g = Graph()
    x = g.input((2,), name="x")
    r = g.relu(x)
    g.output(r, x, r)
    xv = np.array([-1, 1], np.float32)
    out = run(g, {"x": xv})
    assert len(out) == 3
    np.testing.assert_array_equal(out[1], xv)
    np.testing.assert_array_equal(out[0], out[2])


def test_a_rounded_random_weight_is_made_once_and_is_the_rounded_float32_one():
    from tensor_eqsat.ir.dtypes import round_to

    w16 = random_weight("w", (8, 9), seed=3, dtype="float16")
    assert w16.dtype == np.float16 and not w16.flags.writeable
    np.testing.assert_array_equal(w16, round_to(random_weight("w", (8, 9), seed=3), "float16"))
    assert random_weight("w", (8, 9), seed=3, dtype="float16") is w16  # remembered
    wb = random_weight("w", (8, 9), seed=3, dtype="bfloat16")
    assert wb.dtype == np.float32 and np.all(wb.view(np.uint32) & 0xFFFF == 0)
