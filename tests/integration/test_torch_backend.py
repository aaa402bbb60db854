"""The torch.compile backend end to end: the entry point, HuggingFace models, Inductor.

The HuggingFace models are random-init tiny BERT, GPT-2 and ViT, their configs built here
(nothing is downloaded); they need the ``hf`` extra. Inductor compiles take tens of seconds on a
small CPU, so those tests are ``slow``.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import tensor_eqsat.torch as te_torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "unit" / "torch_backend"))

from torch_models import Attention, BasicBlock, fresh, hf_models  # noqa: E402, F401 (fresh: autouse)

EAGER = {
    "then": "eager",
    "time_budget": 10,
    "cost_model": "roofline:cpu",
    "search": {"search": "saturate", "node_limit": 400},
    "guard": False,
}


def _first(out):
    return out if isinstance(out, torch.Tensor) else out[0]


@pytest.mark.slow
def test_an_installed_entry_point_is_found_without_importing_the_package(tmp_path):
    # What `pip install` writes for the [project.entry-points."torch_dynamo_backends"] table.
    dist = tmp_path / "tensor_eqsat_probe-0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tensor-eqsat-probe\nVersion: 0\n")
    (dist / "entry_points.txt").write_text(
        "[torch_dynamo_backends]\ntensor_eqsat = tensor_eqsat.torch:backend\n"
    )
    code = textwrap.dedent(
        """
        import sys, torch
        m = torch.nn.Linear(4, 4).eval()
        f = torch.compile(m, backend="tensor_eqsat", dynamic=False, options={"then": "eager", "guard": False,
                          "cost_model": "roofline:cpu", "search": {"search": "saturate", "node_limit": 50}})
        with torch.no_grad():
            x = torch.randn(2, 4)
            assert torch.allclose(f(x), m(x))
        import tensor_eqsat.torch as t
        print(t.backend.report.ops_mapped)
        """
    )
    env = {"PYTHONPATH": f"{tmp_path}:{ROOT / 'src'}", "TENSOR_EQSAT_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "1"


@pytest.mark.hf
@pytest.mark.slow
@pytest.mark.parametrize("name", ["bert", "gpt2", "vit"])
def test_huggingface_models_match_eager(name):
    pytest.importorskip("transformers")
    model, inputs = hf_models()[name]
    compiled = torch.compile(model, backend="tensor_eqsat", dynamic=False, options=EAGER)
    with torch.no_grad():
        expected = _first(model(*inputs))
        got = _first(compiled(*inputs))
    assert (got - expected).abs().max().item() <= 1e-4
    reports = te_torch.backend.reports
    assert reports and all(r.fallback is None for r in reports)
    mapped = sum(r.ops_mapped for r in reports)
    opaque = sum(r.ops_opaque for r in reports)
    assert mapped > 40 and opaque < mapped // 10
    # F.scaled_dot_product_attention, as the models are loaded, is mapped to the IR's attention.
    assert not any("scaled_dot_product_attention" in r.opaque_ops for r in reports)


@pytest.mark.slow
def test_inductor_after_the_rewrite_with_the_guard():
    model, x = Attention().eval(), torch.randn(1, 8, 32)
    options = {**EAGER, "then": "inductor", "guard": True, "guard_runs": 12, "guard_blocks": 3}
    compiled = torch.compile(model, backend="tensor_eqsat", dynamic=False, options=options)
    with torch.no_grad():
        assert torch.allclose(compiled(x), model(x), atol=1e-5)
    report = te_torch.backend.report
    assert report.measured is not None and report.fallback is None
    assert report.seconds["compile"] > 0


@pytest.mark.slow
def test_optimize_module_then_inductor():
    model, x = BasicBlock().eval(), torch.randn(1, 8, 8, 8)
    fast = te_torch.optimize_module(model, (x,), te_torch.TorchConfig(**EAGER))
    compiled = torch.compile(fast, backend="inductor", dynamic=False)
    with torch.no_grad():
        assert torch.allclose(compiled(x), model(x), atol=1e-5)
