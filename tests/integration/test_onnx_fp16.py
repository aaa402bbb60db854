"""Float16 ONNX models exported from PyTorch (``model.half()`` then ``torch.onnx.export``) import
in float16 without opaque nodes, and ``deliver`` optimizes them for onnxruntime's CPU provider
with outputs within the float16 tolerance of the float32 PyTorch model."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import tensor_eqsat  # noqa: E402
from tensor_eqsat.deliver import DeliveryConfig  # noqa: E402
from tensor_eqsat.io.onnx_import import import_onnx  # noqa: E402
from tensor_eqsat.io.runtime import run_onnx  # noqa: E402
from tensor_eqsat.ir.dtypes import tolerance  # noqa: E402

pytestmark = pytest.mark.slow


class ConvNet(torch.nn.Module):
    """A stride-2 conv with PyTorch's padding and ReLU6, then two 1x1 convs reading its output."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 32, 3, stride=2, padding=1)
        self.c2 = torch.nn.Conv2d(32, 32, 1, bias=False)
        self.c3 = torch.nn.Conv2d(32, 32, 1, bias=False)

    def forward(self, x):
        y = torch.nn.functional.relu6(self.c1(x))
        return torch.relu(self.c2(y)) + torch.relu(self.c3(y))


class Block(torch.nn.Module):
    """Single-head attention and a SiLU MLP, as in a small transformer block."""

    def __init__(self, d: int = 16) -> None:
        super().__init__()
        self.q, self.k, self.v = (torch.nn.Linear(d, d) for _ in range(3))
        self.up, self.down = torch.nn.Linear(d, 32), torch.nn.Linear(32, d)

    def forward(self, x):
        att = torch.softmax(self.q(x) @ self.k(x).transpose(-1, -2) / 4.0, -1) @ self.v(x)
        return self.down(torch.nn.functional.silu(self.up(x + att)))


def _export_half(module, x, path):
    torch.manual_seed(0)
    module = module.half().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (x.half(),), str(path), dynamo=False, opset_version=17)
    return module


@pytest.mark.parametrize(
    ("make", "shape", "ops", "rewritten"),
    [
        # (the search finds no profitable rewrite of this one, in float32 either)
        (ConvNet, (1, 3, 32, 32), {"conv2d", "pad", "clip", "ewadd"}, False),
        (Block, (1, 4, 16), {"matmul", "ewadd", "transpose", "sdiv", "softmax", "silu"}, True),
    ],
)
def test_fp16_torch_export_imports_and_delivers_within_fp16_tolerance(tmp_path, make, shape, ops, rewritten):
    torch.manual_seed(0)
    module = make()
    x = torch.randn(*shape)
    path = tmp_path / "m.onnx"
    module = _export_half(module, x, path)
    g = import_onnx(path)
    assert set(g.op_counts()) == ops  # nothing opaque
    assert {n.dtypes[0] for n in g.nodes} == {"float16"}

    out = tmp_path / "opt.onnx"
    d = tensor_eqsat.deliver(
        path,
        target="ort-cpu",
        output=out,
        delivery=DeliveryConfig(guard=False),
        search="saturate",
        node_limit=300,
        final_extractor="greedy-dag",
    )
    assert d.ok and d.verify.ok
    if rewritten:
        assert d.result is not None and d.result.speedup_pct > 0  # the search found a rewrite
        assert d.graph.op_counts() != g.op_counts()  # ... and it is what was handed back
    written = onnx.load(str(out))
    assert written.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
    name = written.graph.input[0].name
    got = run_onnx(out, {name: x.half().numpy()})[0]
    assert got.dtype == np.float16
    with torch.no_grad():
        ref = module.float()(x).numpy()
    tol = tolerance("fp16")
    err = np.abs(got.astype(np.float32) - ref)
    assert float(err.max()) <= tol.atol + tol.rtol * float(np.abs(ref).max())
