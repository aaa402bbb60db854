"""verify: equivalent models pass, different ones fail with the output named, any backend."""

from __future__ import annotations

import time

import numpy as np
import pytest
from io_helpers import make_model, rand
from onnx import helper

from tensor_eqsat.errors import TensorEqsatError
from tensor_eqsat.io.equivalence import _compare, verify
from tensor_eqsat.io.onnx_export import export_onnx
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.serialize import save


def _block(extra_relu: bool = False, scale: float = 1.0) -> Graph:
    g = Graph()
    x = g.input((1, 3, 6, 6), name="x")
    w = g.weight((4, 3, 3, 3), name="w")
    y = g.conv2d(x, w, activation="relu")
    if extra_relu:
        y = g.relu(y)  # relu(relu(y)) == relu(y)
    if scale != 1.0:
        y = g.smul(y, scale)
    g.output(y, g.transpose(x, (0, 1, 3, 2)))
    return g


def test_equivalent_graphs_pass_in_every_backend():
    for backend in ("auto", "interpreter", "ort", "torch"):
        if backend == "torch":
            pytest.importorskip("torch")
        report = verify(_block(), _block(extra_relu=True), backend=backend, trials=2)
        assert report.ok, report.summary()
        assert [o.shape for o in report.outputs] == [(1, 4, 6, 6), (1, 3, 6, 6)]
        assert report.summary().startswith("equivalent")


def test_different_graphs_fail_naming_the_output():
    report = verify(_block(), _block(scale=1.01))
    assert not report.ok
    assert [o.ok for o in report.outputs] == [False, True]
    assert report.outputs[0].mismatched > 0
    assert report.outputs[0].max_rel_error == pytest.approx(0.01, rel=1e-3)
    assert "outputs [0]" in report.summary()
    # A looser tolerance accepts it.
    assert verify(_block(), _block(scale=1.01), rtol=0.02).ok


def test_graph_against_its_onnx_export_and_json(tmp_path):
    g = _block()
    path = tmp_path / "b.onnx"
    export_onnx(g, path, seed=5)
    assert verify(g, path, seed=5).ok
    assert not verify(g, path, seed=6).ok  # other random weights on the Graph side
    save(g, tmp_path / "b.json")
    assert verify(tmp_path / "b.json", path, seed=5).backends == ("interpreter", "onnxruntime")


def test_onnx_models_with_data_compare_in_ort():
    w = rand(3, 4)
    a = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], {"x": (2, 3)}, {"y": None}, {"w": w})
    b = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], {"x": (2, 3)}, {"y": None}, {"w": w * 2})
    assert verify(a, a).ok
    report = verify(a, b, backend="interpreter")
    assert not report.ok and report.backends == ("interpreter", "interpreter")


def test_signature_mismatches_are_reported_not_raised():
    g = _block()
    h = Graph()
    h.output(h.relu(h.input((1, 3, 6, 6), name="other")))
    report = verify(g, h)
    assert not report.ok and "inputs differ" in report.problem
    k = Graph()
    k.output(k.relu(k.input((1, 3, 6, 6), name="x")))
    report = verify(g, k)
    assert not report.ok and "2 outputs vs 1" in report.problem
    assert report.to_dict()["problem"] == report.problem


def test_trials_must_be_positive():
    with pytest.raises(TensorEqsatError, match="trials"):
        verify(_block(), _block(), trials=0)


def test_compare_handles_non_finite_and_integer_outputs():
    a = np.array([1.0, np.nan, np.inf, 2.0], np.float32)
    assert _compare(a, a.copy(), 0.0, 0.0)[2] == 0
    b = a.copy()
    b[1] = 0.0
    abs_err, _, bad = _compare(b, a, 1e-3, 1e-3)
    assert bad == 1 and abs_err == float("inf")
    assert _compare(np.array([1, 2]), np.array([1, 3]), 1.0, 1.0)[2] == 1


def test_export_verified_writes_only_equivalent_models(tmp_path):
    from tensor_eqsat.io.equivalence import VerificationError, export_verified

    w = rand(3, 4)
    original = make_model(
        [helper.make_node("MatMul", ["x", "w"], ["logits"])], {"x": (2, 3)}, {"logits": None}, {"w": w}
    )
    good = Graph()
    x = good.input((2, 3), name="x")
    good.output(good.matmul(x, good.weight((3, 4), name="w", data=w)))
    path = tmp_path / "out.onnx"
    report = export_verified(original, good, path)
    assert report is not None and report.ok and path.is_file()
    import onnx

    assert [o.name for o in onnx.load(str(path)).graph.output] == ["logits"]  # the original's names
    bad = Graph()
    x = bad.input((2, 3), name="x")
    bad.output(bad.matmul(x, bad.weight((3, 4), name="w", data=w * 1.1)))
    other = tmp_path / "bad.onnx"
    with pytest.raises(VerificationError, match="not written") as info:
        export_verified(original, bad, other)
    assert not info.value.report.ok and not other.exists()
    assert export_verified(original, bad, other, check=False) is None and other.is_file()


def test_a_deadline_stops_the_trials_after_the_first_and_says_so():
    from tensor_eqsat.clock import Deadline
    from tensor_eqsat.io.equivalence import Reference

    ref = Reference(_block(), trials=3)
    passed = Deadline.after(0.0)  # no time left: one trial runs, never none
    report = ref.check(_block(extra_relu=True), deadline=passed)
    assert report.ok and (report.trials, report.planned) == (1, 3)
    assert "x 1 of 3 trials (time)" in report.summary()
    assert report.to_dict()["planned_trials"] == 3
    wrong = ref.check(_block(scale=-1.0), deadline=passed)  # one trial still catches a sign flip
    assert not wrong.ok and wrong.trials == 1
    full = ref.check(_block(extra_relu=True), deadline=Deadline.after(600.0))
    assert full.ok and (full.trials, full.planned) == (3, None)
    assert "x 3 trials within" in full.summary()


def test_a_trial_starts_only_where_its_expected_time_is_left(monkeypatch):
    from tensor_eqsat.io import equivalence

    ref = equivalence.Reference(_block(), trials=3)
    real = equivalence._prepare

    def slow(*args, **kwargs):  # each run of the optimized side takes at least 0.2 s
        side = real(*args, **kwargs)
        run = side.run
        side.run = lambda feed: (time.sleep(0.2), run(feed))[1]
        return side

    class Scripted:  # seconds left before trials 0, 1 and 2
        def __init__(self, lefts):
            self.lefts = iter(lefts)

        def left(self):
            return next(self.lefts)

    monkeypatch.setattr(equivalence, "_prepare", slow)
    report = ref.check(_block(extra_relu=True), deadline=Scripted([0.0, 30.0, 0.24]))
    assert (report.trials, report.planned) == (2, 3)  # 0.24 s < 1.25 x 0.2 s: the third waits
    report = ref.check(_block(extra_relu=True), deadline=Scripted([0.0, 30.0, 30.0]))
    assert (report.trials, report.planned) == (3, None)
