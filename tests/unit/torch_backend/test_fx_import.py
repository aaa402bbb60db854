"""Translating Dynamo FX graphs: which calls are exactly IR ops, and which stay opaque."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from tensor_eqsat.torch.fx_export import rebuild  # noqa: E402
from tensor_eqsat.torch.fx_import import Unsupported, translate  # noqa: E402


def capture(fn, *inputs):
    """The Dynamo FX graph of ``fn`` and its example inputs."""
    torch._dynamo.reset()
    out: list = []

    def grab(gm, example_inputs):
        out.append((gm, list(example_inputs)))
        return gm

    with torch.no_grad():
        torch.compile(fn, backend=grab, dynamic=False, fullgraph=True)(*inputs)
    torch._dynamo.reset()
    return out[0]


def roundtrip(fn, *inputs):
    """The translation, after checking that the rebuilt graph computes what ``fn`` computes."""
    gm, ex = capture(fn, *inputs)
    tr = translate(gm, ex)
    with torch.no_grad():
        expected, got = gm(*ex), rebuild(tr, tr.graph)(*ex)
    for a, b in zip(expected, got, strict=True):
        assert torch.equal(a, b)
    return tr


def test_a_stride_2_conv_is_same_padding_on_an_odd_size_only():
    conv = torch.nn.Conv2d(3, 4, 3, stride=2, padding=1, bias=False)
    odd = roundtrip(conv, torch.randn(1, 3, 7, 7))
    even = roundtrip(conv, torch.randn(1, 3, 8, 8))
    assert dict(odd.mapped) == {"conv2d": 1} and not odd.unmapped
    assert dict(even.unmapped) == {"conv2d": 1} and not even.mapped


def test_a_tensor_that_is_not_a_parameter_is_not_frozen():
    w = torch.randn(4, 3, 3, 3)  # a closure tensor: an input of the graph, free to change
    tr = roundtrip(lambda x: F.conv2d(x, w, padding=1), torch.randn(1, 3, 8, 8))
    assert not tr.frozen and dict(tr.unmapped) == {"conv2d": 1}


def test_dilated_conv_and_pools_that_count_padding_stay_opaque():
    conv = torch.nn.Conv2d(3, 1, 3, padding=2, dilation=2)
    tr = roundtrip(
        lambda x: F.avg_pool2d(conv(x), 3, 1, 1) + F.avg_pool2d(x[:, :1], 3, 1, 1, False, False),
        torch.randn(1, 3, 8, 8),
    )
    assert tr.unmapped["conv2d"] == 1  # dilated
    assert tr.unmapped["avg_pool2d"] == 1  # count_include_pad=True with padding
    assert tr.mapped["avg_pool2d"] == 1  # padding excluded from the mean, as in the IR


def test_linear_becomes_a_matmul_with_the_transposed_weight_frozen():
    lin = torch.nn.Linear(8, 4)
    tr = roundtrip(lin, torch.randn(2, 3, 8))
    assert tr.graph.op_counts() == {"matmul": 1, "ewadd": 1}
    (wt,) = [
        tr.graph.weight_data[tr.graph.name_of(n.id)] for n in tr.graph.weights() if n.shapes[0] == (8, 4)
    ]
    assert (wt == lin.weight.detach().numpy().T).all()


def test_split_chunk_and_views_map():
    tr = roundtrip(
        lambda x: (
            torch.cat([a.relu() for a in x.chunk(2, dim=-1)], 1).permute(0, 2, 1).flatten(1).unsqueeze(0)
        ),
        torch.randn(2, 3, 8),
    )
    assert not tr.unmapped
    assert tr.graph.op_counts() == {"split": 1, "relu": 2, "concat": 1, "transpose": 1, "reshape": 2}


def test_an_in_place_op_on_a_fresh_tensor_is_taken_functionally():
    def fn(x):
        y = x * 2.0
        z = y + 1.0  # read before the update: sees the old value
        y.relu_()
        return y, z

    tr = roundtrip(fn, torch.randn(4, 4))
    assert not tr.unmapped


def test_an_in_place_op_on_a_view_is_refused():
    def fn(x):
        y = x * 2.0
        v = y.view(16)
        y.relu_()  # also changes v
        return v

    gm, ex = capture(fn, torch.randn(4, 4))
    with pytest.raises(Unsupported, match="view"):
        translate(gm, ex)


def test_integer_tensors_flow_through_opaque_ops_only():
    emb = torch.nn.Embedding(10, 8)
    tr = roundtrip(lambda ids: torch.relu(emb(ids)) * 2.0, torch.tensor([[1, 2, 3]]))
    assert dict(tr.unmapped) == {"embedding": 1}
    assert tr.mapped["relu"] == 1 and tr.mapped["mul"] == 1
