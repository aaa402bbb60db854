"""The backend's check in float32: the rewritten graph is judged against the original run in
float64 by the original's own float32 error (io/accuracy.py). A correct conv + batch-norm fold
that the fixed ``rtol`` 1e-4 refused passes (a calibrated ResNet-50's was refused so); small
planted errors the fixed ``rtol`` let through are caught; where no float64 reference can be run,
the fixed tolerance applies and the verdict says why."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tensor_eqsat.io import accuracy  # noqa: E402
from tensor_eqsat.torch.delivery import check_rewrite  # noqa: E402
from tensor_eqsat.torch.reference import float64_bytes, float64_reference  # noqa: E402

RTOL, ATOL = 1e-4, 1e-5  # TorchConfig's defaults
SHIFT = 1e4
"""A convolution's bias that the batch norm after it takes away again (its running mean): the
float32 original rounds the sum at 1e4 (ulp 0.001), the fold does not."""


def conv_bn() -> torch.nn.Sequential:
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 8, 3, padding=1)
    bn = torch.nn.BatchNorm2d(8)
    with torch.no_grad():
        conv.bias.fill_(SHIFT)
        bn.running_mean.fill_(SHIFT)
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.5, 0.5)
    return torch.nn.Sequential(conv, bn).eval()


def fx(module: torch.nn.Module) -> torch.fx.GraphModule:
    return torch.fx.symbolic_trace(module)


class Planted(torch.nn.Module):
    """``module``'s output with ``add`` added and times ``scale``: a planted wrong rewrite."""

    def __init__(self, module: torch.nn.Module, add: float = 0.0, scale: float = 1.0) -> None:
        super().__init__()
        self.module, self.add, self.scale = module, add, scale

    def forward(self, x):
        return (self.module(x) + self.add) * self.scale


X = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(1))


def test_a_correct_batch_norm_fold_the_fixed_tolerance_refused_passes_against_float64():
    model = conv_bn()
    fold = torch.nn.utils.fusion.fuse_conv_bn_eval(model[0], model[1])
    checked = check_rewrite(fx(model), fx(fold), [X], RTOL, ATOL)
    assert checked.ok, checked.describe()
    assert checked.verdict.reference == "float64" and checked.verdict.own
    assert "vs the float64 reference" in checked.describe()
    # The fold is off the float32 original by more than rtol 1e-4 of the output's scale ...
    with torch.no_grad():
        orig, folded = model(X).double(), fold(X).double()
        exact = float64_reference(fx(model), [X])
    assert (orig - folded).abs().max() > RTOL * exact.abs().max() + ATOL
    # ... and closer to float64 than the original is.
    assert checked.own_error is not None and checked.max_diff < checked.own_error


@pytest.mark.parametrize(
    "add, scale",
    [(2e-4, 1.0), (0.0, 1 + 1e-3), (0.0, 1 + 2e-5)],
    ids=["added-2e-4", "scaled-1e-3", "scaled-2e-5"],
)
def test_small_planted_float32_errors_are_caught(add, scale):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU()).eval()
    checked = check_rewrite(fx(model), fx(Planted(model, add, scale)), [X], RTOL, ATOL)
    assert not checked.ok, checked.describe()
    assert "float64 reference" in checked.describe()
    assert "x the original's own float32 error" in checked.what


@pytest.mark.parametrize("add, scale", [(2e-4, 1.0), (0.0, 1 + 2e-5)], ids=["added-2e-4", "scaled-2e-5"])
def test_the_fixed_tolerance_let_those_planted_errors_through(monkeypatch, add, scale):
    # As if the machine had 1 kB of memory: no float64 reference, the fixed rtol 1e-4.
    monkeypatch.setattr(accuracy, "_available", lambda device: 1000)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU()).eval()
    checked = check_rewrite(fx(model), fx(Planted(model, add, scale)), [X], RTOL, ATOL)
    assert checked.ok
    assert checked.verdict.reference == "float32" and not checked.verdict.own
    assert "no float64 reference" in checked.describe() and "of memory" in checked.describe()


def test_a_float64_reference_holds_a_float64_copy_of_weights_and_values():
    model = torch.nn.Linear(4, 3)
    # weight 12, bias 3, the input 2x4 (symbolic_trace records no values)
    assert float64_bytes(fx(model), [torch.ones(2, 4)]) == 8 * (12 + 3 + 8)
    out = float64_reference(fx(model), [torch.ones(2, 4)])
    assert out.dtype == torch.float64
    want = torch.ones(2, 4).double() @ model.weight.double().T + model.bias.double()
    assert torch.equal(out, want)
