"""Shape rules of every operator, through the Graph builder (which validates on every call).

Expected shapes are written out by hand from TASO's rules (../shared/reference/taso.md §1.2), not
computed with the functions under test.
"""

from __future__ import annotations

import pytest

from tensor_eqsat.errors import AttributeValueError, ShapeError
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.ops import same_padding, window_out


@pytest.fixture
def g() -> Graph:
    return Graph()


# -- SAME / VALID windows ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "kernel", "stride", "expected"),
    [
        # size % stride == 0: total = max(k - s, 0)
        (56, 3, 1, (1, 1)),
        (112, 3, 2, (0, 1)),
        (224, 7, 2, (2, 3)),
        (8, 1, 2, (0, 0)),
        (9, 3, 3, (0, 0)),
        (5, 4, 1, (1, 2)),
        # size % stride != 0: total = max(k - size % s, 0)
        (113, 3, 2, (1, 1)),
        (7, 3, 2, (1, 1)),
        (10, 7, 3, (3, 3)),
        (7, 1, 2, (0, 0)),
        (11, 2, 3, (0, 0)),
        (5, 5, 3, (1, 2)),
    ],
)
def test_same_padding_follows_taso(size, kernel, stride, expected):
    assert same_padding(size, kernel, stride) == expected


@pytest.mark.parametrize(
    ("size", "kernel", "stride", "padding", "expected"),
    [
        (224, 7, 2, "same", 112),
        (112, 3, 2, "same", 56),
        (7, 3, 2, "same", 4),
        (7, 3, 3, "same", 3),
        (5, 5, 1, "same", 5),
        (1, 3, 2, "same", 1),
        (224, 7, 2, "valid", 109),
        (7, 3, 2, "valid", 3),
        (8, 3, 3, "valid", 2),
        (5, 5, 1, "valid", 1),
        (9, 2, 4, "valid", 2),
    ],
)
def test_window_out(size, kernel, stride, padding, expected):
    assert window_out(size, kernel, stride, padding) == expected


@pytest.mark.parametrize(
    ("hw", "kernel", "stride", "padding", "out_hw"),
    [
        ((224, 224), (7, 7), (2, 2), "same", (112, 112)),
        ((7, 9), (3, 3), (2, 2), "same", (4, 5)),
        ((7, 9), (3, 3), (2, 3), "valid", (3, 3)),
        ((5, 6), (1, 3), (1, 1), "valid", (5, 4)),
        ((6, 5), (3, 1), (3, 2), "same", (2, 3)),
        ((4, 4), (4, 4), (1, 1), "valid", (1, 1)),
    ],
)
def test_conv2d_spatial_shapes(g, hw, kernel, stride, padding, out_hw):
    x = g.input((2, 3) + hw)
    w = g.weight((8, 3) + kernel)
    assert g.conv2d(x, w, stride=stride, padding=padding).shape == (2, 8) + out_hw


def test_conv2d_grouped_shape(g):
    x = g.input((1, 8, 5, 5))
    w = g.weight((16, 2, 3, 3))  # groups = 8 / 2 = 4
    assert g.conv2d(x, w).shape == (1, 16, 5, 5)


def test_conv2d_depthwise_shapes(g):
    x = g.input((1, 8, 6, 6))
    assert g.conv2d(x, g.weight((8, 1, 3, 3)), stride=(2, 2)).shape == (1, 8, 3, 3)
    # depth multiplier 2: still groups = 8
    assert g.conv2d(x, g.weight((16, 1, 3, 3)), padding="valid").shape == (1, 16, 4, 4)


def test_conv2d_input_channels_not_a_multiple_of_weight_channels(g):
    x = g.input((1, 6, 5, 5))
    w = g.weight((4, 4, 3, 3))
    with pytest.raises(ShapeError, match=r"conv2d: input channels 6 .* multiple of .* 4") as info:
        g.conv2d(x, w)
    assert info.value.shapes == ((1, 6, 5, 5), (4, 4, 3, 3))


def test_conv2d_output_channels_not_a_multiple_of_groups(g):
    x = g.input((1, 8, 5, 5))
    w = g.weight((6, 2, 3, 3))  # groups 4, 6 % 4 != 0
    with pytest.raises(ShapeError, match="output channels 6 are not a multiple of groups 4"):
        g.conv2d(x, w)


def test_conv2d_kernel_larger_than_input_with_valid(g):
    x = g.input((1, 3, 4, 4))
    w = g.weight((3, 3, 5, 5))
    with pytest.raises(ShapeError, match="does not fit") as info:
        g.conv2d(x, w, padding="valid")
    assert info.value.attr == "padding"
    # SAME always fits: the padding grows with the kernel
    assert g.conv2d(x, w, padding="same").shape == (1, 3, 4, 4)


@pytest.mark.parametrize(("xs", "ws"), [((1, 3, 5), (3, 3, 3, 3)), ((1, 3, 5, 5), (3, 3, 3))])
def test_conv2d_wrong_ranks(g, xs, ws):
    with pytest.raises(ShapeError, match=r"conv2d: .*4-D.*rank 3"):
        g.conv2d(g.input(xs), g.weight(ws))


# -- pools -------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["poolmax", "poolavg"])
def test_pool_shapes(g, op):
    x = g.input((1, 64, 112, 112))
    pool = getattr(g, op)
    assert pool(x, kernel=(3, 3), stride=(2, 2), padding="same").shape == (1, 64, 56, 56)
    assert pool(x, kernel=(3, 3), stride=(2, 2), padding="valid").shape == (1, 64, 55, 55)
    y = g.input((2, 5, 7, 7))
    assert pool(y, kernel=(7, 7)).shape == (2, 5, 1, 1)
    assert pool(y, kernel=(2, 3), stride=(3, 2), padding="same").shape == (2, 5, 3, 4)
    with pytest.raises(ShapeError, match=rf"{op}.padding: kernel \(8, 8\) does not fit the 7x7 input"):
        pool(y, kernel=(8, 8), padding="valid")
    with pytest.raises(ShapeError, match=f"{op}: input must be 4-D"):
        pool(g.input((5, 7, 7)), kernel=(2, 2))


# -- element-wise and broadcasting -------------------------------------------------------------


@pytest.mark.parametrize("op", ["ewadd", "ewmul"])
@pytest.mark.parametrize(
    ("a", "b", "out"),
    [
        ((2, 3), (2, 3), (2, 3)),
        ((2, 1, 4), (3, 1), (2, 3, 4)),
        ((4,), (2, 3, 4), (2, 3, 4)),
        ((), (2, 3), (2, 3)),
        ((1, 64, 1, 1), (1, 64, 7, 7), (1, 64, 7, 7)),
        ((5, 1), (1, 6), (5, 6)),
    ],
)
def test_elementwise_broadcasting(g, op, a, b, out):
    fn = getattr(g, op)
    assert fn(g.input(a), g.input(b)).shape == out
    assert fn(g.input(b), g.input(a)).shape == out


@pytest.mark.parametrize("op", ["ewadd", "ewmul"])
def test_elementwise_not_broadcastable(g, op):
    with pytest.raises(
        ShapeError, match=rf"{op}: shapes are not broadcastable \(input shapes: \(2, 3\), \(4, 3\)\)"
    ):
        getattr(g, op)(g.input((2, 3)), g.input((4, 3)))


@pytest.mark.parametrize("op", ["relu", "tanh", "sigmoid", "gelu", "dropout"])
def test_unary_keeps_shape(g, op):
    assert getattr(g, op)(g.input((2, 3, 5))).shape == (2, 3, 5)


def test_scalar_ops_keep_shape(g):
    x = g.input((4, 1, 3))
    assert g.smul(x, 0.5).shape == (4, 1, 3)
    assert g.sdiv(x, 8.0).shape == (4, 1, 3)


# -- matmul ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "out"),
    [
        ((3, 4), (4, 5), (3, 5)),
        ((2, 3, 4), (4, 5), (2, 3, 5)),
        ((3, 4), (7, 4, 5), (7, 3, 5)),
        ((2, 1, 3, 4), (5, 4, 6), (2, 5, 3, 6)),
        ((8, 12, 64, 32), (8, 12, 32, 64), (8, 12, 64, 64)),
    ],
)
def test_matmul_batch_broadcasting(g, a, b, out):
    assert g.matmul(g.input(a), g.input(b)).shape == out


def test_matmul_errors(g):
    with pytest.raises(ShapeError, match="contracted dims differ: 4 vs 3"):
        g.matmul(g.input((2, 4)), g.input((3, 5)))
    with pytest.raises(ShapeError, match="rank >= 2"):
        g.matmul(g.input((4,)), g.input((4, 5)))
    with pytest.raises(ShapeError, match="batch dims are not broadcastable"):
        g.matmul(g.input((2, 3, 4)), g.input((3, 4, 5)))


# -- data movement -----------------------------------------------------------------------------


def test_concat_of_n_inputs(g):
    xs = [g.input((2, c, 4)) for c in (1, 3, 5)]
    assert g.concat(xs, axis=1).shape == (2, 9, 4)
    assert g.concat(xs[:1], axis=1).shape == (2, 1, 4)
    four = [g.input((1, 8, 7, 7)) for _ in range(4)]
    assert g.concat(four, axis=0).shape == (4, 8, 7, 7)


def test_concat_errors(g):
    with pytest.raises(ShapeError, match="differ outside axis 1"):
        g.concat([g.input((2, 3, 4)), g.input((2, 3, 5))], axis=1)
    with pytest.raises(ShapeError, match="different ranks"):
        g.concat([g.input((2, 3)), g.input((2, 3, 1))], axis=1)
    with pytest.raises(ShapeError, match="axis 3 out of range for rank 3"):
        g.concat([g.input((2, 3, 4))], axis=3)


def test_split_sizes(g):
    x = g.input((2, 10, 3))
    parts = g.split(x, axis=1, sizes=(3, 7))
    assert [p.shape for p in parts] == [(2, 3, 3), (2, 7, 3)]
    assert [p.index for p in parts] == [0, 1]
    assert len({p.node for p in parts}) == 1
    three = g.split(x, axis=2, sizes=(1, 1, 1))
    assert [p.shape for p in three] == [(2, 10, 1)] * 3
    with pytest.raises(ShapeError, match=r"sizes \(3, 6\) sum to 9, not to dim 1 = 10") as info:
        g.split(x, axis=1, sizes=(3, 6))
    assert info.value.attr == "sizes"
    with pytest.raises(AttributeValueError, match=r"split\.sizes: must be one or more sizes >= 1"):
        g.split(x, axis=1, sizes=(0, 10))
    with pytest.raises(AttributeValueError, match=r"split\.sizes: must be one or more sizes >= 1"):
        g.split(x, axis=1, sizes=())


@pytest.mark.parametrize(
    ("target", "out"),
    [
        ((6, 4), (6, 4)),
        ((-1, 4), (6, 4)),
        ((4, -1), (4, 6)),
        ((-1,), (24,)),
        ((0, -1), (2, 12)),
        ((0, 0, -1), (2, 3, 4)),
        ((0, 3, 2, 2), (2, 3, 2, 2)),
        ((1, -1, 1), (1, 24, 1)),
    ],
)
def test_reshape_resolves_minus_one_and_zero(g, target, out):
    y = g.reshape(g.input((2, 3, 4)), target)
    assert y.shape == out
    # the stored attribute is fully resolved (canonical)
    assert g.nodes[y.node].attr_dict()["shape"] == out


def test_reshape_errors(g):
    x = g.input((2, 3, 4))
    with pytest.raises(ShapeError, match=r"cannot reshape 24 elements into \(5, 5\)"):
        g.reshape(x, (5, 5))
    with pytest.raises(ShapeError, match=r"cannot reshape 24 elements into \(5, -1\)"):
        g.reshape(x, (5, -1))
    with pytest.raises(ShapeError, match="more than one -1"):
        g.reshape(x, (-1, -1))
    with pytest.raises(AttributeValueError, match=r"reshape\.shape: every dim must be >= 1"):
        g.reshape(x, (24, -2))


@pytest.mark.parametrize(
    ("perm", "out"),
    [((0, 1, 2), (2, 3, 4)), ((2, 0, 1), (4, 2, 3)), ((1, 0, 2), (3, 2, 4)), ((2, 1, 0), (4, 3, 2))],
)
def test_transpose_perms(g, perm, out):
    assert g.transpose(g.input((2, 3, 4)), perm).shape == out


@pytest.mark.parametrize("perm", [(0, 0, 1), (0, 1), (0, 1, 2, 3), (1, 2, 3)])
def test_transpose_bad_perm(g, perm):
    with pytest.raises(ShapeError, match="is not a permutation of the 3 dims") as info:
        g.transpose(g.input((2, 3, 4)), perm)
    assert info.value.attr == "perm"


def test_noop_joins_outputs_into_a_scalar(g):
    a, b = g.input((2, 3)), g.input((4,))
    assert g.noop(a, b).shape == ()
    assert g.noop(a).shape == ()


# -- negative axes are canonicalized by the builder ---------------------------------------------


@pytest.mark.parametrize(
    ("build", "stored"),
    [
        (lambda g, x: g.softmax(x, axis=-1), 2),
        (lambda g, x: g.softmax(x, axis=-3), 0),
        (lambda g, x: g.concat([x, x], axis=-2), 1),
        (lambda g, x: g.split(x, axis=-1, sizes=(1, 3))[0], 2),
        (lambda g, x: g.layernorm(x, g.weight((4,)), g.weight((4,)), axis=-1), 2),
        (lambda g, x: g.layernorm(x, g.weight((3, 4)), g.weight((3, 4)), axis=-2), 1),
    ],
)
def test_negative_axes_are_canonicalized(g, build, stored):
    y = build(g, g.input((2, 3, 4)))
    assert g.nodes[y.node].attr_dict()["axis"] == stored


def test_layernorm_without_axis_uses_the_last_dim(g):
    x = g.input((2, 3, 4))
    (y,) = g.add("layernorm", [x, g.weight((4,)), g.weight((4,))])
    assert g.nodes[y.node].attr_dict()["axis"] == 2


def test_axis_out_of_range(g):
    x = g.input((2, 3))
    with pytest.raises(ShapeError, match=r"softmax\.axis: axis 2 out of range for rank 2"):
        g.softmax(x, axis=2)
    with pytest.raises(ShapeError, match="axis -3 out of range for rank 2"):
        g.softmax(x, axis=-3)


# -- normalizations ----------------------------------------------------------------------------


def test_batchnorm_shapes(g):
    x = g.input((2, 6, 4, 4))
    params = [g.weight((6,)) for _ in range(4)]
    assert g.batchnorm(x, *params).shape == (2, 6, 4, 4)
    assert g.batchnorm(g.input((3, 6)), *params).shape == (3, 6)
    bad = [g.weight((6,)), g.weight((6,)), g.weight((5,)), g.weight((6,))]
    with pytest.raises(ShapeError, match=r"mean must have shape \(6,\) for 6 channels"):
        g.batchnorm(x, *bad)
    with pytest.raises(ShapeError, match="rank >= 2"):
        g.batchnorm(g.input((6,)), *params)


def test_layernorm_param_shapes(g):
    x = g.input((2, 3, 4))
    with pytest.raises(ShapeError, match=r"scale must have shape \(4,\)"):
        g.layernorm(x, g.weight((3,)), g.weight((4,)))
    with pytest.raises(ShapeError, match=r"bias must have shape \(3, 4\)"):
        g.layernorm(x, g.weight((3, 4)), g.weight((4,)), axis=1)


# -- weight transforms -------------------------------------------------------------------------


def test_enlarge_shapes(g):
    ref = g.weight((8, 8, 3, 3))
    assert g.enlarge(g.weight((8, 4, 1, 1)), ref).shape == (8, 4, 3, 3)
    assert g.enlarge(g.weight((2, 4, 1, 3)), ref).shape == (2, 4, 3, 3)
    assert g.enlarge(g.weight((2, 4, 3, 3)), ref).shape == (2, 4, 3, 3)
    with pytest.raises(
        ShapeError, match=r"enlarge: kernel \(5, 5\) is larger than the reference kernel \(3, 3\)"
    ):
        g.enlarge(g.weight((8, 8, 5, 5)), ref)
    with pytest.raises(ShapeError, match="both weights must be 4-D"):
        g.enlarge(g.weight((8, 8, 1)), ref)


def test_merge_shapes(g):
    w = g.weight((16, 2, 3, 3))
    assert g.merge(w, count=2, groups=4).shape == (16, 4, 3, 3)
    assert g.merge(w, count=4, groups=4).shape == (16, 8, 3, 3)
    assert g.merge(w, count=1, groups=8).shape == (16, 2, 3, 3)
    with pytest.raises(ShapeError, match="groups 4 is not a multiple of count 3") as info:
        g.merge(w, count=3, groups=4)
    assert info.value.attr == "count"
    with pytest.raises(ShapeError, match="output channels 16 are not a multiple of groups 5"):
        g.merge(w, count=5, groups=5)
    with pytest.raises(ShapeError, match="merge: weight must be 4-D"):
        g.merge(g.weight((16, 2)), count=2, groups=2)
