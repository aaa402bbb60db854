"""The ``tensor_eqsat`` backend optimizes float16 and bfloat16 modules in their dtype."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from test_backend import FAST, capture_compiled  # noqa: E402, F401
from torch_models import Attention, BasicBlock, fresh, run  # noqa: E402, F401

DTYPES = [torch.float16, torch.bfloat16]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_attention_in_reduced_precision_is_translated_and_rewritten(dtype):
    got, expected, (report,) = run(Attention().to(dtype), torch.randn(1, 6, 32, dtype=dtype))
    assert got.dtype == dtype
    assert (report.ops_mapped, report.ops_opaque) == (17, 0)
    assert report.rules_applied.get("matmul-concat-split-shared-lhs", 0) >= 1
    assert not report.kept_original, report.reason
    scale = expected.float().abs().max().item()
    assert (got.float() - expected.float()).abs().max().item() <= 0.05 * scale


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_a_conv_block_in_reduced_precision_is_translated_whole(dtype):
    got, expected, (report,) = run(BasicBlock().to(dtype), torch.randn(1, 8, 8, 8, dtype=dtype))
    assert got.dtype == dtype
    assert (report.ops_mapped, report.ops_opaque, report.fallback) == (7, 0, None)
    scale = expected.float().abs().max().item()
    assert (got.float() - expected.float()).abs().max().item() <= 0.05 * scale


def test_the_check_compares_reduced_precision_at_its_dtypes_tolerance():
    from tensor_eqsat.torch.delivery import compare_outputs

    x = torch.ones(4, dtype=torch.bfloat16)
    off = x + 0.02  # 2 % off: rounding-sized in bf16, a bug in float32
    assert compare_outputs((x,), (off,), rtol=1e-4, atol=1e-5)[0]
    assert not compare_outputs((x.float(),), (off.float(),), rtol=1e-4, atol=1e-5)[0]
    # A sign flip is caught in every dtype.
    assert not compare_outputs((x,), (-x,), rtol=1e-4, atol=1e-5)[0]
    # TF32 kernels: float32 at TF32's tolerance.
    near = torch.full((4,), 1.01)
    assert compare_outputs((x.float(),), (near,), rtol=1e-4, atol=1e-5, tf32=True)[0]
    assert not compare_outputs((x.float(),), (near,), rtol=1e-4, atol=1e-5)[0]


class Float32IslandBlock(torch.nn.Module):
    """Attention and an RMSNorm as reduced-precision transformers write them: the softmax in
    float32 (``softmax(..., dtype=float32)`` and ``.to(dtype)`` back), the norm's statistics in
    float32 (``.float()``, ``.to(torch.float32)``, then ``.type_as`` the input)."""

    def __init__(self, dim: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.att = Attention(dim, heads)
        self.norm_w = torch.nn.Parameter(torch.rand(dim) + 0.5)

    def forward(self, x):
        b, s, d = x.shape
        h, hd = self.att.heads, d // self.att.heads
        q = self.att.q(x).view(b, s, h, hd).transpose(1, 2)
        k = self.att.k(x).view(b, s, h, hd).transpose(1, 2)
        v = self.att.v(x).view(b, s, h, hd).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / hd**0.5
        att = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        y = x + self.att.o((att @ v).transpose(1, 2).reshape(b, s, d))
        y32 = y.to(torch.float32)
        y32 = y32 * torch.rsqrt(y32.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.norm_w * y32.to(x.dtype) + y.float().half().to(x.dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_float32_islands_of_a_reduced_precision_block_are_translated_and_checked(dtype):
    got, expected, (report,) = run(Float32IslandBlock().to(dtype), torch.randn(1, 6, 32, dtype=dtype))
    assert got.dtype == dtype
    assert report.ops_opaque == 0 and report.fallback is None, report
    assert report.rules_applied.get("matmul-concat-split-shared-lhs", 0) >= 1
    assert not report.kept_original, report.reason
    scale = expected.float().abs().max().item()
    assert (got.float() - expected.float()).abs().max().item() <= 0.05 * scale
