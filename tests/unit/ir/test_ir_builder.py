"""Graph builder: attribute validation, graph-integrity errors, queries, summary and DOT."""

from __future__ import annotations

import numpy as np
import pytest

from tensor_eqsat.errors import AttributeValueError, GraphError, ShapeError, TensorEqsatError
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.summary import summary, to_dot
from tensor_eqsat.ir.types import Activation, Padding


@pytest.fixture
def g() -> Graph:
    return Graph()


def conv_inputs(g: Graph):
    return g.input((1, 4, 6, 6), name="x"), g.weight((4, 4, 3, 3), name="w")


# -- attribute values and types ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "attr", "message"),
    [
        ({"stride": (0, 1)}, "stride", "must be two ints >= 1"),
        ({"stride": (1, 1, 1)}, "stride", "must be two ints >= 1"),
        ({"stride": (1.5, 1)}, "stride", "expected a sequence of ints"),
        ({"stride": (True, 1)}, "stride", "expected a sequence of ints"),
        ({"padding": "full"}, "padding", "expected one of 'same', 'valid'"),
        ({"padding": 3}, "padding", "expected one of"),
        ({"activation": "gelu"}, "activation", "expected one of 'none', 'relu', 'sigmoid', 'tanh'"),
    ],
)
def test_conv2d_invalid_attributes(g, kwargs, attr, message):
    x, w = conv_inputs(g)
    with pytest.raises(AttributeValueError, match=message) as info:
        g.conv2d(x, w, **kwargs)
    assert info.value.op == "conv2d" and info.value.attr == attr
    assert str(info.value).startswith(f"conv2d.{attr}: ")


def test_conv2d_stride_as_a_string_is_rejected(g):
    x, w = conv_inputs(g)
    with pytest.raises(AttributeValueError, match=r"conv2d.stride: expected a sequence of ints, got '11'"):
        g.add("conv2d", [x, w], stride="11")


def test_enum_members_are_accepted(g):
    x, w = conv_inputs(g)
    y = g.conv2d(x, w, padding=Padding.VALID, activation=Activation.RELU)
    assert g.nodes[y.node].attr_dict() == {"stride": (1, 1), "padding": "valid", "activation": "relu"}


def test_numpy_ints_are_canonicalized(g):
    x, w = conv_inputs(g)
    y = g.conv2d(x, w, stride=np.array([2, 2]))
    stride = g.nodes[y.node].attr_dict()["stride"]
    assert stride == (2, 2) and all(type(s) is int for s in stride)


@pytest.mark.parametrize(
    ("op", "build", "message"),
    [
        ("dropout", lambda g, x: g.dropout(x, rate=1.0), r"dropout.rate: must be in \[0, 1\)"),
        ("dropout", lambda g, x: g.dropout(x, rate="0.1"), "dropout.rate: expected a number"),
        ("sdiv", lambda g, x: g.sdiv(x, 0.0), "sdiv.divisor: must be non-zero"),
        ("smul", lambda g, x: g.smul(x, float("inf")), "smul.scalar: expected a number"),
        ("smul", lambda g, x: g.smul(x, "2"), "smul.scalar: expected a number"),
        ("gelu", lambda g, x: g.gelu(x, approximate="erf"), "gelu.approximate: expected one of"),
        ("softmax", lambda g, x: g.softmax(x, axis=1.0), "softmax.axis: expected an int"),
        ("softmax", lambda g, x: g.softmax(x, axis=True), "softmax.axis: expected an int"),
        ("poolmax", lambda g, x: g.poolmax(x, kernel=(0, 3)), "poolmax.kernel: must be two ints >= 1"),
        ("poolavg", lambda g, x: g.poolavg(x, kernel=3), "poolavg.kernel: expected a sequence of ints"),
        (
            "merge",
            lambda g, x: g.merge(g.weight((4, 1, 3, 3)), count=0, groups=4),
            "merge.count: must be >= 1",
        ),
        (
            "batchnorm",
            lambda g, x: g.batchnorm(x, *[g.weight((4,)) for _ in range(4)], eps=-1.0),
            "batchnorm.eps: must be >= 0",
        ),
        ("input", lambda g, x: g.input((2, 0)), "input.shape: every dim must be >= 1"),
        ("weight", lambda g, x: g.weight((3,), name=""), "weight.name: must be non-empty"),
        ("input", lambda g, x: g.input((2,), name=7), "input.name: expected a str"),
        ("split", lambda g, x: g.split(x, axis=1, sizes="22"), "split.sizes: expected a sequence of ints"),
    ],
)
def test_invalid_attribute_values_and_types(g, op, build, message):
    x = g.input((1, 4, 6, 6), name="x")
    before = len(g)
    with pytest.raises(AttributeValueError, match=message) as info:
        build(g, x)
    assert info.value.op == op
    # an attribute is checked before anything is added (weights made by the lambda aside)
    assert all(n.op in ("input", "weight") for n in g.nodes[before:])


def test_unknown_attribute(g):
    x = g.input((2, 3))
    with pytest.raises(AttributeValueError, match=r"relu.alpha: unknown attribute \(known: none\)"):
        g.add("relu", [x], alpha=0.1)
    with pytest.raises(
        AttributeValueError, match=r"conv2d.strides: unknown attribute \(known: stride, padding"
    ):
        g.add("conv2d", [g.input((1, 4, 6, 6)), g.weight((4, 4, 3, 3))], strides=(1, 1))


def test_missing_required_attributes(g):
    x = g.input((2, 3))
    with pytest.raises(AttributeValueError, match=r"softmax\.axis: required attribute missing"):
        g.add("softmax", [x])
    with pytest.raises(AttributeValueError, match=r"merge\.groups: required attribute missing"):
        g.add("merge", [g.weight((4, 1, 3, 3))], count=2)
    with pytest.raises(AttributeValueError, match=r"poolmax\.kernel: required attribute missing"):
        g.add("poolmax", [g.input((1, 1, 4, 4))])
    with pytest.raises(AttributeValueError, match=r"input\.shape: required attribute missing"):
        g.add("input", [], name="y")


def test_defaults_are_filled(g):
    x, w = conv_inputs(g)
    (y,) = g.add("conv2d", [x, w])
    assert g.nodes[y.node].attr_dict() == {"stride": (1, 1), "padding": "same", "activation": "none"}


# -- graph integrity -----------------------------------------------------------------------------


def test_unknown_op_lists_the_known_ones(g):
    with pytest.raises(GraphError, match=r"unknown op 'conv3d' \(known ops: .*conv2d"):
        g.add("conv3d", [g.input((1, 1, 1, 1, 1))])


def test_wrong_arity(g):
    x = g.input((2, 3))
    with pytest.raises(GraphError, match="ewadd: takes 2 inputs, got 1"):
        g.add("ewadd", [x])
    with pytest.raises(GraphError, match="concat: takes at least 1 inputs, got 0"):
        g.concat([], axis=0)


def test_tensor_from_another_graph(g):
    other = Graph()
    foreign = other.input((2, 3))
    mine = g.input((2, 3))
    with pytest.raises(GraphError, match="ewadd: input 1 belongs to another graph"):
        g.ewadd(mine, foreign)
    with pytest.raises(GraphError, match="relu: input 0 is ndarray, not a Tensor"):
        g.add("relu", [np.zeros((2, 3))])


def test_output_of_a_foreign_tensor(g):
    other = Graph()
    with pytest.raises(GraphError, match="output: expected a Tensor of this graph"):
        g.output(other.input((2,)))
    assert g.outputs == []


def test_duplicate_names(g):
    g.input((2,), name="x")
    with pytest.raises(GraphError, match="input: name 'x' is already used"):
        g.input((3,), name="x")
    with pytest.raises(GraphError, match="weight: name 'x' is already used"):
        g.weight((3,), name="x")
    with pytest.raises(GraphError, match="input: name 'x' is already used"):
        g.add("input", [], shape=(2,), name="x")
    # generated names skip the ones already taken
    g.weight((1,), name="w_0")
    auto = g.weight((1,))
    assert g.name_of(auto) == "w_1"
    assert g.name_of(g.input((1,))) == "input_0"


def test_weight_data_shape_must_match(g):
    with pytest.raises(GraphError, match=r"weight 'w': data shape \(3,\) != declared \(2, 2\)"):
        g.weight((2, 2), name="w", data=np.zeros(3))


def test_failed_call_leaves_the_graph_unchanged(g):
    x, w = g.input((1, 6, 5, 5)), g.weight((4, 4, 3, 3))
    nodes = list(g.nodes)
    with pytest.raises(ShapeError):
        g.conv2d(x, w)
    assert g.nodes == nodes


def test_every_error_is_a_tensor_eqsat_error(g):
    assert issubclass(ShapeError, TensorEqsatError)
    assert issubclass(AttributeValueError, TensorEqsatError)
    assert issubclass(GraphError, TensorEqsatError)


def test_add_node_validates_raw_attribute_tuples(g):
    (x,) = g.add_node("input", ((2, 3), "x"), [])
    (y,) = g.add_node("softmax", (1,), [x.ref])
    assert y.shape == (2, 3)
    with pytest.raises(GraphError, match=r"softmax: expected 1 attribute values \(axis\), got 2"):
        g.add_node("softmax", (1, 2), [x.ref])
    with pytest.raises(GraphError, match=r"relu: input \(9, 0\) does not exist"):
        g.add_node("relu", (), [(9, 0)])
    with pytest.raises(AttributeValueError, match=r"softmax\.axis: expected an int"):
        g.add_node("softmax", ("1",), [x.ref])
    with pytest.raises(GraphError, match="name 'x' is already used"):
        g.add_node("weight", ((1,), "x"), [])


# -- queries -------------------------------------------------------------------------------------


def small_net() -> Graph:
    g = Graph()
    x = g.input((1, 4, 6, 6), name="x")
    w1, w2 = g.weight((8, 4, 3, 3), name="w1"), g.weight((8, 8, 1, 1), name="w2")
    y = g.conv2d(x, w1, activation="relu")
    z = g.conv2d(y, w2)
    g.relu(z)  # dead: no output depends on it
    a, _ = g.split(z, axis=1, sizes=(3, 5))
    g.output(g.ewadd(y, z), a)
    return g


def test_topological_iteration_and_queries():
    g = small_net()
    seen: set[int] = set()
    for node in g:
        assert all(src in seen for src, _ in node.inputs)
        seen.add(node.id)
    assert len(g) == 8
    assert [g.name_of(n.id) for n in g.inputs()] == ["x"]
    assert [g.name_of(n.id) for n in g.weights()] == ["w1", "w2"]
    assert g.op_counts() == {"conv2d": 2, "relu": 1, "split": 1, "ewadd": 1}
    assert g.op_counts(include_leaves=True)["weight"] == 2
    assert g.num_parameters() == 8 * 4 * 9 + 8 * 8
    assert g.consumers()[3] == [4, 7]  # conv y feeds conv z and the ewadd
    assert g.live_nodes() == {0, 1, 2, 3, 4, 6, 7}
    assert g.shape_of((6, 1)) == (1, 5, 6, 6)
    assert g.tensor((6, 1)).shape == (1, 5, 6, 6)
    with pytest.raises(GraphError, match=r"node 3 \(conv2d\) has no name"):
        g.name_of(3)
    g.validate()


def test_validate_catches_a_corrupted_graph():
    g = small_net()
    g.outputs.append((99, 0))
    with pytest.raises(GraphError, match=r"output \(99, 0\) does not exist"):
        g.validate()
    with pytest.raises(GraphError, match="graph has no outputs"):
        Graph().validate()


def test_summary_and_dot():
    g = small_net()
    info = summary(g)
    assert info == {
        "nodes": 8,
        "ops": {"conv2d": 2, "relu": 1, "split": 1, "ewadd": 1},
        "parameters": 352,
        "weights": 2,
        "weight_dtypes": {"float32": 2},
        "inputs": [{"name": "x", "shape": [1, 4, 6, 6], "dtype": "float32"}],
        "outputs": [[1, 8, 6, 6], [1, 3, 6, 6]],
        "output_dtypes": ["float32", "float32"],
        "symbols": {},  # a static graph: no symbolic dim
    }
    dot = to_dot(g, name="net")
    assert dot.startswith('digraph "net" {')
    assert dot.count(" -> ") == 8 + 2  # 8 edges between nodes, 2 to the outputs
    assert 'n6 -> n7 [label="0"]' not in dot  # the ewadd reads y and z, not the split
    assert "n6 -> out1;" in dot
    assert 'n3 [label="conv2d\\nstride=(1, 1), padding=same, activation=relu\\n(1, 8, 6, 6)"];' in dot
