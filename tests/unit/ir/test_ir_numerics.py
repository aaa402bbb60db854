"""Numerics of every operator against independent computations.

The references below are explicit Python loops on tiny tensors (float64 accumulation), written
from the definitions in ../shared/reference/taso.md and the ONNX operator docs, not from
``ir/ops.py``: SAME padding is recomputed here from TASO's rule, windows are walked index by
index, and the grouped-conv channel bookkeeping is spelled out. Ops are run through the Graph
builder and the reference interpreter, so attribute canonicalization is covered too.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.interpreter import run

RNG = np.random.default_rng(1234)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def close(actual: np.ndarray, expected: np.ndarray, tol: float = 1e-5) -> None:
    assert actual.dtype == np.float32
    assert actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol)


def run1(g: Graph, inputs: dict[str, np.ndarray], weights: dict[str, np.ndarray] | None = None):
    (out,) = run(g, inputs, weights)
    return out


# -- independent references --------------------------------------------------------------------


def taso_same_before(size: int, kernel: int, stride: int) -> int:
    """Padding before, TASO's SAME rule (taso.md §1.2): total = max(k - s, 0) if H % s == 0 else
    max(k - H % s, 0); before = total // 2."""
    total = max(kernel - stride, 0) if size % stride == 0 else max(kernel - size % stride, 0)
    return total // 2


def out_size(size: int, kernel: int, stride: int, padding: str) -> int:
    if padding == "same":
        return (size + stride - 1) // stride
    return (size - kernel) // stride + 1


def ref_conv(x: np.ndarray, w: np.ndarray, stride: tuple[int, int], padding: str) -> np.ndarray:
    n_, c_in, h, wd = x.shape
    c_out, c_per_group, kh, kw = w.shape
    groups = c_in // c_per_group
    out_per_group = c_out // groups
    sh, sw = stride
    ho, wo = out_size(h, kh, sh, padding), out_size(wd, kw, sw, padding)
    ph = taso_same_before(h, kh, sh) if padding == "same" else 0
    pw = taso_same_before(wd, kw, sw) if padding == "same" else 0
    out = np.zeros((n_, c_out, ho, wo))
    for n, o, i, j in itertools.product(range(n_), range(c_out), range(ho), range(wo)):
        group = o // out_per_group
        acc = 0.0
        for c, a, b in itertools.product(range(c_per_group), range(kh), range(kw)):
            r, q = i * sh + a - ph, j * sw + b - pw
            if 0 <= r < h and 0 <= q < wd:
                acc += float(x[n, group * c_per_group + c, r, q]) * float(w[o, c, a, b])
        out[n, o, i, j] = acc
    return out


def ref_pool(
    x: np.ndarray, kernel: tuple[int, int], stride: tuple[int, int], padding: str, kind: str
) -> np.ndarray:
    """Max or average over the in-bounds elements of each window (padding never counts)."""
    n_, c_, h, wd = x.shape
    (kh, kw), (sh, sw) = kernel, stride
    ho, wo = out_size(h, kh, sh, padding), out_size(wd, kw, sw, padding)
    ph = taso_same_before(h, kh, sh) if padding == "same" else 0
    pw = taso_same_before(wd, kw, sw) if padding == "same" else 0
    out = np.zeros((n_, c_, ho, wo))
    for n, c, i, j in itertools.product(range(n_), range(c_), range(ho), range(wo)):
        vals = [
            float(x[n, c, i * sh + a - ph, j * sw + b - pw])
            for a in range(kh)
            for b in range(kw)
            if 0 <= i * sh + a - ph < h and 0 <= j * sw + b - pw < wd
        ]
        assert vals, "a window with no real element"
        out[n, c, i, j] = max(vals) if kind == "max" else sum(vals) / len(vals)
    return out


def ref_broadcast_binary(a: np.ndarray, b: np.ndarray, fn) -> np.ndarray:
    rank = max(a.ndim, b.ndim)
    sa = (1,) * (rank - a.ndim) + a.shape
    sb = (1,) * (rank - b.ndim) + b.shape
    shape = tuple(max(p, q) for p, q in zip(sa, sb, strict=True))
    a2, b2 = a.reshape(sa), b.reshape(sb)
    out = np.zeros(shape)
    for idx in itertools.product(*(range(d) for d in shape)):
        ia = tuple(i if d > 1 else 0 for i, d in zip(idx, sa, strict=True))
        ib = tuple(i if d > 1 else 0 for i, d in zip(idx, sb, strict=True))
        out[idx] = fn(float(a2[ia]), float(b2[ib]))
    return out


def ref_matmul_2d(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    m, k = a.shape
    k2, n = b.shape
    assert k == k2
    out = np.zeros((m, n))
    for i, j in itertools.product(range(m), range(n)):
        out[i, j] = sum(float(a[i, t]) * float(b[t, j]) for t in range(k))
    return out


def ref_sigmoid(v: float) -> float:
    return 1.0 / (1.0 + math.exp(-v)) if v >= 0 else math.exp(v) / (1.0 + math.exp(v))


ACTS = {
    "none": lambda v: v,
    "relu": lambda v: max(v, 0.0),
    "sigmoid": ref_sigmoid,
    "tanh": math.tanh,
}


def apply(fn, arr: np.ndarray) -> np.ndarray:
    return np.vectorize(fn, otypes=[np.float64])(arr.astype(np.float64))


# -- conv2d ------------------------------------------------------------------------------------

CONV_CASES = [
    # (x shape, w shape, stride, padding)
    ((1, 3, 5, 5), (4, 3, 3, 3), (1, 1), "same"),
    ((2, 3, 7, 6), (2, 3, 3, 3), (2, 2), "same"),
    ((1, 2, 6, 6), (3, 2, 3, 3), (2, 2), "same"),  # H % s == 0: total 1, all of it after
    ((1, 2, 7, 8), (2, 2, 4, 2), (3, 2), "same"),  # even kernel, odd/even sizes
    ((1, 2, 5, 7), (3, 2, 5, 3), (1, 2), "same"),
    ((1, 3, 7, 6), (2, 3, 3, 2), (2, 3), "valid"),
    ((1, 4, 6, 6), (6, 2, 3, 3), (1, 1), "same"),  # 2 groups
    ((1, 6, 7, 7), (6, 2, 3, 3), (2, 2), "valid"),  # 3 groups
    ((1, 4, 6, 5), (4, 1, 3, 3), (2, 2), "same"),  # depthwise
    ((1, 3, 5, 5), (6, 1, 3, 3), (1, 1), "same"),  # depthwise, multiplier 2
    ((1, 3, 4, 4), (2, 3, 1, 1), (2, 2), "same"),  # 1x1 strided
]


@pytest.mark.parametrize(("xs", "ws", "stride", "padding"), CONV_CASES)
def test_conv2d_matches_loops(xs, ws, stride, padding):
    g = Graph()
    x, w = g.input(xs, name="x"), g.weight(ws, name="w")
    g.output(g.conv2d(x, w, stride=stride, padding=padding))
    xv, wv = rand(*xs), rand(*ws)
    close(run1(g, {"x": xv}, {"w": wv}), ref_conv(xv, wv, stride, padding))


@pytest.mark.parametrize("act", ["relu", "sigmoid", "tanh"])
def test_conv2d_fused_activation(act):
    g = Graph()
    x, w = g.input((1, 4, 5, 5), name="x"), g.weight((4, 2, 3, 3), name="w")
    g.output(g.conv2d(x, w, stride=(2, 1), activation=act))
    xv, wv = rand(1, 4, 5, 5), rand(4, 2, 3, 3)
    close(run1(g, {"x": xv}, {"w": wv}), apply(ACTS[act], ref_conv(xv, wv, (2, 1), "same")))


# -- merge: conv(x, w) == conv(x, merge(w, count, groups)) --------------------------------------

MERGE_CASES = [
    # (groups, count, c_in per group, c_out per group, stride, padding)
    (2, 2, 1, 1, (1, 1), "same"),
    (2, 2, 2, 3, (2, 2), "same"),
    (4, 2, 2, 1, (1, 1), "same"),
    (4, 4, 1, 2, (1, 1), "valid"),
    (6, 3, 1, 1, (2, 2), "same"),
    (6, 2, 2, 1, (1, 2), "same"),
    (8, 4, 1, 1, (1, 1), "same"),
    (4, 1, 2, 2, (1, 1), "same"),
]


@pytest.mark.parametrize(("groups", "count", "cig", "cog", "stride", "padding"), MERGE_CASES)
def test_merge_preserves_the_grouped_conv(groups, count, cig, cog, stride, padding):
    cin, cout = groups * cig, groups * cog
    g = Graph()
    x, w = g.input((1, cin, 5, 6), name="x"), g.weight((cout, cig, 3, 3), name="w")
    merged = g.merge(w, count=count, groups=groups)
    assert merged.shape == (cout, cig * count, 3, 3)
    direct = g.conv2d(x, w, stride=stride, padding=padding)
    via_merge = g.conv2d(x, merged, stride=stride, padding=padding)
    g.output(direct, via_merge, merged)
    xv, wv = rand(1, cin, 5, 6), rand(cout, cig, 3, 3)
    a, b, mv = run(g, {"x": xv}, {"w": wv})
    close(b, a)
    close(a, ref_conv(xv, wv, stride, padding))
    # the merged conv really runs with groups / count groups
    assert cin // mv.shape[1] == groups // count
    # every output channel keeps its weights in the slot of its original group, zeros elsewhere
    for o in range(cout):
        slot = (o // cog) % count
        for s in range(count):
            block = mv[o, s * cig : (s + 1) * cig]
            np.testing.assert_array_equal(block, wv[o] if s == slot else np.zeros_like(wv[o]))


# -- enlarge -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("small", "big"), [((1, 1), (3, 3)), ((3, 3), (5, 5)), ((1, 3), (3, 3)), ((1, 1), (5, 3))]
)
def test_enlarge_is_centred_zero_padding_and_keeps_same_conv(small, big):
    g = Graph()
    x = g.input((1, 3, 6, 7), name="x")
    w = g.weight((4, 3) + small, name="w")
    ref = g.weight((2, 3) + big, name="ref")
    wide = g.enlarge(w, ref)
    g.output(g.conv2d(x, w), g.conv2d(x, wide), wide)
    xv, wv = rand(1, 3, 6, 7), rand(4, 3, *small)
    direct, enlarged, wide_v = run(g, {"x": xv}, {"w": wv})
    close(enlarged, direct)
    oh, ow = (big[0] - small[0]) // 2, (big[1] - small[1]) // 2
    expected = np.zeros((4, 3) + big, dtype=np.float32)
    for a, b in itertools.product(range(small[0]), range(small[1])):
        expected[:, :, oh + a, ow + b] = wv[:, :, a, b]
    np.testing.assert_array_equal(wide_v, expected)


# -- pools -------------------------------------------------------------------------------------

POOL_CASES = [
    ((1, 2, 5, 5), (3, 3), (1, 1), "same"),
    ((1, 2, 6, 6), (3, 3), (2, 2), "same"),
    ((2, 1, 7, 6), (3, 2), (2, 3), "same"),
    ((1, 2, 4, 5), (4, 4), (1, 1), "same"),  # corner windows are mostly padding
    ((1, 2, 7, 7), (3, 3), (2, 2), "valid"),
    ((1, 1, 6, 5), (2, 2), (2, 2), "valid"),
]


@pytest.mark.parametrize(("xs", "kernel", "stride", "padding"), POOL_CASES)
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pools_match_loops(kind, xs, kernel, stride, padding):
    g = Graph()
    x = g.input(xs, name="x")
    g.output(getattr(g, f"pool{kind}")(x, kernel=kernel, stride=stride, padding=padding))
    xv = rand(*xs)
    close(run1(g, {"x": xv}), ref_pool(xv, kernel, stride, padding, kind))


def test_poolavg_excludes_padding():
    g = Graph()
    x = g.input((1, 1, 2, 2), name="x")
    g.output(g.poolavg(x, kernel=(3, 3), padding="same"))
    out = run1(g, {"x": np.ones((1, 1, 2, 2), dtype=np.float32)})
    # zero padding counted in the mean would give values below 1
    np.testing.assert_array_equal(out, np.ones((1, 1, 2, 2), dtype=np.float32))


def test_poolmax_ignores_padding_for_negative_inputs():
    g = Graph()
    x = g.input((1, 1, 3, 3), name="x")
    g.output(g.poolmax(x, kernel=(3, 3), padding="same"))
    xv = -np.arange(1, 10, dtype=np.float32).reshape(1, 1, 3, 3)
    out = run1(g, {"x": xv})
    assert out.max() < 0  # a zero-padded max would be 0 at the borders
    assert out[0, 0, 0, 0] == -1 and out[0, 0, 2, 2] == -5


@pytest.mark.parametrize("act", ["relu", "tanh"])
def test_pool_fused_activation(act):
    g = Graph()
    x = g.input((1, 2, 5, 5), name="x")
    g.output(g.poolavg(x, kernel=(2, 2), stride=(2, 2), padding="same", activation=act))
    xv = rand(1, 2, 5, 5)
    close(run1(g, {"x": xv}), apply(ACTS[act], ref_pool(xv, (2, 2), (2, 2), "same", "avg")))


# -- element-wise --------------------------------------------------------------------------------


@pytest.mark.parametrize(("op", "fn"), [("ewadd", lambda p, q: p + q), ("ewmul", lambda p, q: p * q)])
@pytest.mark.parametrize(
    ("sa", "sb"), [((2, 3), (2, 3)), ((2, 1, 4), (3, 1)), ((4,), (2, 3, 4)), ((), (2, 2))]
)
def test_binary_broadcasting_matches_loops(op, fn, sa, sb):
    g = Graph()
    a, b = g.input(sa, name="a"), g.input(sb, name="b")
    g.output(getattr(g, op)(a, b))
    av, bv = rand(*sa), rand(*sb)
    close(run1(g, {"a": av, "b": bv}), ref_broadcast_binary(av, bv, fn))


@pytest.mark.parametrize(
    ("op", "fn"),
    [
        ("relu", ACTS["relu"]),
        ("tanh", math.tanh),
        ("sigmoid", ref_sigmoid),
        ("gelu", lambda v: 0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0)))),
        ("dropout", lambda v: v),
    ],
)
def test_unary_matches_scalar_math(op, fn):
    g = Graph()
    x = g.input((3, 5), name="x")
    g.output(getattr(g, op)(x))
    xv = rand(3, 5) * 3
    close(run1(g, {"x": xv}), apply(fn, xv))


def test_gelu_tanh_matches_its_formula_and_is_close_to_exact():
    g = Graph()
    x = g.input((1001,), name="x")
    g.output(g.gelu(x, approximate="tanh"), g.gelu(x))
    xv = np.linspace(-6, 6, 1001, dtype=np.float32)
    approx, exact = run(g, {"x": xv})
    c = math.sqrt(2.0 / math.pi)
    close(approx, apply(lambda v: 0.5 * v * (1 + math.tanh(c * (v + 0.044715 * v**3))), xv))
    # the tanh approximation is within 5e-4 of the exact GELU everywhere (max ~4.7e-4 near |x|=2.2)
    gap = np.abs(approx - exact)
    assert gap.max() < 5e-4
    assert gap.max() > 1e-4  # and it is a different function, not the same code path


def test_sigmoid_is_stable_at_large_magnitudes():
    g = Graph()
    x = g.input((6,), name="x")
    g.output(g.sigmoid(x))
    xv = np.array([-100, -30, 0, 30, 100, -1e30], dtype=np.float32)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        out = run1(g, {"x": xv})
    assert np.all(np.isfinite(out))
    assert out[4] == 1.0 and out[2] == 0.5
    assert 0 <= out[0] < 1e-40 and out[5] == 0.0
    close(out[:5], apply(ref_sigmoid, xv[:5]))


def test_smul_and_sdiv():
    g = Graph()
    x = g.input((2, 3), name="x")
    g.output(g.smul(x, -2.5), g.sdiv(x, 4.0))
    xv = rand(2, 3)
    m, d = run(g, {"x": xv})
    close(m, apply(lambda v: v * -2.5, xv))
    close(d, apply(lambda v: v / 4.0, xv))


# -- matmul --------------------------------------------------------------------------------------


@pytest.mark.parametrize("act", ["none", "relu", "sigmoid", "tanh"])
def test_matmul_with_activation(act):
    g = Graph()
    a, b = g.input((3, 4), name="a"), g.weight((4, 5), name="b")
    g.output(g.matmul(a, b, activation=act))
    av, bv = rand(3, 4), rand(4, 5)
    close(run1(g, {"a": av}, {"b": bv}), apply(ACTS[act], ref_matmul_2d(av, bv)))


def test_matmul_batched_broadcasting():
    g = Graph()
    a, b = g.input((2, 1, 3, 4), name="a"), g.input((3, 4, 2), name="b")
    g.output(g.matmul(a, b))
    av, bv = rand(2, 1, 3, 4), rand(3, 4, 2)
    out = run1(g, {"a": av, "b": bv})
    assert out.shape == (2, 3, 3, 2)
    for i, j in itertools.product(range(2), range(3)):
        close(out[i, j], ref_matmul_2d(av[i, 0], bv[j]))


# -- normalizations ------------------------------------------------------------------------------


def test_batchnorm_matches_loops():
    g = Graph()
    x = g.input((2, 3, 2, 2), name="x")
    names = ("scale", "bias", "mean", "var")
    params = [g.weight((3,), name=n) for n in names]
    g.output(g.batchnorm(x, *params, eps=1e-3))
    xv = rand(2, 3, 2, 2)
    pv = {"scale": rand(3), "bias": rand(3), "mean": rand(3), "var": np.array([0.5, 1.0, 2.0], np.float32)}
    out = run1(g, {"x": xv}, pv)
    expected = np.zeros(xv.shape)
    for n, c, i, j in itertools.product(range(2), range(3), range(2), range(2)):
        norm = (xv[n, c, i, j] - pv["mean"][c]) / math.sqrt(pv["var"][c] + 1e-3)
        expected[n, c, i, j] = norm * pv["scale"][c] + pv["bias"][c]
    close(out, expected)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_matches_loops(axis):
    g = Graph()
    x = g.input((3, 4), name="x")
    g.output(g.softmax(x, axis=axis))
    xv = rand(3, 4) * 4
    xv[0, 0] = 100.0  # exp(100) overflows float32; a max-subtracted softmax does not
    out = run1(g, {"x": xv})
    expected = np.zeros((3, 4))
    ax = axis % 2
    for i in range(xv.shape[1 - ax]):
        row = [float(xv[i, j] if ax == 1 else xv[j, i]) for j in range(xv.shape[ax])]
        m = max(row)
        total = sum(math.exp(v - m) for v in row)
        for j, v in enumerate(row):
            expected[(i, j) if ax == 1 else (j, i)] = math.exp(v - m) / total
    close(out, expected)


@pytest.mark.parametrize("axis", [-1, 1])
def test_layernorm_matches_loops(axis):
    g = Graph()
    x = g.input((2, 3, 4), name="x")
    norm_shape = (4,) if axis == -1 else (3, 4)
    s, b = g.weight(norm_shape, name="s"), g.weight(norm_shape, name="b")
    g.output(g.layernorm(x, s, b, axis=axis, eps=1e-4))
    xv, sv, bv = rand(2, 3, 4), rand(*norm_shape), rand(*norm_shape)
    out = run1(g, {"x": xv}, {"s": sv, "b": bv})
    expected = np.zeros(xv.shape)
    groups = [(n,) for n in range(2)] if axis == 1 else [(n, c) for n in range(2) for c in range(3)]
    for lead in groups:
        block = xv[lead]
        vals = [float(v) for v in block.ravel()]
        mean = sum(vals) / len(vals)
        var = sum((v - mean) ** 2 for v in vals) / len(vals)
        for idx in itertools.product(*(range(d) for d in block.shape)):
            expected[lead + idx] = (block[idx] - mean) / math.sqrt(var + 1e-4) * sv[idx] + bv[idx]
    close(out, expected)


# -- data movement -------------------------------------------------------------------------------


def test_concat_of_three_matches_loops():
    g = Graph()
    xs = [g.input((2, c, 3), name=f"x{c}") for c in (1, 2, 3)]
    g.output(g.concat(xs, axis=1))
    vals = {f"x{c}": rand(2, c, 3) for c in (1, 2, 3)}
    out = run1(g, vals)
    expected = np.zeros((2, 6, 3))
    offset = 0
    for c in (1, 2, 3):
        for n, k, j in itertools.product(range(2), range(c), range(3)):
            expected[n, offset + k, j] = vals[f"x{c}"][n, k, j]
        offset += c
    close(out, expected)


def test_split_matches_loops():
    g = Graph()
    x = g.input((2, 7), name="x")
    g.output(*g.split(x, axis=1, sizes=(2, 4, 1)))
    xv = rand(2, 7)
    parts = run(g, {"x": xv})
    start = 0
    for part, size in zip(parts, (2, 4, 1), strict=True):
        expected = np.array([[xv[i, start + j] for j in range(size)] for i in range(2)])
        close(part, expected)
        start += size


def test_reshape_keeps_row_major_order():
    g = Graph()
    x = g.input((2, 3, 4), name="x")
    g.output(g.reshape(x, (4, -1)))
    xv = rand(2, 3, 4)
    out = run1(g, {"x": xv})
    flat = [xv[i, j, k] for i in range(2) for j in range(3) for k in range(4)]
    close(out, np.array(flat).reshape(4, 6))


def test_transpose_matches_loops():
    g = Graph()
    x = g.input((2, 3, 4), name="x")
    g.output(g.transpose(x, (2, 0, 1)))
    xv = rand(2, 3, 4)
    out = run1(g, {"x": xv})
    expected = np.zeros((4, 2, 3))
    for i, j, k in itertools.product(range(2), range(3), range(4)):
        expected[k, i, j] = xv[i, j, k]
    close(out, expected)


def test_noop_is_a_zero_scalar():
    g = Graph()
    a, b = g.input((2,), name="a"), g.input((3,), name="b")
    g.output(g.noop(a, b))
    out = run1(g, {"a": rand(2), "b": rand(3)})
    assert out.shape == () and out == 0.0


@pytest.mark.parametrize("shape", [(300, 700), (256, 512), (5, 3)])
def test_a_large_matrix_transposed_in_tiles_is_the_transpose(shape):
    from tensor_eqsat.ir.ops_layout import transpose_copy

    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    got = transpose_copy(x, (1, 0))
    np.testing.assert_array_equal(got, x.T)
    assert got.flags.c_contiguous and got.dtype == x.dtype
