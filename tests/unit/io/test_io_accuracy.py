"""The check cannot be fooled (issue 44 items 1, 2, 9, 10): non-finite values match exactly, a
reduced-precision result is judged by the original's own error against the float32 reference
(DESIGN.md decision 17 revised, io/accuracy.py), and float16 and bfloat16 ONNX files are checked
like any model in their precision."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from tensor_eqsat.io import accuracy
from tensor_eqsat.io.equivalence import Reference, verify
from tensor_eqsat.ir.cast import cast_graph
from tensor_eqsat.ir.graph import Graph

DTYPES = ["float32", "float16", "bfloat16"]
BACKENDS = ["interpreter"] + (["torch"] if importlib.util.find_spec("torch") else [])
HAS_ONNX = all(importlib.util.find_spec(m) is not None for m in ("onnx", "onnxruntime"))


def affine(dtype: str, add: str | None = "bias", value: float = 0.2, seed: int = 0) -> Graph:
    """``x @ W + c`` (W ~ N(0, 0.1²), max|y| about 2.5). add: ``bias`` (c all ``value``), ``mask``
    (c of -inf and +3 alternating by column, an action mask's logits) or None (the add dropped:
    the planted wrong rewrite)."""
    rng = np.random.default_rng(seed)
    g = Graph()
    x = g.input((16, 48), name="x")
    w = g.weight((48, 32), name="w")
    g.weight_data["w"] = (0.1 * rng.standard_normal((48, 32))).astype(np.float32)
    y = g.matmul(x, w)
    if add is not None:
        c = g.weight((16, 32), name="c")
        if add == "mask":
            row = np.where(np.arange(32) % 2 == 0, -np.inf, 3.0).astype(np.float32)
            g.weight_data["c"] = np.broadcast_to(row, (16, 32)).copy()
        else:
            g.weight_data["c"] = np.full((16, 32), value, np.float32)
        y = g.ewadd(y, c)
    g.output(y)
    return cast_graph(g, dtype)


# -- the rule itself ----------------------------------------------------------------------------


def test_non_finite_values_must_match_exactly_and_finite_ones_are_compared_on_their_own():
    inf, nan = np.inf, np.nan
    want = np.array([-inf, 3.0, nan, inf])
    assert accuracy.non_finite_mismatches(want.copy(), want) == 0
    assert accuracy.non_finite_mismatches(np.array([-inf, 0.0, nan, inf]), want) == 0  # finite: not its job
    assert accuracy.non_finite_mismatches(np.array([0.0, 3.0, nan, inf]), want) == 1  # -inf lost
    assert accuracy.non_finite_mismatches(np.array([inf, 3.0, 0.0, -inf]), want) == 3
    # What the original itself gives in its precision (a float16 overflow) is allowed.
    own = np.array([-inf, inf, nan, inf])
    assert accuracy.non_finite_mismatches(np.array([-inf, inf, nan, inf]), want, own) == 0
    j = accuracy.judge(np.array([-inf, 3.0, nan, inf]), want, want, "bf16")
    assert j.ok and j.error == 0.0 and np.isfinite(j.limit)


def test_the_bound_is_a_multiple_of_the_originals_own_error_plus_a_floor():
    ref = np.array([2.5, -1.0, 0.5])
    own = ref + np.array([0.01, 0.0, 0.0])
    limit = accuracy.MULTIPLE * 0.01 + accuracy.FLOOR_ULPS * accuracy.ulp("bf16") * 2.5
    assert accuracy.judge(ref + limit * 0.99, ref, own, "bf16").ok
    assert not accuracy.judge(ref + limit * 1.01, ref, own, "bf16").ok
    # An exact original (own error 0): the floor alone, a rounding or two of the output's scale.
    assert accuracy.judge(ref + 0.5 * accuracy.ulp("fp16") * 2.5, ref, ref, "fp16").ok
    assert not accuracy.judge(ref + 0.01, ref, ref, "fp16").ok


# -- item 1: an infinity in the reference -------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_a_dropped_mask_add_fails_and_the_correct_result_with_the_same_inf_passes(dtype, backend):
    original = affine(dtype, "mask")
    assert verify(original, affine(dtype, "mask"), backend=backend).ok
    report = verify(original, affine(dtype, None), backend=backend)
    assert not report.ok and report.outputs[0].mismatched > 0, report.summary()


# -- item 2: the original's own error is the measure ---------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("dtype", "bias"), [("bfloat16", 0.2), ("float16", 0.02), ("float32", 0.02)])
def test_a_dropped_bias_is_caught_where_the_dtypes_tolerance_let_it_through(dtype, bias, backend):
    # The figures: a bias of 0.2 passed in bfloat16 (26 times its rounding error) and one
    # of 0.02 in float16 under the fixed tolerance per dtype.
    report = verify(affine(dtype, value=bias), affine(dtype, None), backend=backend)
    assert not report.ok, report.summary()
    if dtype != "float32":
        assert report.own_rule and "own error" in report.summary()
        own = report.outputs[0].own_error
        assert own is not None and 0 < own < bias / 10


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("dtype", "bias"), [("bfloat16", 0.06), ("float16", 0.008)])
def test_smaller_dropped_biases_are_caught_where_the_originals_own_error_allows(dtype, bias, backend):
    # About 3-11 times the original's own error, floor included (benchmarks/check_sensitivity.py).
    report = verify(affine(dtype, value=bias), affine(dtype, None), backend=backend)
    assert not report.ok, report.summary()
    assert report.outputs[0].max_abs_error < 12 * (report.outputs[0].own_error or 0.0)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_fusion_that_rounds_once_passes(dtype, backend):
    # x @ W1 + z @ W2 (three roundings) as one product of the concatenations (one rounding): a
    # correct rewrite closer to float32 than the original, never refused for rounding.
    rng = np.random.default_rng(1)
    w1, w2 = (rng.standard_normal((48, 32)).astype(np.float32) * 0.1 for _ in range(2))

    def two(fused: bool) -> Graph:
        g = Graph()
        x, z = g.input((16, 48), name="x"), g.input((16, 48), name="z")
        if fused:
            w = g.weight((96, 32), name="w")
            g.weight_data["w"] = np.concatenate([w1, w2])
            g.output(g.matmul(g.concat([x, z], 1), w))
        else:
            a, b = g.weight((48, 32), name="w1"), g.weight((48, 32), name="w2")
            g.weight_data |= {"w1": w1, "w2": w2}
            g.output(g.ewadd(g.matmul(x, a), g.matmul(z, b)))
        return cast_graph(g, dtype)

    report = verify(two(False), two(True), backend=backend)
    assert report.ok, report.summary()


def test_explicit_tolerances_keep_the_tolerance_rule():
    report = verify(affine("bfloat16"), affine("bfloat16", None), rtol=0.1, atol=0.01)
    assert not report.own_rule and report.ok  # what the user asked for, and says so
    assert "rtol=0.1" in report.summary()


# -- items 9 and 10: float16 and bfloat16 ONNX files ------------------------------------------


def _onnx(graph: Graph, path) -> str:
    from tensor_eqsat.io.onnx_export import export_onnx
    from tensor_eqsat.io.onnx_files import save_model

    save_model(export_onnx(graph, seed=0), path)
    return str(path)


@pytest.mark.skipif(not HAS_ONNX, reason="needs onnx and onnxruntime")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_reduced_precision_onnx_file_gets_a_float32_reference_and_its_dtypes_rule(tmp_path, dtype):
    rng = np.random.default_rng(1)
    w1, w2 = (rng.standard_normal((48, 32)).astype(np.float32) * 0.1 for _ in range(2))
    g = Graph()
    x, z = g.input((16, 48), name="x"), g.input((16, 48), name="z")
    a, b = g.weight((48, 32), name="w1"), g.weight((48, 32), name="w2")
    g.weight_data |= {"w1": w1, "w2": w2}
    g.output(g.ewadd(g.matmul(x, a), g.matmul(z, b)))
    h = Graph()
    x, z = h.input((16, 48), name="x"), h.input((16, 48), name="z")
    w = h.weight((96, 32), name="w")
    h.weight_data["w"] = np.concatenate([w1, w2])
    h.output(h.matmul(h.concat([x, z], 1), w))
    original = _onnx(cast_graph(g, dtype), tmp_path / "a.onnx")
    fused = _onnx(cast_graph(h, dtype), tmp_path / "b.onnx")
    ref = Reference(original)
    assert ref.dtype.value == dtype and ref.own_rule
    report = ref.check(fused)
    assert report.ok, report.summary()
    assert report.dtype == dtype and "against a float32 reference" in report.summary()
    # bfloat16 files run in PyTorch (onnxruntime has no bfloat16 CPU kernels); float16 too.
    expected = "torch" if importlib.util.find_spec("torch") else "interpreter"
    assert report.backends == (expected, expected)
    wrong = _onnx(affine(dtype, None), tmp_path / "c.onnx")
    assert not verify(_onnx(affine(dtype, value=0.2), tmp_path / "d.onnx"), wrong).ok
