"""The benchmarks' freezing arm (tensor_eqsat.bench.arms, used by benchmarks/real_models.py) is
Inductor with freezing as a user switches it on (``torch._inductor.config.freezing = True``
while Dynamo traces): the weights are constants of the compiled graph.
``torch.compile(options={"freezing": True})`` leaves them graph inputs (Dynamo lifts them before
the option applies), so an arm compiled that way times default Inductor."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tensor_eqsat.bench import arms as harness  # noqa: E402


def _model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 1)
    ).eval()
    return model, torch.randn(1, 3, 12, 12)


def _after_a_weight_change(compile_fn):
    model, x = _model()
    with torch.no_grad():
        expected = model(x)
        torch._dynamo.reset()
        fn, first = compile_fn(model, x)
        assert torch.allclose(first, expected, rtol=1e-4, atol=1e-5)
        model[3].weight.mul_(2.0)  # in place, no new tensor: a graph input sees it, a constant not
        after = fn(x)
    torch._dynamo.reset()
    return expected, after


def _arm(model, x):
    c = harness.compile_arm(model, (x,), harness.Arm("freezing", harness.Kind.FREEZING))
    assert harness.verify_arms({"freezing": c})["freezing"].startswith("1 graph(s), froze 1")
    return c.fn, c.output


def _option(model, x):
    fn = torch.compile(model, backend="inductor", dynamic=False, options={"freezing": True})
    return fn, fn(x)


@pytest.mark.slow  # two Inductor compiles of a small CNN (about 10-20 s here)
def test_the_freezing_arm_compiles_the_weights_as_constants():
    expected, after = _after_a_weight_change(_arm)
    assert torch.allclose(after, expected, rtol=1e-4, atol=1e-5)  # frozen: the old weights
    _, unfrozen = _after_a_weight_change(_option)
    assert not torch.allclose(unfrozen, expected)  # the option alone: weights still read per call
