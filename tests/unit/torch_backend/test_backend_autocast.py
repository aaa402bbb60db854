"""``torch.autocast`` regions through the backend: the IR has the dtypes the eager run has (issue 34)."""

from __future__ import annotations

import types

import pytest

torch = pytest.importorskip("torch")

from torch_models import FAST, Attention, fresh, run  # noqa: E402, F401

import tensor_eqsat.torch as te_torch  # noqa: E402
from tensor_eqsat.torch import dynamo_backend as backend_module  # noqa: E402
from tensor_eqsat.torch.autocast import AutocastState, widest  # noqa: E402
from tensor_eqsat.torch.fx_import import Unsupported, translate  # noqa: E402

nn = torch.nn
BF16 = 0.1  # bfloat16's relative tolerance, norm-wise (ir.dtypes.tolerance)


class AutocastAttention(nn.Module):
    """Attention in a float32 module with ``torch.autocast`` inside ``forward``: the Q/K/V
    linears run in bfloat16 (a merge rule can combine them), the softmax in what it gets, and
    the residual adds the float32 input to the bfloat16 attention (promoted to float32)."""

    def __init__(self, dim: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.att = Attention(dim, heads)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return x + self.att(x)


class NestedAutocast(nn.Module):
    """Two projections in a bfloat16 region, an op the IR lacks inside it (a 1-D convolution,
    which autocast runs in bfloat16), and an output projection in float32 in a region switched
    off inside it."""

    def __init__(self, dim: int = 16, seq: int = 6) -> None:
        super().__init__()
        self.p = nn.Linear(dim, dim)
        self.q = nn.Linear(dim, dim)
        self.conv = nn.Conv1d(seq, seq, 3, padding=1)
        self.o = nn.Linear(dim, dim)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = self.conv(self.p(x) + self.q(x))
            with torch.autocast("cpu", enabled=False):
                z = self.o(h.float())
        return h, z


def within_bf16(got, expected):
    scale = expected.float().abs().max().item()
    return (got.float() - expected.float()).abs().max().item() <= 0.01 + BF16 * scale


def test_an_autocast_region_is_mapped_rewritten_and_checked():
    got, expected, (report,) = run(AutocastAttention(), torch.randn(1, 6, 32))
    assert got.dtype == expected.dtype == torch.float32
    assert report.opaque_ops == {} and report.fallback is None, report  # the residual add too
    assert report.rules_applied.get("matmul-concat-split-shared-lhs", 0) >= 1
    assert not report.kept_original, report.reason
    assert "shape or dtype differs" not in report.reason
    assert report.check.startswith("pass") and "own bfloat16 error" in report.check
    assert within_bf16(got, expected)
    assert not torch.is_autocast_enabled("cpu")  # the translation entered no region itself


def test_nested_and_disabled_regions_keep_each_op_in_its_dtype(monkeypatch):
    rebuilt = []
    real = backend_module.rebuild

    def keep(tr, graph, device="cpu"):
        rebuilt.append(real(tr, graph, device))
        return rebuilt[-1]

    monkeypatch.setattr(backend_module, "rebuild", keep)
    (h, z), (eh, ez), (report,) = run(NestedAutocast(), torch.randn(1, 6, 16))
    assert (h.dtype, z.dtype) == (eh.dtype, ez.dtype) == (torch.bfloat16, torch.float32)
    assert report.opaque_ops == {"conv1d": 1}
    assert not report.kept_original, report.reason
    assert within_bf16(h, eh) and within_bf16(z, ez)
    # The opaque convolution runs in its region (it computes in bfloat16 only there); the
    # mapped ops carry their dtypes and run outside any region.
    names = [n.target.__name__ for n in rebuilt[0].graph.nodes if n.op == "call_function"]
    i = names.index("conv1d")
    assert names[i - 1 : i + 2] == ["_enter_autocast", "conv1d", "_exit_autocast"]
    assert names.count("_enter_autocast") == 1


def test_the_callers_autocast_around_a_compiled_module_is_followed():
    model = Attention().eval()
    compiled = torch.compile(model, backend="tensor_eqsat", dynamic=False, options=FAST)
    x = torch.randn(1, 6, 32)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        expected = model(x)
        got = compiled(x)
    (report,) = te_torch.backend.reports
    assert got.dtype == expected.dtype == torch.bfloat16
    assert report.opaque_ops == {} and not report.kept_original, report
    assert report.rules_applied.get("matmul-concat-split-shared-lhs", 0) >= 1
    assert within_bf16(got, expected)


def _graph(model, x):
    graphs = []

    def capture(gm, example_inputs):
        graphs.append((gm, list(example_inputs)))
        return gm

    with torch.no_grad():
        torch.compile(model, backend=capture, dynamic=False)(x)
    return graphs[0]


def test_translated_regions_cast_the_inputs_autocast_casts():
    gm, inputs = _graph(AutocastAttention().eval(), torch.randn(1, 6, 32))
    tr = translate(gm, inputs)
    g = tr.graph
    casts = [n for n in g.nodes if n.op == "cast"]
    # The input, once, for the three projections that read it (the weights are rounded once),
    # and the attention back to float32 for the residual add.
    assert [n.attr_dict()["dtype"] for n in casts] == ["bfloat16", "float32"]
    assert {g.dtype_of((w.id, 0)) for w in g.weights()} == {"bfloat16"}
    assert g.dtype_of(g.outputs[0]) == "float32"


def node(name, target, *args):
    return types.SimpleNamespace(name=name, op="call_function", target=target, args=args, kwargs={})


def test_a_region_closed_out_of_order_is_refused_with_a_reason():
    from torch.amp.autocast_mode import _enter_autocast, _exit_autocast

    state = AutocastState({"cpu": None, "cuda": None})
    outer = node("enter", _enter_autocast, "cpu", torch.bfloat16, True, None)
    inner = node("enter_1", _enter_autocast, "cpu", None, False, None)
    state.enter(outer)
    state.enter(inner)
    linear = node("lin", torch._C._nn.linear)
    assert state.cast_to(linear, "cpu", ["float32"]) is None  # switched off inside
    with pytest.raises(Unsupported, match="not the innermost one"):
        state.exit(node("exit", _exit_autocast, outer))
    state.exit(node("exit_1", _exit_autocast, inner))
    assert state.cast_to(linear, "cpu", ["float32"]) == "bfloat16"
    assert state.cast_to(linear, "cuda", ["float32"]) is None  # a CPU region leaves CUDA alone
    assert state.cast_to(node("cat", torch.cat), "cpu", ["bfloat16", "float32"]) == "float32"
    assert state.cast_to(node("relu", torch.relu), "cpu", ["float32"]) is None
    assert widest(["float16", "bfloat16"]) == "float32"


class MixedArithmetic(nn.Module):
    """A bfloat16 projection added to a float32 input (out of place: promoted to float32, then
    added) and, in place, a float32 stream updated by a bfloat16 one (``+=`` keeps float32 but
    rounds once from the promoted sum: left opaque)."""

    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.p = nn.Linear(dim, dim).to(torch.bfloat16)
        self.q = nn.Linear(dim, dim).to(torch.bfloat16)

    def forward(self, x):
        xb = x.bfloat16()
        h, g = self.p(xb), self.q(xb)  # two projections of one input: a merge rule applies
        y = x + h  # float32
        z = g.float() * 2
        z += h
        return y, z


def test_mixed_dtype_arithmetic_is_cast_then_computed_out_of_place_only():
    (y, z), (ey, ez), (report,) = run(MixedArithmetic(), torch.randn(1, 6, 16))
    assert (y.dtype, z.dtype) == (ey.dtype, ez.dtype) == (torch.float32, torch.float32)
    assert report.opaque_ops == {"iadd": 1}, report.opaque_ops
    assert report.rules_applied and not report.kept_original, report.reason
    assert report.check.startswith("pass") and "own bfloat16 error" in report.check
    assert within_bf16(y, ey) and within_bf16(z, ez)
