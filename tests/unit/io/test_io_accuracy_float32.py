"""The CLI's check in float32: a result is judged against a float64 run of the original by the
original's own float32 error (io/accuracy.py). A correct fold that the fixed ``rtol`` refused
passes; small planted errors that the fixed ``rtol`` let through are caught; where no float64
reference can be run, the fixed tolerance applies and the report says why."""

from __future__ import annotations

import numpy as np
import pytest

from tensor_eqsat.io import accuracy
from tensor_eqsat.io.equivalence import Reference, float64_bytes, float64_planned, verify
from tensor_eqsat.ir.graph import Graph

pytest.importorskip("torch")  # the float64 reference runs in PyTorch

SHIFT = 1e5
"""A bias a later shift cancels (a batch norm's mean undoing a large bias): the float32
original rounds the sum at 1e5 (ulp 0.0078), its fold ``x @ W + (b - m)`` does not."""


def _affine(g: Graph, seed: int = 0) -> tuple[int, int]:
    rng = np.random.default_rng(seed)
    x = g.input((16, 48), name="x")
    w = g.weight((48, 32), name="w")
    g.weight_data["w"] = (0.1 * rng.standard_normal((48, 32))).astype(np.float32)
    return x, w


def shifted(*, folded: bool = False) -> Graph:
    """``(x @ W + b) - m`` with b = m = :data:`SHIFT` (max|y| about 2.5), or its correct fold
    ``x @ W + (b - m)`` computed once in float32 (exactly 0)."""
    g = Graph()
    x, w = _affine(g)
    y = g.matmul(x, w)
    if folded:
        c = g.weight((16, 32), name="c")
        g.weight_data["c"] = np.zeros((16, 32), np.float32)
        g.output(g.ewadd(y, c))
        return g
    b, m = g.weight((16, 32), name="b"), g.weight((16, 32), name="m")
    g.weight_data["b"] = np.full((16, 32), SHIFT, np.float32)
    g.weight_data["m"] = np.full((16, 32), -SHIFT, np.float32)
    g.output(g.ewadd(g.ewadd(y, b), m))
    return g


def affine(bias: float | None = None, scale: float | None = None) -> Graph:
    """``x @ W (+ c)`` with c all ``bias``, its output times ``scale`` where given."""
    g = Graph()
    x, w = _affine(g)
    y = g.matmul(x, w)
    if bias is not None:
        c = g.weight((16, 32), name="c")
        g.weight_data["c"] = np.full((16, 32), bias, np.float32)
        y = g.ewadd(y, c)
    if scale is not None:
        s = g.weight((16, 32), name="s")
        g.weight_data["s"] = np.full((16, 32), scale, np.float32)
        y = g.ewmul(y, s)
    g.output(y)
    return g


@pytest.mark.parametrize("backend", ["interpreter", "torch"])
def test_a_correct_fold_the_fixed_tolerance_refused_passes_against_float64(backend):
    original, fold = shifted(), shifted(folded=True)
    report = verify(original, fold, backend=backend)
    assert report.ok, report.summary()
    assert report.own_rule and "float64 reference" in report.summary()
    # The fold is closer to the exact result than the original: the original's own error is the
    # rounding at 1e5, and the fold's error a small share of it.
    out = report.outputs[0]
    assert out.own_error is not None and out.own_error > 1e-3
    assert out.max_abs_error < out.own_error
    # The fixed float32 tolerance (rtol 1e-3, atol 1e-4) refuses it.
    assert not verify(original, fold, backend=backend, rtol=1e-3, atol=1e-4).ok


@pytest.mark.parametrize("backend", ["interpreter", "torch"])
@pytest.mark.parametrize(
    "original, wrong",
    [
        (affine(bias=1e-4), affine()),  # a dropped bias of 1e-4 (4e-5 of max|y|)
        (affine(), affine(scale=1 + 1e-3)),  # the outputs scaled by 1 + 1e-3
        (affine(), affine(scale=1 + 1e-5)),  # by 1 + 1e-5
    ],
    ids=["dropped-bias-1e-4", "scaled-1e-3", "scaled-1e-5"],
)
def test_small_planted_float32_errors_are_caught(original, wrong, backend):
    report = verify(original, wrong, backend=backend)
    assert not report.ok, report.summary()
    assert report.own_rule and "float64 reference" in report.summary()
    out = report.outputs[0]
    assert out.own_error is not None and out.max_abs_error > accuracy.MULTIPLE * out.own_error
    # The fixed tolerance let each of them through.
    assert verify(original, wrong, backend=backend, rtol=1e-3, atol=1e-4).ok


def test_the_original_and_a_copy_of_it_pass_and_the_float64_reference_is_named():
    report = verify(affine(bias=0.2), affine(bias=0.2), backend="torch")
    assert report.ok and report.own_rule
    assert report.backends == ("torch", "torch")
    assert report.to_dict()["no_float64"] == ""
    assert "fp32 against a float64 reference" in report.summary()


def test_where_the_float64_reference_cannot_be_afforded_the_tolerance_applies_and_says_why(monkeypatch):
    # As if the machine had 1 kB of memory: the float64 run is not afforded.
    monkeypatch.setattr(accuracy, "_available", lambda device: 1000)
    assert not float64_planned(affine(bias=0.2))
    ref = Reference(affine(bias=1e-4), backend="torch")
    assert not ref.own_rule and "of memory available" in ref.no_float64
    report = ref.check(affine(), backend="torch")
    assert report.ok  # the old bound: a dropped 1e-4 passes it
    assert "no float64 reference" in report.summary() and "of memory" in report.summary()
    assert report.to_dict()["no_float64"] == ref.no_float64


def test_the_float64_reference_holds_twice_the_float32_bytes():
    g = affine(bias=0.2)
    # weights 48x32 + 16x32, tensors: x, the matmul and the add (16x48, 16x32, 16x32), float32
    assert float64_bytes(g) == 2 * 4 * (48 * 32 + 16 * 32 + 16 * 48 + 2 * 16 * 32)
    assert float64_planned(g)
