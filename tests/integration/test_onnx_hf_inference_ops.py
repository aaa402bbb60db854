"""HuggingFace MobileNet-v2 and Llama exported by torch's (dynamo) ONNX exporter import with their
ReLU6 (Clip), global pooling (ReduceMean), RMSNorm (Pow, ReduceMean, Sqrt, Reciprocal), rotary
halves (Slice) and repeated key/value heads (Expand) as IR ops, not opaque nodes, and the imported
graph computes what onnxruntime computes on the file.

Tiny random-init configurations (no downloads), the ones benchmarks/inference_rules.py uses.
Exporting takes several seconds: marked ``slow`` and ``hf``.
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

from tensor_eqsat.io.from_torch import torch_to_onnx  # noqa: E402
from tensor_eqsat.io.inputs import make_feed, model_inputs  # noqa: E402
from tensor_eqsat.io.onnx_import import import_onnx  # noqa: E402
from tensor_eqsat.io.runtime import input_specs, run_onnx  # noqa: E402
from tensor_eqsat.ir.interpreter import run  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.hf]


def _model(name):
    T = transformers
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    if name == "mobilenetv2":
        cfg = T.MobileNetV2Config(image_size=64, depth_multiplier=0.35)
        return T.MobileNetV2Model(cfg), (torch.randn(1, 3, 64, 64, generator=gen),)
    text = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128}
    cfg = T.LlamaConfig(**text, num_key_value_heads=2, use_cache=False, attn_implementation="eager")
    return T.LlamaModel(cfg), (torch.randint(0, 100, (1, 16), generator=gen),)


@pytest.mark.parametrize(
    ("name", "present", "opaque"),
    [
        ("mobilenetv2", {"clip", "mean"}, set()),
        # The token embedding lookup (a Gather of ids) is the one op left opaque.
        ("llama", {"pow", "mean", "rsqrt", "slice", "expand", "silu"}, {"Gather"}),
    ],
)
def test_hf_exports_import_their_inference_ops(name, present, opaque):
    module, inputs = _model(name)
    with contextlib.redirect_stdout(io.StringIO()):
        model = torch_to_onnx(module.eval(), inputs)
    g = import_onnx(model)
    assert present <= set(g.op_counts())
    assert {n.attr_dict()["op_type"] for n in g.nodes if n.op == "opaque"} == opaque
    feed = make_feed({s.name: s.shape for s in input_specs(model)}, model_inputs(model), seed=0)
    want = run_onnx(model, feed)
    got = run(g, feed)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
