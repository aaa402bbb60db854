"""Folding weight transforms keeps what is read and makes no concatenation twice (issue 44: a
rewritten BERT merged its products through ten nested concatenations, and its float16 check spent
seconds making 142 M intermediate values)."""

from __future__ import annotations

import numpy as np
import pytest

from tensor_eqsat.io.plan import fold_weights, weight_only_nodes
from tensor_eqsat.ir.dtypes import round_values
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.interpreter import run


def _merged(dtype: str = "float32") -> tuple[Graph, list]:
    """x @ concat(concat(a@b, c), concat(d, a@b), axis=1) and x @ (a@b): nested concatenations
    along one axis, an intermediate product read twice, and one read by a step too."""
    g = Graph()
    x = g.input((3, 4), name="x", dtype=dtype)
    a, b, c, d = (g.weight((4, 4), name=n, dtype=dtype) for n in "abcd")
    ab = g.matmul(a, b)
    left = g.concat([ab, c], axis=1)
    right = g.concat([d, ab], axis=1)
    both = g.concat([left, right], axis=1)
    g.output(g.matmul(x, both))
    g.output(g.matmul(x, ab))
    return g, [ab, left, right, both]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_kept_values_equal_the_full_folds_and_intermediates_are_not_returned(dtype):
    g, (ab, left, _, both) = _merged(dtype)
    const = weight_only_nodes(g)
    every = fold_weights(g, const, seed=3)
    kept = fold_weights(g, const, seed=3, keep={both.ref, ab.ref})
    assert set(kept) == {both.ref, ab.ref}
    for ref in kept:
        assert kept[ref].dtype == every[ref].dtype
        np.testing.assert_array_equal(kept[ref], every[ref])
    # The pieces are where the full fold put them.
    np.testing.assert_array_equal(kept[both.ref][:, :4], every[ab.ref])
    np.testing.assert_array_equal(kept[both.ref][:, 4:8], every[left.ref][:, 4:])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_float32_values_hold_the_rounded_values_as_float32(dtype):
    g, (ab, _, _, both) = _merged(dtype)
    const = weight_only_nodes(g)
    every = fold_weights(g, const, seed=1)
    wide = fold_weights(g, const, seed=1, float32_values=True, keep={both.ref, ab.ref})
    for ref in wide:
        assert wide[ref].dtype == np.float32
        np.testing.assert_array_equal(wide[ref], every[ref].astype(np.float32))
        np.testing.assert_array_equal(wide[ref], round_values(wide[ref], dtype))


def test_a_concatenation_read_by_another_op_is_made():
    g = Graph()
    x = g.input((2, 2), name="x")
    a, b, c = (g.weight((2, 2), name=n) for n in "abc")
    ab = g.concat([a, b], axis=1)
    g.output(g.matmul(x, g.concat([ab, c], axis=1)))
    g.output(g.matmul(g.transpose(ab, (1, 0)), x))  # ab also read by a transpose (weight-only)
    const = weight_only_nodes(g)
    every = fold_weights(g, const)
    wanted = {r for n in g.nodes if n.id not in const for r in n.inputs if r[0] in const}
    kept = fold_weights(g, const, keep=wanted)
    assert set(kept) == wanted
    for ref in wanted:
        np.testing.assert_array_equal(kept[ref], every[ref])


def test_the_torch_program_holds_only_what_its_steps_read_and_computes_the_same():
    pytest.importorskip("torch")
    from tensor_eqsat.io.torch_exec import TorchProgram

    for dtype in ("float32", "float16"):
        g, (ab, left, right, both) = _merged(dtype)
        prog = TorchProgram(g, float32_compute=dtype != "float32")
        held = {ref for ref, slot in prog._slot.items() if slot in prog._consts}
        assert left.ref not in held and right.ref not in held
        assert {both.ref, ab.ref} <= held
        x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
        got = [t.numpy().astype(np.float64) for t in prog({"x": x})]
        want = run(g, {"x": x})
        for a, b in zip(got, want, strict=True):
            np.testing.assert_allclose(a, np.asarray(b, dtype=np.float64), rtol=1e-2, atol=1e-2)
