"""PyTorch modules through ONNX: import, export and verify against torch itself.

A conv block with a residual and a transformer block (layernorm, attention softmax, GELU) are
exported by torch.onnx, imported, re-exported, and checked three ways: the imported Graph in the
interpreter against torch's own output, the re-exported model against the exported one, and the
Graph in PyTorch eager.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxscript")

from torch import nn  # noqa: E402

from tensor_eqsat.io.equivalence import verify  # noqa: E402
from tensor_eqsat.io.from_torch import from_torch, torch_to_onnx  # noqa: E402
from tensor_eqsat.io.onnx_export import export_onnx  # noqa: E402
from tensor_eqsat.io.onnx_import import import_onnx  # noqa: E402
from tensor_eqsat.io.torch_exec import run_torch  # noqa: E402
from tensor_eqsat.ir.interpreter import random_input, run  # noqa: E402

pytestmark = pytest.mark.slow  # torch.onnx's dynamo exporter takes seconds per module


class ConvBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(8, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)  # PyTorch padding: an explicit pad
        self.c3 = nn.Conv2d(16, 16, 1, bias=False)

    def forward(self, x):
        y = torch.relu(self.bn(self.c1(x))) + x
        y = torch.relu(self.c3(self.c2(y)))
        return nn.functional.max_pool2d(y, 2).flatten(1)


class TransformerBlock(nn.Module):
    def __init__(self, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.att = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        y = self.ln1(x)
        x = x + self.att(y, y, y, need_weights=False)[0]
        return x + self.ff(self.ln2(x))


def _randomize(module: nn.Module) -> nn.Module:
    torch.manual_seed(0)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.1 * torch.randn_like(p))
        for b in module.buffers():
            if b.dtype.is_floating_point:
                b.copy_(0.5 + torch.rand_like(b))
    return module.eval()


@pytest.mark.parametrize(
    ("make", "shape", "expect_ops"),
    [
        (ConvBlock, (1, 8, 12, 12), {"conv2d", "ewadd", "relu", "poolmax", "reshape", "pad"}),
        (TransformerBlock, (2, 5, 32), {"layernorm", "matmul", "softmax", "gelu", "ewadd"}),
    ],
)
def test_torch_module_imports_exports_and_verifies(make, shape, expect_ops, tmp_path):
    module = _randomize(make())
    model = torch_to_onnx(module, (torch.zeros(shape),))
    g = import_onnx(model)
    assert expect_ops <= set(g.op_counts())
    assert "opaque" not in g.op_counts()  # everything in them is modelled
    name = g.name_of(g.inputs()[0].id)
    x = random_input(name, shape, 0)
    with torch.no_grad():
        want = module(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(run(g, {name: x})[0], want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(run_torch(g, {name: x})[0], want, rtol=1e-4, atol=1e-4)
    path = tmp_path / "round_trip.onnx"
    export_onnx(g, path)
    report = verify(model, path, trials=2)
    assert report.ok, report.summary()
    assert verify(model, g).ok


def test_from_torch_gives_the_graph_and_restores_training_mode():
    module = _randomize(ConvBlock()).train()
    g = from_torch(module, torch.zeros(1, 8, 12, 12), input_names=["image"])
    assert module.training
    assert [g.name_of(n.id) for n in g.inputs()] == ["image"]
    assert "batchnorm" not in g.op_counts()  # exported in eval mode: folded into the conv


def test_keep_batchnorm_exports_the_batch_norm_and_computes_the_same():
    module = _randomize(ConvBlock())
    x = random_input("x", (1, 8, 12, 12), 0)
    with torch.no_grad():
        want = module(torch.from_numpy(x)).numpy()
    kept = torch_to_onnx(module, (torch.from_numpy(x),), input_names=["x"], keep_batchnorm=True)
    folded = torch_to_onnx(module, (torch.from_numpy(x),), input_names=["x"])
    assert [n.op_type for n in kept.graph.node].count("BatchNormalization") == 1
    assert "BatchNormalization" not in {n.op_type for n in folded.graph.node}
    g = import_onnx(kept)
    assert g.op_counts().get("batchnorm") == 1
    np.testing.assert_allclose(run(g, {"x": x})[0], want, rtol=1e-4, atol=1e-4)
    assert verify(kept, folded, trials=2).ok
