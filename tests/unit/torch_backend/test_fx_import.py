"""Translating Dynamo FX graphs: which calls are exactly IR ops, and which stay opaque."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from torch_models import capture  # noqa: E402

from tensor_eqsat.torch.fx_export import rebuild  # noqa: E402
from tensor_eqsat.torch.fx_import import Unsupported, translate  # noqa: E402


def close(expected, got, tol=1e-6):
    """Every output within ``tol`` (relative to its largest value): for mappings whose PyTorch
    calls differ from the model's (a pad and a pool, a slice and a reshape) in summation order."""
    if isinstance(expected, torch.Tensor):
        expected, got = (expected,), (got,)
    for a, b in zip(expected, got, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        assert (a - b).abs().max().item() <= tol * max(1.0, a.abs().max().item())


def roundtrip(fn, *inputs):
    """The translation, after checking that the rebuilt graph computes what ``fn`` computes."""
    gm, ex = capture(fn, *inputs)
    tr = translate(gm, ex)
    with torch.no_grad():
        expected, got = gm(*ex), rebuild(tr, tr.graph)(*ex)
    for a, b in zip(expected, got, strict=True):
        assert torch.equal(a, b)
    return tr


def test_a_stride_2_conv_is_same_padding_on_an_odd_size_and_an_explicit_pad_on_an_even_one():
    conv = torch.nn.Conv2d(3, 4, 3, stride=2, padding=1, bias=False)
    odd = roundtrip(conv, torch.randn(1, 3, 7, 7))
    even = roundtrip(conv, torch.randn(1, 3, 8, 8))
    assert dict(odd.mapped) == {"conv2d": 1} and not odd.unmapped
    assert odd.graph.op_counts() == {"conv2d": 1}
    # PyTorch pads (1, 1), TASO's SAME (0, 1): a zero pad, then a VALID conv.
    assert dict(even.mapped) == {"conv2d": 1} and not even.unmapped
    assert even.graph.op_counts() == {"pad": 1, "conv2d": 1}
    (pad,) = [n for n in even.graph.nodes if n.op == "pad"]
    assert pad.attr_dict() == {"pads": (0, 0, 1, 1, 0, 0, 1, 1), "fill": "zero"}


def test_a_max_pool_padded_unlike_same_pads_with_minus_infinity():
    tr = roundtrip(torch.nn.MaxPool2d(3, 2, 1), -torch.rand(1, 2, 8, 8) - 1.0)  # all negative
    assert dict(tr.mapped) == {"max_pool2d": 1}
    (pad,) = [n for n in tr.graph.nodes if n.op == "pad"]
    assert pad.attr_dict()["fill"] == "neg_inf"


def test_a_rebuilt_conv_takes_its_explicit_pad_as_its_own_padding():
    conv = torch.nn.Conv2d(3, 4, 3, stride=2, padding=1, bias=False)
    gm, ex = capture(conv, torch.randn(1, 3, 8, 8))
    rebuilt = rebuild(translate(gm, ex), translate(gm, ex).graph)
    calls = [n.target for n in rebuilt.graph.nodes if n.op == "call_function"]
    assert F.pad not in calls and F.conv2d in calls


def test_a_tensor_that_is_not_a_parameter_is_not_frozen():
    w = torch.randn(4, 3, 3, 3)  # a closure tensor: an input of the graph, free to change
    tr = roundtrip(lambda x: F.conv2d(x, w, padding=1), torch.randn(1, 3, 8, 8))
    assert not tr.frozen and dict(tr.unmapped) == {"conv2d": 1}


def test_dilated_conv_stays_opaque_and_pools_that_count_padding_pad_first():
    conv = torch.nn.Conv2d(3, 1, 3, padding=2, dilation=2)
    gm, ex = capture(
        lambda x: F.avg_pool2d(conv(x), 3, 1, 1) + F.avg_pool2d(x[:, :1], 3, 1, 1, False, False),
        torch.randn(1, 3, 8, 8),
    )
    tr = translate(gm, ex)
    with torch.no_grad():
        close(gm(*ex), rebuild(tr, tr.graph)(*ex))
    assert tr.unmapped["conv2d"] == 1  # dilated
    assert tr.mapped["avg_pool2d"] == 2  # counting the padding: the mean of the zero-padded input
    assert tr.graph.op_counts()["pad"] == 1


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


# -- the calls of today's inference graphs (issue 33) -------------------------------------------


@pytest.mark.parametrize(
    ("fn", "op"),
    [
        (F.silu, "silu"),
        (F.hardswish, "hardswish"),
        (F.hardsigmoid, "hardsigmoid"),
        (F.relu6, "clip"),
        (lambda x: F.hardtanh(x, -0.5, 2.0), "clip"),
        (lambda x: torch.clamp(x, -1.0, 1.0), "clip"),
        (lambda x: x.clamp(min=0.0, max=6.0), "clip"),
        (lambda x: x.pow(2), "pow"),
        (lambda x: torch.pow(x, 3.0), "pow"),
        (lambda x: torch.rsqrt(x * x + 1.0), "rsqrt"),
        (lambda x: x.mean(-1, keepdim=True), "mean"),
        (lambda x: x.mean((-2, -1)), "mean"),
        (lambda x: F.pad(x, (1, 2, 0, 1)), "pad"),
        (lambda x: x[..., 1:3], "slice"),
        (lambda x: x[:, None, 1:, ::2], "slice"),
        (lambda x: x[:, None].expand(2, 3, 4, 5), "expand"),
    ],
)
def test_inference_calls_map_to_one_ir_op(fn, op):
    tr = roundtrip(fn, torch.randn(2, 4, 5))
    assert not tr.unmapped, dict(tr.unmapped)
    assert tr.graph.op_counts().get(op, 0) >= 1


def test_a_non_constant_or_cropping_pad_and_a_one_sided_clamp_stay_opaque():
    tr = roundtrip(
        lambda x: (F.pad(x, (1, 1), value=2.0), F.pad(x, (-1, 3)), x.clamp(min=0.5)), torch.randn(2, 4)
    )
    assert dict(tr.unmapped) == {"pad": 2, "method:clamp": 1}


def test_casts_to_float32_and_float32_softmax_are_the_identity():
    def fn(x):
        return torch.softmax(x.to(torch.float32), dim=-1, dtype=torch.float32).type(torch.float32)

    tr = roundtrip(fn, torch.randn(2, 8))
    assert not tr.unmapped and tr.graph.op_counts() == {"softmax": 1}


def test_a_cast_between_float_dtypes_is_a_cast_and_one_to_an_integer_or_float64_stays_opaque():
    tr = roundtrip(lambda x: x.to(torch.float16).float() * 2.0, torch.randn(2, 8))
    assert not tr.unmapped and tr.graph.op_counts() == {"cast": 2, "smul": 1}
    tr = roundtrip(lambda x: (x.half(), x.bfloat16().to(torch.float16)), torch.randn(2, 8))
    assert not tr.unmapped and tr.graph.op_counts() == {"cast": 3}
    tr = roundtrip(lambda x: (x.to(torch.int64), x.double() * 2.0), torch.randn(2, 8))
    assert tr.unmapped["method:to"] == 1 and tr.unmapped["method:double"] == 1


def test_softmax_with_a_dtype_casts_its_input_first():
    def fn(x):
        return torch.softmax(x, -1, dtype=torch.float32), F.softmax(x, dim=0, dtype=torch.float32)

    tr = roundtrip(fn, torch.randn(2, 8, dtype=torch.bfloat16))
    assert not tr.unmapped and tr.graph.op_counts() == {"cast": 2, "softmax": 2}


def test_rms_norm_and_rotary_embedding_as_llama_writes_them():
    w = torch.nn.Parameter(torch.rand(16) + 0.5)
    cos, sin = torch.randn(6, 16), torch.randn(6, 16)

    def rms_rotary(x):
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        h = w * h.to(torch.float32)
        half = torch.cat((-h[..., 8:], h[..., :8]), dim=-1)
        return h * cos + half * sin

    gm, ex = capture(rms_rotary, torch.randn(2, 6, 16))
    tr = translate(gm, ex)
    with torch.no_grad():
        close(gm(*ex), rebuild(tr, tr.graph)(*ex))
    assert not tr.unmapped, dict(tr.unmapped)
    assert {"pow", "mean", "rsqrt", "slice", "concat"} <= set(tr.graph.op_counts())


def test_grouped_query_attention_repeats_heads_with_expand():
    def repeat_kv(k):
        b, h, s, d = k.shape
        return k[:, :, None, :, :].expand(b, h, 4, s, d).reshape(b, h * 4, s, d) * 1.0

    tr = roundtrip(repeat_kv, torch.randn(1, 2, 5, 8))
    assert not tr.unmapped and tr.graph.op_counts()["expand"] == 1


def test_a_ceil_mode_pool_wider_than_the_map_is_the_spatial_mean():
    pool = torch.nn.AvgPool2d(1280, ceil_mode=True)  # EfficientNet's final pooling
    gm, ex = capture(pool, torch.randn(1, 3, 7, 7))
    tr = translate(gm, ex)
    with torch.no_grad():
        close(gm(*ex), rebuild(tr, tr.graph)(*ex))
    assert tr.graph.op_counts() == {"mean": 1}


class _ConvNeXtBlock(torch.nn.Module):
    """torchvision's ConvNeXt block, reduced: ``out = stochastic_depth(scale * branch(x));
    out += x``, then the next stage permutes ``out`` (a view taken after the update)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 4, 3, padding=1, groups=4)
        self.scale = torch.nn.Parameter(torch.full((4, 1, 1), 0.5))

    def forward(self, x):
        out = self.scale * torch.relu(self.conv(x))
        out = out  # stochastic depth in eval mode returns its input
        out += x
        return out.permute(0, 2, 3, 1) * 2.0


def test_the_convnext_in_place_residual_is_taken_functionally():
    gm, ex = capture(_ConvNeXtBlock().eval(), torch.randn(1, 4, 6, 6))
    tr = translate(gm, ex)
    with torch.no_grad():
        close(gm(*ex), rebuild(tr, tr.graph)(*ex))
    assert not tr.unmapped and tr.mapped["iadd"] == 1


def test_an_in_place_op_after_a_view_was_taken_is_still_refused():
    def fn(x):
        y = x * 2.0
        v = y.permute(1, 0)  # taken before the update: it sees the update
        y += 1.0
        return v * 1.0

    gm, ex = capture(fn, torch.randn(4, 4))
    with pytest.raises(Unsupported, match="view"):
        translate(gm, ex)


def test_opaque_tensor_ops_are_ordered_only_by_effectful_calls():
    def fn(x):
        a = torch.erf(x)
        b = torch.erf(x * 2.0)  # independent of a: free to move
        with torch.enable_grad():  # two effectful calls; c must stay between them
            c = torch.erf(x * 3.0)
        return a, b, c

    gm, ex = capture(fn, torch.randn(4))
    tr = translate(gm, ex)
    g = tr.graph
    ops = {}
    for n in g.nodes:
        if n.op == "opaque":
            ops.setdefault(n.attr_dict()["op_type"], []).append(n)
    (a, b, c), (enter, leave) = ops["erf"], ops["_set_grad_enabled"]

    def reads(n, m):
        return any(src == m.id for src, _ in n.inputs)

    assert not reads(b, a) and not reads(a, b)
    assert reads(c, enter) and reads(leave, enter) and reads(leave, c)
    with torch.no_grad():
        close(gm(*ex), rebuild(tr, g)(*ex))


def test_integer_indexing_maps_and_bool_or_tensor_indexing_stays_opaque():
    idx = torch.tensor([0, 2])
    tr = roundtrip(lambda x: (x[1], x[:, -1], x[True], x[:, idx]), torch.randn(3, 4))
    assert tr.mapped["getitem"] == 2 and tr.unmapped["getitem"] == 2
