"""``tensor-eqsat optimize bert.onnx`` on an export with dynamic batch and sequence axes: no
``--input-shape``, the written model keeps both dim_params, and onnxruntime computes the original's
outputs with it at shapes other than the representative one.

A tiny random-init HuggingFace BERT exported with the TorchScript exporter (``dynamo=False``,
``dynamic_axes``: what runs offline with torch 2.13), whose Shape -> Gather -> Unsqueeze -> Concat
-> Reshape chains must fold into symbolic reshape targets for the attention heads. Needs the ``hf``
extra and takes tens of seconds (export, import with shape probing, search, check), so it is marked
``slow`` and ``hf``: ``pytest -m hf tests/integration/test_onnx_symbolic_cli.py``.
"""

from __future__ import annotations

import contextlib
import io
import json
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from tensor_eqsat.cli import main  # noqa: E402
from tensor_eqsat.io.onnx_import import import_onnx  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.hf]

VOCAB = 97


class _Outputs(torch.nn.Module):
    """BertModel with positional inputs and tuple outputs (the TorchScript exporter's form)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids, mask):
        out = self.model(input_ids=ids, attention_mask=mask)
        return out.last_hidden_state, out.pooler_output


def _export_bert(path):
    cfg = transformers.BertConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    model = _Outputs(transformers.BertModel(cfg)).eval()
    ids = torch.randint(0, VOCAB, (2, 16))
    axes = {0: "batch", 1: "seq"}
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            (ids, torch.ones_like(ids)),
            str(path),
            input_names=["input_ids", "attention_mask"],
            output_names=["last_hidden_state", "pooler_output"],
            dynamic_axes={
                "input_ids": axes,
                "attention_mask": axes,
                "last_hidden_state": axes,
                "pooler_output": {0: "batch"},
            },
            dynamo=False,
            opset_version=17,
        )


def _dims(vi):
    return [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]


def test_dynamic_bert_is_optimized_symbolically_and_runs_at_other_shapes(tmp_path, capsys):
    src, out = tmp_path / "bert.onnx", tmp_path / "opt.onnx"
    _export_bert(src)
    graph = import_onnx(src)
    assert sorted(graph.symbols()) == ["batch", "seq"]
    # The heads' reshape targets are symbolic (the Shape chains folded), not opaque.
    targets = [n.attr_dict()["shape"] for n in graph.nodes if n.op == "reshape"]
    assert any(len(t) == 4 and [str(d) for d in t[:2]] == ["batch", "seq"] for t in targets), targets
    rc = main(
        [
            "optimize",
            str(src),
            "--target",
            "a100",
            "--search",
            "saturate",
            "--node-limit",
            "1500",
            "--shapes",
            "batch=2,seq=24;batch=1,seq=5;batch=3,seq=40;batch=2,seq=64",
            "-o",
            str(out),
            "--json",
        ]
    )
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    assert data["verify"]["ok"] is True and data["verify"]["trials"] == 4
    assert any("symbolic dims batch, seq kept" in note for note in data["delivery"]["notes"])
    assert data["optimized_cost_ms"] < data["original_cost_ms"]
    written = onnx.load(out)
    assert [_dims(i) for i in written.graph.input] == [["batch", "seq"], ["batch", "seq"]]
    assert _dims(written.graph.output[0]) == ["batch", "seq", 64]
    a, b = ort.InferenceSession(str(src)), ort.InferenceSession(str(out))
    for k, (batch, seq) in enumerate([(1, 7), (3, 19), (2, 50)]):
        rng = np.random.default_rng(k)
        feed = {
            "input_ids": rng.integers(0, VOCAB, (batch, seq)).astype(np.int64),
            "attention_mask": (rng.random((batch, seq)) > 0.2).astype(np.int64),
        }
        for got, want in zip(b.run(None, feed), a.run(None, feed), strict=True):
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)
