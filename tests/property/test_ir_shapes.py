"""Property tests: for random valid shapes and attributes, every op's inferred output shapes equal
the shapes of what its numpy semantics computes (and, where numpy has the same operation, of
numpy's own result); where numpy rejects the shapes, shape inference raises ShapeError.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from tensor_eqsat.errors import ShapeError
from tensor_eqsat.ir.graph import Graph, Tensor
from tensor_eqsat.ir.ops import get_op

dims = st.integers(1, 5)
shapes = st.lists(dims, min_size=0, max_size=4).map(tuple)
nonscalar = st.lists(dims, min_size=1, max_size=4).map(tuple)


def check(g: Graph, outs: tuple[Tensor, ...], seed: int = 0) -> list[np.ndarray]:
    """Evaluate the node that made ``outs`` on random inputs; its results must have the inferred
    shapes and be finite."""
    node = g.nodes[outs[0].node]
    rng = np.random.default_rng(seed)
    args = []
    for ref in node.inputs:
        shape = g.shape_of(ref)
        # batchnorm's variance ...; rsqrt and pow (fractional, negative exponents) are real on x > 0.
        positive = len(args) in node.spec.positive_inputs or node.op in ("rsqrt", "pow")
        args.append(rng.uniform(0.5, 1.5, shape) if positive else rng.standard_normal(shape))
    results = node.spec.evaluate([a.astype(np.float32) for a in args], node.attrs)
    assert tuple(r.shape for r in results) == node.shapes == tuple(t.shape for t in outs)
    for r in results:
        assert r.dtype == np.float32
        assert np.all(np.isfinite(r)), node.op
    return list(results)


@st.composite
def broadcastable_pair(draw):
    out = draw(nonscalar)

    def operand():
        rank = draw(st.integers(0, len(out)))
        tail = out[len(out) - rank :]
        return tuple(d if draw(st.booleans()) else 1 for d in tail)

    return operand(), operand()


@given(broadcastable_pair(), st.sampled_from(["ewadd", "ewmul"]))
def test_binary_broadcasting(pair, op):
    a, b = pair
    g = Graph()
    (y,) = g.add(op, [g.input(a), g.input(b)])
    check(g, (y,))
    assert y.shape == np.broadcast_shapes(a, b)


@given(shapes, shapes, st.sampled_from(["ewadd", "ewmul"]))
def test_binary_rejects_exactly_what_numpy_rejects(a, b, op):
    g = Graph()
    try:
        expected = np.add(np.zeros(a), np.zeros(b)).shape
    except ValueError:
        with pytest.raises(ShapeError, match=f"{op}: shapes are not broadcastable"):
            g.add(op, [g.input(a), g.input(b)])
    else:
        assert g.add(op, [g.input(a), g.input(b)])[0].shape == expected


@given(
    shapes, st.sampled_from(["relu", "tanh", "sigmoid", "gelu", "dropout"]), st.sampled_from(["none", "tanh"])
)
def test_unary(shape, op, approx):
    g = Graph()
    x = g.input(shape)
    (y,) = g.add(op, [x], approximate=approx) if op == "gelu" else g.add(op, [x])
    check(g, (y,))
    assert y.shape == shape


@given(shapes, st.floats(-10, 10).filter(lambda v: abs(v) > 1e-3), st.sampled_from(["smul", "sdiv"]))
def test_scalar(shape, value, op):
    g = Graph()
    y = g.smul(g.input(shape), value) if op == "smul" else g.sdiv(g.input(shape), value)
    check(g, (y,))


@st.composite
def matmul_shapes(draw):
    m, k, n = draw(dims), draw(dims), draw(dims)
    batch = draw(st.lists(dims, max_size=2))
    a_batch = tuple(d if draw(st.booleans()) else 1 for d in batch)[draw(st.integers(0, len(batch))) :]
    b_batch = tuple(d if draw(st.booleans()) else 1 for d in batch)[draw(st.integers(0, len(batch))) :]
    return a_batch + (m, k), b_batch + (k, n)


@given(matmul_shapes(), st.sampled_from(["none", "relu", "sigmoid", "tanh"]))
def test_matmul(pair, act):
    a, b = pair
    g = Graph()
    y = g.matmul(g.input(a), g.input(b), activation=act)
    check(g, (y,))
    assert y.shape == np.matmul(np.zeros(a), np.zeros(b)).shape


@given(st.lists(dims, min_size=1, max_size=4).map(tuple), st.lists(dims, min_size=1, max_size=4).map(tuple))
def test_matmul_rejects_exactly_what_numpy_rejects(a, b):
    g = Graph()
    try:
        expected = np.matmul(np.zeros(a), np.zeros(b)).shape
        numpy_ok = len(a) >= 2 and len(b) >= 2  # numpy also accepts 1-D operands; TASO does not
    except ValueError:
        numpy_ok = False
    if numpy_ok:
        assert g.matmul(g.input(a), g.input(b)).shape == expected
    else:
        with pytest.raises(ShapeError, match="matmul: "):
            g.matmul(g.input(a), g.input(b))


@st.composite
def conv_case(draw):
    groups, cig, cog = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 2))
    n, h, w = draw(st.integers(1, 2)), draw(st.integers(1, 9)), draw(st.integers(1, 9))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    padding = draw(st.sampled_from(["same", "valid"]))
    act = draw(st.sampled_from(["none", "relu", "sigmoid", "tanh"]))
    return (n, groups * cig, h, w), (groups * cog, cig, kh, kw), stride, padding, act


def expected_window(size: int, k: int, s: int, padding: str) -> int:
    return math.ceil(size / s) if padding == "same" else (size - k) // s + 1


@given(conv_case())
def test_conv2d(case):
    xs, ws, stride, padding, act = case
    g = Graph()
    x, w = g.input(xs), g.weight(ws)
    ho, wo = (expected_window(xs[i + 2], ws[i + 2], stride[i], padding) for i in range(2))
    if ho < 1 or wo < 1:
        with pytest.raises(ShapeError, match="does not fit"):
            g.conv2d(x, w, stride=stride, padding=padding, activation=act)
        return
    y = g.conv2d(x, w, stride=stride, padding=padding, activation=act)
    check(g, (y,))
    assert y.shape == (xs[0], ws[0], ho, wo)


@given(conv_case(), st.sampled_from(["poolmax", "poolavg"]))
def test_pools(case, op):
    xs, ws, stride, padding, _ = case
    kernel = ws[2:]
    g = Graph()
    x = g.input(xs)
    ho, wo = (expected_window(xs[i + 2], kernel[i], stride[i], padding) for i in range(2))
    if ho < 1 or wo < 1:
        with pytest.raises(ShapeError, match="does not fit"):
            g.add(op, [x], kernel=kernel, stride=stride, padding=padding)
        return
    (y,) = g.add(op, [x], kernel=kernel, stride=stride, padding=padding)
    (out,) = check(g, (y,))  # finite: no window is all padding (no -inf max, no 0/0 mean)
    assert y.shape == (xs[0], xs[1], ho, wo)
    if op == "poolmax":
        node = g.nodes[y.node]
        xv = np.random.default_rng(0).standard_normal(xs).astype(np.float32)
        (out,) = node.spec.evaluate([xv], node.attrs)
        for n, c in np.ndindex(xs[0], xs[1]):
            assert set(out[n, c].ravel()) <= set(xv[n, c].ravel())


@given(conv_case(), st.data())
def test_merge_keeps_conv_results(case, data):
    xs, ws, stride, padding, _ = case
    groups = xs[1] // ws[1]
    count = data.draw(st.sampled_from([c for c in range(1, groups + 1) if groups % c == 0]))
    assume(all(expected_window(xs[i + 2], ws[i + 2], stride[i], padding) >= 1 for i in range(2)))
    g = Graph()
    x, w = g.input(xs, name="x"), g.weight(ws, name="w")
    merged = g.merge(w, count=count, groups=groups)
    check(g, (merged,))
    g.output(
        g.conv2d(x, w, stride=stride, padding=padding), g.conv2d(x, merged, stride=stride, padding=padding)
    )
    from tensor_eqsat.ir.interpreter import run

    a, b = run(g, seed=1)
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@given(
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(0, 2),
    st.integers(0, 2),
    st.integers(1, 8),
    st.integers(1, 8),
)
def test_enlarge_keeps_stride_one_same_conv(kh, kw, dh, dw, h, w):
    g = Graph()
    x, small = g.input((1, 2, h, w), name="x"), g.weight((3, 2, kh, kw), name="small")
    ref = g.weight((1, 1, kh + 2 * dh, kw + 2 * dw), name="ref")
    wide = g.enlarge(small, ref)
    check(g, (wide,))
    g.output(g.conv2d(x, small), g.conv2d(x, wide))
    from tensor_eqsat.ir.interpreter import run

    a, b = run(g, seed=2)
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@given(nonscalar, st.data())
def test_concat(shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    sizes = data.draw(st.lists(dims, min_size=1, max_size=4))
    parts = []
    for s in sizes:
        p = list(shape)
        p[axis] = s
        parts.append(tuple(p))
    g = Graph()
    y = g.concat([g.input(p) for p in parts], axis=axis)
    check(g, (y,))
    assert y.shape == np.concatenate([np.zeros(p) for p in parts], axis=axis).shape


@given(nonscalar, st.data())
def test_split(shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    total = shape[axis] + data.draw(st.integers(0, 5))
    full = list(shape)
    full[axis] = total
    cuts = sorted(data.draw(st.sets(st.integers(1, total - 1), max_size=3))) if total > 1 else []
    sizes = [b - a for a, b in zip([0, *cuts], [*cuts, total], strict=True)]
    g = Graph()
    outs = g.split(g.input(tuple(full)), axis=axis, sizes=sizes)
    check(g, outs)
    expected = np.split(np.zeros(full), np.cumsum(sizes)[:-1], axis=axis)
    assert [o.shape for o in outs] == [e.shape for e in expected]


@given(shapes, st.data())
def test_reshape(shape, data):
    vol = math.prod(shape)
    factors = []
    rest = vol
    for _ in range(data.draw(st.integers(0, 3))):
        f = data.draw(st.sampled_from([d for d in range(1, rest + 1) if rest % d == 0]))
        factors.append(f)
        rest //= f
    target = [*factors, rest]
    data.draw(st.randoms()).shuffle(target)
    numpy_target = list(target)
    if data.draw(st.booleans()):
        target[data.draw(st.integers(0, len(target) - 1))] = -1
    # 0 copies the input dim at the same position (ONNX), where it matches
    for i in range(min(len(shape), len(target))):
        if target[i] == shape[i] and data.draw(st.booleans()):
            target[i] = 0
    g = Graph()
    y = g.reshape(g.input(shape), target)
    check(g, (y,))
    assert y.shape == np.reshape(np.zeros(shape), numpy_target).shape


@given(shapes, st.data())
def test_transpose(shape, data):
    perm = data.draw(st.permutations(range(len(shape))))
    g = Graph()
    y = g.transpose(g.input(shape), perm)
    check(g, (y,))
    assert y.shape == np.transpose(np.zeros(shape), perm).shape


@given(nonscalar, st.data())
def test_softmax_and_layernorm(shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    g = Graph()
    x = g.input(shape)
    y = g.softmax(x, axis=axis)
    (out,) = check(g, (y,))
    np.testing.assert_allclose(out.sum(axis=axis), 1.0, rtol=1e-5)
    norm = shape[axis % len(shape) :]
    z = g.layernorm(x, g.weight(norm), g.weight(norm), axis=axis, eps=1e-3)
    check(g, (z,))


@given(st.lists(dims, min_size=2, max_size=4).map(tuple), st.data())
def test_groupnorm(shape, data):
    groups = data.draw(st.sampled_from([d for d in range(1, shape[1] + 1) if shape[1] % d == 0]))
    g = Graph()
    x = g.input(shape)
    (y,) = g.add("groupnorm", [x, g.weight((shape[1],)), g.weight((shape[1],))], groups=groups, eps=1e-3)
    check(g, (y,))
    assert y.shape == shape


@given(st.lists(dims, min_size=2, max_size=4).map(tuple))
def test_batchnorm(shape):
    g = Graph()
    params = [g.weight((shape[1],)) for _ in range(4)]
    y = g.batchnorm(g.input(shape), *params)
    check(g, (y,))


@given(st.lists(dims, min_size=1, max_size=4).map(tuple), st.data())
def test_bnfold_weight(shape, data):
    axis = data.draw(st.integers(0, len(shape) - 1))
    g = Graph()
    c = (shape[axis],)
    y = g.add("bnfold_weight", [g.input(shape), g.weight(c), g.weight(c)], axis=axis)
    check(g, y)
    assert y[0].shape == shape
    with pytest.raises(ShapeError, match="out of range"):
        g.add("bnfold_weight", [g.input(shape), g.weight(c), g.weight(c)], axis=len(shape))


@given(dims)
def test_bnfold_bias(c):
    g = Graph()
    y = g.add("bnfold_bias", [g.weight((c,)) for _ in range(4)])
    check(g, y)
    assert y[0].shape == (c,)
    with pytest.raises(ShapeError, match="must have shape"):
        g.add("bnfold_bias", [g.weight((c,)), g.weight((c,)), g.weight((c + 1,)), g.weight((c,))])


@given(st.lists(dims, min_size=0, max_size=2).map(tuple), dims, dims, dims, dims, st.booleans(), st.data())
def test_attention(batch, lq, d, s, dv, masked, data):
    g = Graph()
    q_batch = tuple(b if data.draw(st.booleans()) else 1 for b in batch)
    ins = [g.input(q_batch + (lq, d)), g.input(batch + (d, s)), g.input(batch + (s, dv))]
    if masked:
        scores = batch + (lq, s)
        ins.append(g.input(tuple(x if data.draw(st.booleans()) else 1 for x in scores)))
    (y,) = g.add("attention", ins, scale=0.5)
    check(g, (y,))
    assert y.shape == batch + (lq, dv)
    if masked:  # a mask may not enlarge the scores
        with pytest.raises(ShapeError, match="enlarges"):
            g.add("attention", ins[:3] + [g.input((2,) + batch + (lq, s))])


@given(st.lists(shapes, min_size=1, max_size=3))
def test_noop(parts):
    g = Graph()
    y = g.noop(*[g.input(p) for p in parts])
    check(g, (y,))
    assert y.shape == ()


@given(nonscalar, st.sampled_from(["silu", "hardsigmoid", "hardswish", "rsqrt"]))
def test_unary_activations(shape, op):
    g = Graph()
    (y,) = g.add(op, [g.input(shape)])
    (out,) = check(g, (y,))
    assert y.shape == shape and out.shape == shape


@given(nonscalar, st.floats(-3, 3), st.floats(0, 3))
def test_clip(shape, lo, width):
    g = Graph()
    (y,) = g.add("clip", [g.input(shape)], min=lo, max=lo + width)
    (out,) = check(g, (y,))
    assert np.all(out >= np.float32(lo)) and np.all(out <= np.float32(lo + width))
    with pytest.raises(ShapeError, match="min"):
        g.add("clip", [g.input(shape)], min=1.0, max=0.0)


@given(nonscalar, st.sampled_from([2.0, 3.0, -1.0, 0.5]))
def test_pow(shape, exponent):
    g = Graph()
    (y,) = g.add("pow", [g.input(shape)], exponent=exponent)
    check(g, (y,))
    assert y.shape == shape


@given(nonscalar, st.data())
def test_pad(shape, data):
    r = len(shape)
    pads = tuple(data.draw(st.lists(st.integers(0, 2), min_size=2 * r, max_size=2 * r)))
    g = Graph()
    (y,) = g.add("pad", [g.input(shape)], pads=pads, fill="zero")
    (out,) = check(g, (y,))
    assert out.shape == np.pad(np.zeros(shape), [(pads[i], pads[r + i]) for i in range(r)]).shape
    with pytest.raises(ShapeError):
        g.add("pad", [g.input(shape)], pads=pads[:-1])


@given(nonscalar, st.data())
def test_slice(shape, data):
    axis = data.draw(st.integers(0, len(shape) - 1))
    start = data.draw(st.integers(0, shape[axis] - 1))
    end = data.draw(st.integers(start + 1, shape[axis]))
    step = data.draw(st.integers(1, 3))
    g = Graph()
    (y,) = g.add("slice", [g.input(shape)], axis=axis, start=start, end=end, step=step)
    (out,) = check(g, (y,))
    index = [slice(None)] * len(shape)
    index[axis] = slice(start, end, step)
    assert out.shape == np.zeros(shape)[tuple(index)].shape
    with pytest.raises(ShapeError):
        g.add("slice", [g.input(shape)], axis=axis, start=0, end=shape[axis] + 1)


@given(nonscalar, st.data())
def test_expand(shape, data):
    target = tuple(d * data.draw(st.integers(1, 3)) if d == 1 else d for d in shape)
    g = Graph()
    (y,) = g.add("expand", [g.input(shape)], shape=target)
    (out,) = check(g, (y,))
    assert out.shape == np.broadcast_shapes(shape, target)
    if any(d > 1 for d in shape):
        with pytest.raises(ShapeError):
            g.add("expand", [g.input(shape)], shape=tuple(d + 1 for d in shape))


@given(nonscalar, st.data(), st.booleans())
def test_mean(shape, data, keep):
    axes = data.draw(st.sets(st.integers(0, len(shape) - 1), min_size=1))
    g = Graph()
    (y,) = g.add("mean", [g.input(shape)], axes=tuple(axes), keepdims=keep)
    (out,) = check(g, (y,))
    assert out.shape == np.zeros(shape).mean(axis=tuple(axes), keepdims=keep).shape


@given(
    nonscalar,
    st.sampled_from(["float32", "float16", "bfloat16"]),
    st.sampled_from(["float32", "float16", "bfloat16"]),
)
def test_cast(shape, src, dst):
    from tensor_eqsat.ir.dtypes import DTypeError, round_to
    from tensor_eqsat.ir.interpreter import run

    g = Graph()
    x = g.input(shape, dtype=src)
    y = g.cast(x, dst)
    (out,) = check(g, (y,))
    assert y.dtype == dst and out.shape == shape
    g.output(y)
    arr = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    (got,) = run(g, {g.name_of(x.node): arr})
    # The interpreter rounds the input to its dtype, then the cast rounds once to its target.
    want = round_to(round_to(arr, src).astype(np.float32), dst)
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))
    with pytest.raises(DTypeError):
        g.cast(g.input(shape, dtype="int64"), dst)


def test_every_op_has_a_property_test():
    covered = {
        "ewadd", "ewmul", "relu", "tanh", "sigmoid", "gelu", "dropout", "smul", "sdiv", "matmul",
        "conv2d", "poolmax", "poolavg", "merge", "enlarge", "concat", "split", "reshape", "transpose",
        "softmax", "layernorm", "batchnorm", "noop", "input", "weight", "bnfold_weight", "bnfold_bias",
        "attention",
        "opaque",  # tests/property/test_io_opaque.py (it needs onnx to build a payload)
        "silu", "hardsigmoid", "hardswish", "clip", "pow", "rsqrt", "pad", "slice", "expand", "mean",
        "cast", "groupnorm",
    }  # fmt: skip
    from tensor_eqsat.ir.ops import op_names

    assert set(op_names()) == covered
    assert get_op("input").is_leaf  # leaves are exercised by every test above
