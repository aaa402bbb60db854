"""The inference rules through the PyTorch backend: the FX import of conv -> batch norm -> ReLU
and of eager attention, the rewrite, and the rebuilt module (folded weights as constants,
``F.scaled_dot_product_attention`` for the fused attention)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch_models import Attention, BasicBlock, fresh  # noqa: E402, F401 (fresh: autouse)

import tensor_eqsat.torch as te_torch  # noqa: E402

PRICED = {
    "then": "eager",
    "cost_model": "recorded:h200",
    "search": {"search": "saturate", "node_limit": 1500, "k_multi": 2},
    "guard": False,
}


def _randomize_bn(model):
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)
            m.weight.data.uniform_(0.5, 2)
            m.bias.data.uniform_(-1, 1)
    return model.eval()


def test_batch_norm_is_folded_into_the_conv_before_it():
    model = _randomize_bn(BasicBlock(8))
    x = torch.randn(2, 8, 8, 8)
    fast = te_torch.optimize_module(model, (x,), te_torch.TorchConfig(**PRICED))
    report = fast.report
    assert report.rules_applied.get("bn-fold-conv", 0) >= 1, report.rules_applied
    assert report.predicted_gain_pct >= 0
    with torch.no_grad():
        torch.testing.assert_close(fast(x), model(x), rtol=1e-4, atol=1e-4)


def test_eager_attention_runs_as_one_scaled_dot_product_attention():
    model = Attention(32, 4).eval()
    x = torch.randn(2, 8, 32)
    fast = te_torch.optimize_module(model, (x,), te_torch.TorchConfig(**PRICED))
    rules = fast.report.rules_applied
    assert any(name.startswith("attention-") for name in rules), rules
    assert rules.get("matmul-bias-concat-split-shared-lhs", 0) >= 1, rules  # Q, K, V with biases
    assert fast.report.predicted_gain_pct > 5
    code = fast.fn.fn.code  # the rebuilt GraphModule (then="eager")
    assert code.count("scaled_dot_product_attention(") == 1 and "softmax" not in code
    assert code.count("torch.matmul(") == 2  # Q, K and V in one product, then the output projection
    with torch.no_grad():
        torch.testing.assert_close(fast(x), model(x), rtol=1e-4, atol=1e-4)
