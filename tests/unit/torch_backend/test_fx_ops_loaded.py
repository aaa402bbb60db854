"""The calls of models as loaded (issue 45) through the backend: SDPA, group norm, conv1d, roll and
nearest interpolation are mapped (not opaque), the rebuilt module computes what PyTorch computes
(float32, and bfloat16 where the call runs in it), and a rule applies through each."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = nn.functional

from torch_models import fresh  # noqa: E402, F401 (fresh: autouse)

import tensor_eqsat.torch as te_torch  # noqa: E402

PRICED = {
    "then": "eager",
    "cost_model": "recorded:h200",
    "search": {"search": "saturate", "node_limit": 1500, "k_multi": 2},
    "guard": False,
}
TOL = {torch.float32: (1e-4, 1e-4), torch.bfloat16: (4e-2, 4e-2)}


def _optimize(model, *inputs, dtype=torch.float32):
    model = model.eval().to(dtype)
    inputs = tuple(x.to(dtype) if x.is_floating_point() else x for x in inputs)
    fast = te_torch.optimize_module(model, inputs, te_torch.TorchConfig(**PRICED))
    with torch.no_grad():
        expected, got = model(*inputs), fast(*inputs)
    rtol, atol = TOL[dtype]
    torch.testing.assert_close(got.float(), expected.float(), rtol=rtol, atol=atol, equal_nan=True)
    return fast.report


class SdpaAttention(nn.Module):
    """Self-attention as HF's sdpa implementation writes it: Q, K, V projections of one input."""

    def __init__(self, d=32, heads=4, mask=None, causal=False, scale=None):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.heads, self.causal, self.scale = heads, causal, scale
        self.register_buffer("mask", mask)

    def forward(self, x):
        b, s, d = x.shape

        def split(t):
            return t.view(b, s, self.heads, d // self.heads).transpose(1, 2)

        y = F.scaled_dot_product_attention(
            split(self.q(x)), split(self.k(x)), split(self.v(x)), attn_mask=self.mask,
            is_causal=self.causal, scale=self.scale,
        )  # fmt: skip
        return self.o(y.transpose(1, 2).reshape(b, s, d))


def _masks(s):
    pad = torch.ones(1, 1, 1, s, dtype=torch.bool)
    pad[..., -2:] = False
    additive = torch.zeros(1, 1, s, s).masked_fill(
        torch.ones(s, s, dtype=torch.bool).triu(1), torch.finfo(torch.float32).min
    )
    return {"none": None, "bool": pad, "additive": additive}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("case", ["none", "bool", "additive", "causal", "scale"])
def test_sdpa_in_the_graph_is_mapped_and_its_projections_merged(case, dtype):
    s = 8
    mask = _masks(s).get(case)
    if mask is not None and mask.is_floating_point():
        mask = mask.to(dtype)
    model = SdpaAttention(mask=mask, causal=case == "causal", scale=0.3 if case == "scale" else None)
    report = _optimize(model, torch.randn(2, s, 32), dtype=dtype)
    assert "scaled_dot_product_attention" not in report.opaque_ops, report.opaque_ops
    assert report.rules_applied.get("matmul-bias-concat-split-shared-lhs", 0) >= 1, report.rules_applied


def test_sdpa_with_a_mask_that_empties_a_row_keeps_its_zeros():
    s = 6
    mask = torch.zeros(1, 1, s, s)
    mask[..., 2, :] = float("-inf")  # query 2 sees no key: SDPA gives 0 there, softmax NaN
    model = SdpaAttention(mask=mask)
    x = torch.randn(1, s, 32)
    report = _optimize(model, x)
    assert "scaled_dot_product_attention" not in report.opaque_ops
    with torch.no_grad():
        assert not model.eval()(x).isnan().any()


def test_active_attention_dropout_is_refused():
    class Dropping(SdpaAttention):
        def forward(self, x):
            q = x.view(1, 4, 2, 8).transpose(1, 2)
            return F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)

    model = Dropping().eval()
    with pytest.warns(te_torch.FallbackWarning, match="attention dropout is active"):
        fast = te_torch.optimize_module(model, (torch.randn(1, 4, 16),), te_torch.TorchConfig(**PRICED))
    assert fast.report.fallback


class ResnetBlock(nn.Module):
    """The diffusers resnet block: group norm, SiLU, conv, twice, and a 1x1 shortcut conv."""

    def __init__(self, c=32, out=64, groups=8):
        super().__init__()
        self.norm1, self.conv1 = nn.GroupNorm(groups, c), nn.Conv2d(c, out, 3, padding=1)
        self.norm2, self.conv2 = nn.GroupNorm(groups, out), nn.Conv2d(out, out, 3, padding=1)
        self.shortcut = nn.Conv2d(c, out, 1)
        for norm in (self.norm1, self.norm2):
            nn.init.uniform_(norm.weight, 0.5, 1.5)
            nn.init.uniform_(norm.bias, -0.5, 0.5)

    def forward(self, x):
        h = self.conv1(F.silu(self.norm1(x)))
        h = self.conv2(F.silu(self.norm2(h)))
        return (self.shortcut(x) + h) / 1.0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_group_norm_is_mapped_with_rules_through_the_resnet_block(dtype):
    report = _optimize(ResnetBlock(), torch.randn(2, 32, 8, 8), dtype=dtype)
    assert report.ops_opaque == 0, report.opaque_ops
    assert report.rules_applied, report.rules_applied


class Conv1dPair(nn.Module):
    """Whisper's stem: two conv1d (stride 1, then stride 2) with GELU; plus a parallel branch."""

    def __init__(self, c=16, d=32):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv1d(c, d, 3, padding=1), nn.Conv1d(d, d, 3, stride=2, padding=1)
        self.side = nn.Conv1d(c, d, 3, padding=1)

    def forward(self, x):
        return F.gelu(self.conv2(F.gelu(self.conv1(x)))).sum(-1) + F.relu(self.side(x)).sum(-1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_conv1d_is_mapped_as_a_conv2d_that_the_conv_rules_merge(dtype):
    report = _optimize(Conv1dPair(), torch.randn(2, 16, 20), dtype=dtype)
    assert "conv1d" not in report.opaque_ops, report.opaque_ops
    assert any("conv" in r for r in report.rules_applied), report.rules_applied


class RollThenProject(nn.Module):
    """Swin's shifted window: a roll, then two projections of the rolled tensor."""

    def __init__(self, d=16):
        super().__init__()
        self.a, self.b = nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, x):
        r = torch.roll(x, shifts=(-2, 3), dims=(1, 2))
        return self.a(r) * self.b(r)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_roll_is_mapped_and_the_projections_after_it_merged(dtype):
    report = _optimize(RollThenProject(), torch.randn(1, 7, 5, 16), dtype=dtype)
    assert "roll" not in report.opaque_ops, report.opaque_ops
    assert report.rules_applied.get("matmul-bias-concat-split-shared-lhs", 0) >= 1, report.rules_applied


class Upsample(nn.Module):
    """diffusers' Upsample2D: nearest 2x, then two convs of the upsampled map."""

    def __init__(self, c=8):
        super().__init__()
        self.a, self.b = nn.Conv2d(c, c, 3, padding=1), nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        u = F.interpolate(x, scale_factor=2.0, mode="nearest")
        return self.a(u) + self.b(u)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_nearest_interpolation_is_mapped_and_the_convs_after_it_merged(dtype):
    report = _optimize(Upsample(), torch.randn(1, 8, 5, 6), dtype=dtype)
    assert "interpolate" not in report.opaque_ops, report.opaque_ops
    assert any("conv" in r for r in report.rules_applied), report.rules_applied


def test_interpolation_that_is_not_exact_stays_opaque():
    class Bilinear(nn.Module):
        def forward(self, x):
            return F.interpolate(x, scale_factor=3.0, mode="nearest") + 1.0

    report = _optimize(Bilinear(), torch.randn(1, 2, 4, 4))
    assert report.opaque_ops.get("interpolate") == 1, report.opaque_ops


class FrozenBatchNorm2d(nn.Module):
    """DETR's ``DetrFrozenBatchNorm2d`` (torchvision's ``FrozenBatchNorm2d``): batch norm as
    ``x * scale + shift`` from buffers."""

    def __init__(self, c):
        super().__init__()
        for name, init in (
            ("weight", (0.5, 2.0)),
            ("bias", (-1, 1)),
            ("running_mean", (-1, 1)),
            ("running_var", (0.5, 2)),
        ):
            self.register_buffer(name, torch.empty(c).uniform_(*init))

    def forward(self, x):
        scale = self.weight.reshape(1, -1, 1, 1) * (self.running_var.reshape(1, -1, 1, 1) + 1e-5).rsqrt()
        shift = self.bias.reshape(1, -1, 1, 1) - self.running_mean.reshape(1, -1, 1, 1) * scale
        return x * scale + shift


class FrozenBlock(nn.Module):
    def __init__(self, c=8):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c, c, 3, padding=1, bias=False), FrozenBatchNorm2d(c)
        self.conv2, self.bn2 = (
            nn.Conv2d(c, c, 3, stride=2, padding=1, bias=False, groups=2),
            FrozenBatchNorm2d(c),
        )

    def forward(self, x):
        return F.relu(self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))


def test_a_frozen_batch_norm_is_folded_into_the_conv_before_it():
    model, x = FrozenBlock().eval(), torch.randn(2, 8, 8, 8)
    fast = te_torch.optimize_module(model, (x,), te_torch.TorchConfig(**PRICED))
    assert fast.report.rules_applied.get("conv-channel-scale-into-weight", 0) >= 1, fast.report.rules_applied
    code = fast.fn.fn.code  # both scales in the conv weights, both shifts a bias add
    assert code.count("torch.conv2d(") == 2 and "torch.mul(" not in code and code.count("torch.add(") == 2
    with torch.no_grad():
        torch.testing.assert_close(fast(x), model(x), rtol=1e-4, atol=1e-4)


class BnBlock(nn.Module):
    """conv -> batch norm -> ReLU, twice (ResNet's basic block without the shortcut)."""

    def __init__(self, c=8):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        for bn in (self.bn1, self.bn2):
            bn.running_mean.uniform_(-1, 1)
            bn.running_var.uniform_(0.5, 2)
            nn.init.uniform_(bn.weight, 0.5, 2)
            nn.init.uniform_(bn.bias, -1, 1)

    def forward(self, x):
        return F.relu(self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))


def test_batch_norm_under_autocast_is_mapped_in_float32_and_folded(monkeypatch):
    from tensor_eqsat.torch import dynamo_backend

    rebuilt, real = [], dynamo_backend.rebuild
    monkeypatch.setattr(
        dynamo_backend, "rebuild", lambda *a, **k: rebuilt.append(real(*a, **k)) or rebuilt[-1]
    )
    model, x = BnBlock().eval(), torch.randn(2, 8, 8, 8)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        expected = model(x)
        compiled = torch.compile(model, backend="tensor_eqsat", dynamic=False, options=PRICED)
        got = compiled(x)
    report = te_torch.backend.report
    assert report.ops_opaque == 0, report.opaque_ops  # was: "inputs have different dtypes"
    assert report.rules_applied.get("bn-fold-conv", 0) >= 1, report.rules_applied
    assert not report.kept_original, report.reason
    code = rebuilt[-1].code  # both batch norms folded into their bfloat16 convs
    assert "batch_norm" not in code and code.count("torch.conv2d(") == 2, code
    assert got.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), expected.float(), rtol=4e-2, atol=4e-2)


def test_the_pattern_attention_mask_keeps_nan_in_rows_it_empties_for_every_mask():
    """Issue 44 item 4: eager attention with a run-time mask, rewritten into one SDPA call, gives
    NaN where eager does (every key of a row masked with -inf), on a mask the check never saw."""

    class MaskedAttention(nn.Module):
        def __init__(self, d=16):
            super().__init__()
            self.q, self.k, self.v = (nn.Linear(d, d) for _ in range(3))

        def forward(self, x, mask):
            scores = self.q(x) @ self.k(x).transpose(-2, -1) * 0.25 + mask
            return torch.softmax(scores, dim=-1) @ self.v(x)

    model, x = MaskedAttention().eval(), torch.randn(2, 6, 16)
    compiled = torch.compile(model, backend="tensor_eqsat", dynamic=False, options=PRICED)
    with torch.no_grad():
        compiled(x, torch.zeros(2, 6, 6))  # the example the check sees: nothing masked
        report = te_torch.backend.report
        assert any(r.startswith("attention-") for r in report.rules_applied), report.rules_applied
        assert not report.kept_original, report.reason
        mask = torch.zeros(2, 6, 6)
        mask[0, 3, :] = float("-inf")  # query 3 of sample 0 sees no key
        mask[1, :, 4] = float("-inf")  # key 4 hidden: every row keeps the others
        got, expected = compiled(x, mask), model(x, mask)
    assert expected[0, 3].isnan().all() and not expected[1].isnan().any()
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4, equal_nan=True)


def test_a_constant_mask_that_leaves_every_row_a_key_runs_sdpa_alone():
    class ConstMask(nn.Module):
        def __init__(self, d=16, s=6):
            super().__init__()
            self.q, self.k, self.v = (nn.Linear(d, d) for _ in range(3))
            self.register_buffer(
                "mask",
                torch.zeros(s, s).masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf")),
            )

        def forward(self, x):
            scores = self.q(x) @ self.k(x).transpose(-2, -1) * 0.25 + self.mask
            return torch.softmax(scores, dim=-1) @ self.v(x)

    model, x = ConstMask().eval(), torch.randn(2, 6, 16)
    fast = te_torch.optimize_module(model, (x,), te_torch.TorchConfig(**PRICED))
    assert any(r.startswith("attention-") for r in fast.report.rules_applied), fast.report.rules_applied
    code = fast.fn.fn.code
    assert "scaled_dot_product_attention(" in code and "masked_fill" not in code
    with torch.no_grad():
        torch.testing.assert_close(fast(x), model(x), rtol=1e-4, atol=1e-4)


def test_one_constant_boolean_mask_read_by_two_attention_calls_is_one_weight():
    class TwoLayers(nn.Module):
        def __init__(self, s=8):
            super().__init__()
            self.a = SdpaAttention(mask=torch.ones(1, 1, s, s, dtype=torch.bool).tril())
            self.b = SdpaAttention()
            self.b.mask = self.a.mask  # GPT-2 and Llama as loaded: one causal mask for every layer

        def forward(self, x):
            return self.b(self.a(x))

    report = _optimize(TwoLayers(), torch.randn(2, 8, 32))
    assert report.fallback is None and report.ops_opaque == 0, (report.fallback, report.opaque_ops)
