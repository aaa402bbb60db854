"""The timing harness (tensor_eqsat.bench.arms) times the freezing arm frozen, where the old way,
``torch.compile(backend="inductor")`` per arm with ``torch._dynamo.reset()`` between the
compiles, timed default Inductor under the freezing arm's name (issue 45)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tensor_eqsat.bench import arms as harness  # noqa: E402

pytestmark = pytest.mark.slow  # Inductor compiles of a small CNN (about 10-30 s here)


def _model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 1)
    ).eval()
    return model, (torch.randn(1, 3, 12, 12),)


def _frozen(fn, model, x, expected):
    """True when ``fn`` holds the weights as constants: a weight changed in place is not seen."""
    with torch.no_grad():
        model[3].weight.mul_(2.0)
        try:
            return torch.allclose(fn(x), expected, rtol=1e-4, atol=1e-5)
        finally:
            model[3].weight.div_(2.0)


def _old_way(model, inputs):
    """The benchmark's former arms: one model, a reset before each compile, "inductor" by name."""
    import torch._inductor.config as inductor_config

    fns = {}
    for label, freezing in (("inductor", False), ("freezing", True), ("inductor_again", False)):
        torch._dynamo.reset()
        with inductor_config.patch(freezing=freezing):
            fns[label] = torch.compile(model, backend="inductor", dynamic=False)
            fns[label](*inputs)
    return fns


def test_the_old_way_times_default_inductor_for_freezing_and_the_harness_freezes():
    import torch._inductor.freezing as freezing

    model, inputs = _model()
    with torch.no_grad():
        expected = model(*inputs)
        old = _old_way(model, inputs)
        calls = []
        real = freezing.freeze
        freezing.freeze = lambda *a: calls.append(1) or real(*a)
        try:
            for label in ("inductor", "freezing"):  # the order the old timing called them first
                old[label](*inputs)
        finally:
            freezing.freeze = real
        assert calls == []  # nothing frozen when the arms ran ...
        assert not _frozen(old["freezing"], model, inputs[0], expected)  # ... and the weights are inputs

        arms = harness.compile_arms(model, inputs, harness.standard_arms(None))
        timing = harness.time_arms(arms, inputs, runs=4, blocks=2)
        said = harness.verify_arms(arms)
    assert set(timing.ms) == {"eager", "inductor", "freezing", "inductor_again"}
    assert said["freezing"].startswith("1 graph(s), froze 1") and said["inductor"] == "1 graph(s), froze 0"
    assert _frozen(arms["freezing"].fn, model, inputs[0], expected)
    assert not _frozen(arms["inductor"].fn, model, inputs[0], expected)
    for c in arms.values():
        assert torch.allclose(c.output, expected, rtol=1e-4, atol=1e-5)
    torch._dynamo.reset()


def test_a_recompile_after_the_compiles_is_caught():
    model, inputs = _model()
    with torch.no_grad():
        arms = harness.compile_arms(model, inputs, harness.standard_arms(None, again=False))
        torch._dynamo.reset()  # what the old benchmark did between arms: the next call recompiles
        arms["freezing"].fn(*inputs)
    with pytest.raises(harness.ArmMismatch, match="freezing: compiled again while timed"):
        harness.verify_arms(arms)
    torch._dynamo.reset()
