"""Transformers as users export them: HuggingFace BERT, GPT-2, DistilBERT and ViT built from
tiny random-init configurations (no downloads), and plain-PyTorch blocks (hand-written attention
with separate Q/K/V projections, ``nn.MultiheadAttention``, ``nn.TransformerEncoderLayer``).

Each model is exported with ``torch.onnx.export`` (the dynamo exporter, the one torch 2.13 runs
for HuggingFace models: the TorchScript exporter fails on their keyword-only forward
arguments), imported, optimized at a small budget, exported again (names and element types kept)
and checked in onnxruntime against the exported original on valid inputs (token ids within the
embedding table, masks of 0/1).

These tests need the ``hf`` extra (``pip install 'tensor-eqsat[hf]'``) and take several seconds
each (exporting dominates), so they are marked ``slow``; run them with
``pytest -m hf tests/integration/test_hf_exports.py``.
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

from tensor_eqsat.io.equivalence import export_verified, verify  # noqa: E402
from tensor_eqsat.io.inputs import make_feed, model_inputs  # noqa: E402
from tensor_eqsat.io.onnx_import import import_onnx  # noqa: E402
from tensor_eqsat.io.runtime import input_specs, run_onnx  # noqa: E402
from tensor_eqsat.optimize import optimize  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.hf]

VOCAB = 97
SEQ = 8


def export(module, args, path, input_names, output_names=None):
    """torch.onnx.export with the dynamo exporter, quietly (it reports progress on stdout)."""
    module.eval()
    with contextlib.redirect_stdout(io.StringIO()), torch.no_grad():
        torch.onnx.export(
            module,
            args,
            str(path),
            input_names=input_names,
            output_names=output_names,
            dynamo=True,
            opset_version=18,
        )
    return onnx.load(path)


def check_round_trip(
    tmp_path,
    model,
    *,
    min_gain: float | None = 0.0,
    rules: str = "default",
    cost_model: str = "roofline:a100",
):
    """Import, optimize (saturate, small node limit), export, and compare in onnxruntime."""
    graph = import_onnx(model)
    assert graph.op_counts().get("matmul", 0) > 0, graph.op_counts()
    result = optimize(graph, search="saturate", node_limit=1500, cost_model=cost_model, rules=rules)
    assert result.optimized_cost_ms <= result.original_cost_ms
    if min_gain is not None:
        assert result.speedup_pct > min_gain, (result.speedup_pct, result.rule_counts)
    out = tmp_path / "optimized.onnx"
    report = export_verified(model, result.graph, out)
    assert report is not None and report.ok, report and report.summary()
    optimized = onnx.load(out)
    # Input names, element types and shapes, and output names, are the original's.
    assert [(s.name, s.shape, s.elem_type) for s in input_specs(optimized)] == [
        (s.name, s.shape, s.elem_type) for s in input_specs(model)
    ]
    assert [o.name for o in optimized.graph.output] == [o.name for o in model.graph.output]
    # Valid inputs: ids below the embedding table's size; and an independent check on them.
    specs = {s.name: s.shape for s in input_specs(model)}
    infos = model_inputs(model)
    feed = make_feed(specs, infos, seed=7)
    for name, info in infos.items():
        if info.bound is not None:
            assert feed[name].min() >= 0 and feed[name].max() < info.bound
    want = run_onnx(model, feed)
    got = run_onnx(optimized, feed)
    for w, g in zip(want, got, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-4 * max(1.0, float(np.abs(w).max())))
    assert verify(model, optimized, seed=3).ok
    return result


def _ids(batch=1, seq=SEQ):
    return torch.randint(0, VOCAB, (batch, seq), generator=torch.Generator().manual_seed(0))


def test_hf_bert(tmp_path):
    torch.manual_seed(0)
    cfg = transformers.BertConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
    )
    ids = _ids()
    mask = torch.ones_like(ids)
    model = export(
        transformers.BertModel(cfg), (ids, mask), tmp_path / "bert.onnx", ["input_ids", "attention_mask"]
    )
    infos = model_inputs(model)
    assert infos["input_ids"].elem_type == onnx.TensorProto.INT64 and infos["input_ids"].bound == VOCAB
    assert infos["attention_mask"].bound is None  # a mask: 0/1
    result = check_round_trip(tmp_path, model)
    assert 128 in result.rule_counts  # Q/K/V projections of a rank-3 activation merged


def test_hf_gpt2(tmp_path):
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(
        vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=2, n_positions=32, use_cache=False
    )
    model = export(transformers.GPT2Model(cfg), (_ids(),), tmp_path / "gpt2.onnx", ["input_ids"])
    assert model_inputs(model)["input_ids"].bound == VOCAB
    # GPT-2's attention is one packed Conv1D (c_attn): nothing left to merge there, so the paper's
    # rules need only give a correct result.
    check_round_trip(tmp_path, model, min_gain=None)
    # The scalar-scale rules fold the two score scales into one: a gain on both analytic devices.
    for cost_model in ("roofline:a100", "roofline:cpu"):
        result = check_round_trip(tmp_path, model, rules="taso-transformer", cost_model=cost_model)
        assert {200, 201, 202, 203} & set(result.rule_counts), result.rule_counts


def test_hf_distilbert(tmp_path):
    torch.manual_seed(0)
    cfg = transformers.DistilBertConfig(
        vocab_size=VOCAB, dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=32
    )
    ids = _ids()
    mask = torch.ones_like(ids)
    model = export(
        transformers.DistilBertModel(cfg),
        (ids, mask),
        tmp_path / "distilbert.onnx",
        ["input_ids", "attention_mask"],
    )
    check_round_trip(tmp_path, model)


def test_hf_vit(tmp_path):
    torch.manual_seed(0)
    cfg = transformers.ViTConfig(
        image_size=32,
        patch_size=8,
        num_channels=3,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
    )
    pixels = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    model = export(transformers.ViTModel(cfg), (pixels,), tmp_path / "vit.onnx", ["pixel_values"])
    check_round_trip(tmp_path, model)


class PreLnBlock(torch.nn.Module):
    """A GPT-2-style pre-LN decoder block with separate Q/K/V projections (causal attention)."""

    def __init__(self, d: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.q = torch.nn.Linear(d, d)
        self.k = torch.nn.Linear(d, d)
        self.v = torch.nn.Linear(d, d)
        self.o = torch.nn.Linear(d, d)
        self.fc1 = torch.nn.Linear(d, 4 * d)
        self.fc2 = torch.nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        h = self.ln1(x)

        def split(z):
            return z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)

        q, k, v = split(self.q(h)), split(self.k(h)), split(self.v(h))
        att = (q @ k.transpose(-2, -1)) / (d // self.heads) ** 0.5
        att = att + torch.triu(torch.full((t, t), -1e4), diagonal=1)
        y = (att.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.o(y)
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


def test_hand_written_attention_with_separate_qkv(tmp_path):
    torch.manual_seed(0)
    x = torch.randn(1, 16, 64, generator=torch.Generator().manual_seed(0))
    model = export(PreLnBlock(), (x,), tmp_path / "block.onnx", ["x"])
    result = check_round_trip(tmp_path, model)
    assert 128 in result.rule_counts


def test_nn_multihead_attention(tmp_path):
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(32, 4, batch_first=True)

    class SelfAttention(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mha = mha

        def forward(self, x):
            return self.mha(x, x, x, need_weights=False)[0]

    x = torch.randn(1, 8, 32, generator=torch.Generator().manual_seed(0))
    model = export(SelfAttention(), (x,), tmp_path / "mha.onnx", ["x"])
    # The input projection is already one packed matmul: a correct result is what is required.
    check_round_trip(tmp_path, model, min_gain=None)


def test_nn_transformer_encoder_layer(tmp_path):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, batch_first=True, dropout=0.0)
    x = torch.randn(1, 8, 32, generator=torch.Generator().manual_seed(0))
    model = export(layer, (x,), tmp_path / "encoder.onnx", ["x"])
    check_round_trip(tmp_path, model, min_gain=None)
