"""The ops inference rewrites introduce: batch-norm folding and fused attention, in numpy and PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

from tensor_eqsat.errors import ShapeError
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.interpreter import run
from tensor_eqsat.ir.ops import get_op
from tensor_eqsat.ir.ops_inference import attention_numpy

RNG = np.random.default_rng(0)


def _rand(*shape: int, positive: bool = False) -> np.ndarray:
    if positive:
        return RNG.uniform(0.5, 2.0, shape).astype(np.float32)
    return RNG.standard_normal(shape).astype(np.float32)


def _bn_params(c: int) -> list[np.ndarray]:
    return [_rand(c), _rand(c), _rand(c), _rand(c, positive=True)]  # scale, bias, mean, var


@pytest.mark.parametrize(("stride", "padding"), [((1, 1), "same"), ((2, 2), "valid"), ((2, 1), "same")])
def test_folded_conv_computes_the_batch_norm_of_the_conv(stride, padding):
    eps = 1e-3
    g = Graph()
    x = g.input((2, 3, 7, 6), name="x")
    w = g.weight((5, 3, 3, 3), name="w", data=_rand(5, 3, 3, 3))
    s, b, m, v = (g.weight((5,), name=n, data=d) for n, d in zip("sbmv", _bn_params(5), strict=True))
    original = g.batchnorm(g.conv2d(x, w, stride=stride, padding=padding), s, b, m, v, eps=eps)
    (wf,) = g.add("bnfold_weight", [w, s, v], axis=0, eps=eps)
    (bf,) = g.add("bnfold_bias", [s, b, m, v], eps=eps)
    folded = g.ewadd(g.conv2d(x, wf, stride=stride, padding=padding), g.reshape(bf, (5, 1, 1)))
    g.output(original, folded)
    want, got = run(g, {"x": _rand(2, 3, 7, 6)})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_folded_product_computes_the_batch_norm_of_the_product():
    g = Graph()
    x = g.input((4, 6), name="x")
    w = g.weight((6, 3), name="w", data=_rand(6, 3))
    s, b, m, v = (g.weight((3,), name=n, data=d) for n, d in zip("sbmv", _bn_params(3), strict=True))
    original = g.batchnorm(g.matmul(x, w), s, b, m, v)
    folded = g.ewadd(
        g.matmul(x, g.add("bnfold_weight", [w, s, v], axis=1)[0]), g.add("bnfold_bias", [s, b, m, v])[0]
    )
    g.output(original, folded)
    want, got = run(g, {"x": _rand(4, 6)})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_the_folded_weight_is_rounded_once():
    # w * scale / sqrt(var + eps) in float64, then one rounding: the float32 nearest the exact
    # value, which a chain of float32 ops (divide, multiply) misses on some elements.
    w, scale, var = _rand(64, 3, 3, 3), _rand(64), _rand(64, positive=True)
    (got,) = get_op("bnfold_weight").evaluate([w, scale, var], get_op("bnfold_weight").make_attrs(axis=0))
    exact = (
        w.astype(np.float64)
        * (scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + 1e-5))[:, None, None, None]
    )
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, exact.astype(np.float32))
    chained = w * (scale / np.sqrt(var + np.float32(1e-5)))[:, None, None, None]
    assert np.any(chained != got)  # so the test above can tell one rounding from several


def test_fold_shapes_are_checked():
    bnw = get_op("bnfold_weight")
    with pytest.raises(ShapeError, match="scale must have shape \\(5,\\)"):
        bnw.infer_shapes([(5, 3, 1, 1), (3,), (5,)], bnw.make_attrs(axis=0))
    with pytest.raises(ShapeError, match="out of range"):
        bnw.infer_shapes([(5, 3), (5,), (5,)], bnw.make_attrs(axis=2))
    bnb = get_op("bnfold_bias")
    with pytest.raises(ShapeError, match="mean must have shape \\(4,\\)"):
        bnb.infer_shapes([(4,), (4,), (3,), (4,)], bnb.make_attrs())
    assert bnw.positive_inputs == {2} and bnb.positive_inputs == {3}


def _decomposed(q, kt, v, mask, scale, divisor):
    s = np.matmul(q, kt) * np.float32(scale) / np.float32(divisor)
    if mask is not None:
        s = s + mask
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return np.matmul(e / e.sum(axis=-1, keepdims=True), v)


@pytest.mark.parametrize("masked", [False, True])
def test_attention_is_the_pattern_it_replaces(masked):
    q, kt, v = _rand(2, 4, 5, 8), _rand(2, 4, 8, 7), _rand(2, 4, 7, 3)
    mask = np.triu(np.full((1, 1, 5, 7), -1e9, np.float32), 1) if masked else None
    got = attention_numpy(q, kt, v, mask, 0.5, 2.0)
    np.testing.assert_allclose(got, _decomposed(q, kt, v, mask, 0.5, 2.0), rtol=1e-5, atol=1e-6)
    spec = get_op("attention")
    ins = [q, kt, v] + ([mask] if masked else [])
    (out,) = spec.evaluate(ins, spec.make_attrs(scale=0.5, divisor=2.0))
    np.testing.assert_array_equal(out, got)
    assert spec.infer_shapes([a.shape for a in ins], spec.make_attrs()) == ((2, 4, 5, 3),)


def test_attention_shape_errors():
    spec = get_op("attention")
    a = spec.make_attrs()
    with pytest.raises(ShapeError, match="q's features 8 differ from kt's 6"):
        spec.infer_shapes([(1, 5, 8), (1, 6, 7), (1, 7, 3)], a)
    with pytest.raises(ShapeError, match="kt's 7 keys differ from v's 6"):
        spec.infer_shapes([(1, 5, 8), (1, 8, 7), (1, 6, 3)], a)
    with pytest.raises(ShapeError, match="the mask enlarges the scores"):
        spec.infer_shapes([(1, 5, 8), (1, 8, 7), (1, 7, 3), (2, 5, 7)], a)
    with pytest.raises(ShapeError, match="optional mask"):
        spec.infer_shapes([(1, 5, 8), (1, 8, 7), (1, 7, 3), (5, 7), (5, 7)], a)
    # flops: two products plus the softmax, one pass
    assert spec.flop_count(((1, 5, 8), (1, 8, 7), (1, 7, 3)), a) == 2 * 35 * 8 + 2 * 35 * 3 + 7 * 35


CASES = [
    ("bnfold_weight", {"axis": 0, "eps": 1e-3}, [(6, 3, 3, 3), (6,), (6,)]),
    ("bnfold_weight", {"axis": 1}, [(5, 4), (4,), (4,)]),
    ("bnfold_bias", {"eps": 1e-3}, [(6,), (6,), (6,), (6,)]),
    ("attention", {"scale": 0.125}, [(2, 3, 5, 8), (2, 3, 8, 5), (2, 3, 5, 4), (1, 1, 5, 5)]),
    ("attention", {"divisor": 4.0}, [(1, 5, 8), (3, 8, 6), (3, 6, 4)]),  # q broadcast over heads
    ("attention", {}, [(4, 5, 8), (4, 8, 6), (4, 6, 4), (5, 1)]),
]


@pytest.mark.parametrize(("op", "attrs", "shapes"), CASES, ids=lambda c: str(c))
def test_pytorch_semantics_match_numpy(op, attrs, shapes):
    torch = pytest.importorskip("torch")
    from tensor_eqsat.ir.torch_ops import TorchContext, torch_step

    spec = get_op(op)
    canon = spec.make_attrs(**attrs)
    xs = [_rand(*s, positive=i in spec.positive_inputs) for i, s in enumerate(shapes)]
    (want,) = spec.evaluate(xs, canon)
    step = torch_step(TorchContext(torch), spec, canon, shapes)
    (got,) = step([torch.from_numpy(x) for x in xs])
    assert got.dtype == torch.float32 and tuple(got.shape) == want.shape
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
