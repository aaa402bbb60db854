"""benchmarks/real_models.py's freezing arm is Inductor with freezing as a user switches it on
(``torch._inductor.config.freezing = True`` while Dynamo traces): the weights are constants of
the compiled graph. ``torch.compile(options={"freezing": True})``, which the arm used before,
leaves them graph inputs (Dynamo lifts them before the option applies), so the arm timed
default Inductor."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]


def _real_models():
    sys.path.insert(0, str(ROOT / "benchmarks"))  # (it imports real_models_sizing beside it)
    try:
        spec = importlib.util.spec_from_file_location("real_models", ROOT / "benchmarks" / "real_models.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules.setdefault("real_models", module)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return module


def _outputs_after_a_weight_change(options):
    rm = _real_models()
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 1)
    ).eval()
    x = torch.randn(1, 3, 12, 12)
    with torch.no_grad():
        expected = model(x)
        torch._dynamo.reset()
        fn, first = rm.compile_arm(model, (x,), "inductor", options)
        assert torch.allclose(first, expected, rtol=1e-4, atol=1e-5)
        model[3].weight.mul_(2.0)  # in place, no new tensor: a graph input sees it, a constant not
        after = fn(x)
    torch._dynamo.reset()
    return expected, after


@pytest.mark.slow  # two Inductor compiles of a small CNN (about 10-20 s here)
def test_the_freezing_arm_compiles_the_weights_as_constants():
    rm = _real_models()
    expected, after = _outputs_after_a_weight_change(rm.FREEZING)
    assert torch.allclose(after, expected, rtol=1e-4, atol=1e-5)  # frozen: the old weights
    _, unfrozen = _outputs_after_a_weight_change({"freezing": True})
    assert not torch.allclose(unfrozen, expected)  # the option alone: weights still read per call
