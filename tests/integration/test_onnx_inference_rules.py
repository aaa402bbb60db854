"""The inference rules through ONNX: models exported by torch's exporter, optimized as
``tensor-eqsat optimize model.onnx`` does it (the ``taso-inference`` set, the onnxruntime target,
the numeric check and the never-slower guard).

A CNN exported with its batch norms kept (Conv with bias -> BatchNormalization -> Relu, and two
biased 1x1 convs of one input) gets the batch norms folded (rules 302 then 300); an attention
block (biased Q/K/V Linear layers, softmax of scaled scores) gets its projections merged with
their biases (rule 310) and its attention fused (rules 320-325). The guard then keeps whatever
onnxruntime runs fastest: the model handed back is never slower beyond the noise.
"""

from __future__ import annotations

import contextlib
import io
import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

from torch import nn  # noqa: E402

from tensor_eqsat.deliver import DeliveryConfig, deliver  # noqa: E402
from tensor_eqsat.io.onnx_common import load_model  # noqa: E402
from tensor_eqsat.io.onnx_import import import_onnx  # noqa: E402

pytestmark = pytest.mark.slow  # exports, then the guard times onnxruntime sessions


class BnCnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, 8, 3, padding=1, bias=True), nn.BatchNorm2d(8)
        self.c2, self.b2 = nn.Conv2d(8, 8, 1, bias=False), nn.BatchNorm2d(8)
        self.c3, self.b3 = nn.Conv2d(8, 16, 1, bias=False), nn.BatchNorm2d(16)
        with torch.no_grad():
            for b in (self.b1, self.b2, self.b3):
                b.running_mean.uniform_(-1, 1)
                b.running_var.uniform_(0.5, 2)
                b.weight.uniform_(0.5, 2)
                b.bias.uniform_(-1, 1)

    def forward(self, x):
        h = torch.relu(self.b1(self.c1(x)))
        return torch.cat([torch.relu(self.b2(self.c2(h))), torch.relu(self.b3(self.c3(h)))], 1)


class AttentionBlock(nn.Module):
    def __init__(self, dim: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))

    def forward(self, x):
        b, s, d = x.shape
        h, hd = self.heads, d // self.heads
        q, k, v = (p(x).view(b, s, h, hd).transpose(1, 2) for p in (self.q, self.k, self.v))
        att = torch.softmax(q @ k.transpose(-2, -1) * hd**-0.5, dim=-1)
        return self.o((att @ v).transpose(1, 2).reshape(b, s, d))


def _export(module: nn.Module, x, path, **kw) -> None:
    torch.manual_seed(0)
    module.eval()
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (x,), str(path), input_names=["x"], output_names=["y"], **kw)


def _check(d) -> None:
    assert d.ok and d.verify is not None and d.verify.ok  # equal outputs to the user's file
    assert d.guard is not None
    # never slower: either the original is handed back, or a candidate won beyond the noise
    assert d.guard.kept_original or d.guard.measured.speedup_pct > d.guard.measured.noise_pct


def test_batch_norms_of_an_exported_cnn_are_folded(tmp_path):
    path = tmp_path / "cnn.onnx"
    torch.manual_seed(0)
    # TrainingMode.PRESERVE keeps BatchNormalization in the file (torch folds it by default).
    _export(BnCnn(), torch.randn(1, 3, 16, 16), path, dynamo=False, training=torch.onnx.TrainingMode.PRESERVE)
    ops = import_onnx(load_model(path)).op_counts()
    assert ops["batchnorm"] == 3 and ops["ewadd"] == 1  # the first conv's bias
    # Priced for onnxruntime, which folds batch norms itself (the ORT model prices them at 0),
    # the folds are found but gain nothing there; priced for an H200 in eager PyTorch they are kept.
    kw = dict(time_budget=20, seed=0, search="saturate", k_multi=2, delivery=DeliveryConfig(guard_runs=20))
    d = deliver(path, **kw)
    assert d.config.rules == "taso-inference"
    assert {300, 302} <= set(d.result.rule_counts)
    _check(d)
    d = deliver(path, cost_model="recorded:h200", **kw)
    # folded, except where TASO's rule 137 merged the two 1x1 convs first (a batch norm of a
    # split conv output is no conv's batch norm any more)
    assert d.result.graph.op_counts().get("batchnorm", 0) < 3
    assert d.result.speedup_pct > 0
    _check(d)


def test_an_exported_attention_block_merges_its_projections_and_fuses_attention(tmp_path):
    path = tmp_path / "att.onnx"
    _export(AttentionBlock(), torch.randn(1, 8, 32), path, dynamo=True)
    d = deliver(
        path,
        time_budget=20,
        seed=0,
        search="saturate",
        k_multi=2,
        cost_model="recorded:h200",
        delivery=DeliveryConfig(guard_runs=20),
    )
    applied = set(d.result.rule_counts)
    assert 310 in applied and applied & set(range(320, 326))
    ops = d.result.graph.op_counts()
    assert ops.get("attention") == 1 and "softmax" not in ops
    _check(d)
