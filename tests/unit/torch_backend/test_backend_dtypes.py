"""The ``tensor_eqsat`` backend optimizes float16 and bfloat16 modules in their dtype."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from test_backend import FAST, capture_compiled  # noqa: E402, F401
from torch_models import Attention, BasicBlock, fresh  # noqa: E402, F401

import tensor_eqsat.torch as te_torch  # noqa: E402

DTYPES = [torch.float16, torch.bfloat16]


def run(model, x, **options):
    model.eval()
    compiled = torch.compile(model, backend="tensor_eqsat", dynamic=False, options={**FAST, **options})
    with torch.no_grad():
        expected = model(x)
        got = compiled(x)
    return got, expected, list(te_torch.backend.reports)


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
