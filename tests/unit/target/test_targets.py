"""Targets: names, cost models, defaults and whether they can be measured here."""

from __future__ import annotations

import pytest

from tensor_eqsat.cost import parse_cost_model
from tensor_eqsat.target import TARGETS, TargetError, default_target, get_target, target_names


def test_every_target_names_a_cost_model_that_parses():
    assert set(target_names()) == {
        "ort-cpu",
        "torch-cpu",
        "cuda",
        "cpu-roofline",
        "h200",
        "a100",
        "p100",
        "h100",
    }
    for t in TARGETS.values():
        if t.name == "cuda" and not t.measurable:
            continue  # measured:cuda cannot be built without a GPU
        if t.backend == "torch":
            pytest.importorskip("torch")
        options = {"persistent": False} if t.cost_model.startswith("measured") else {}
        assert parse_cost_model(t.cost_model, **options).spec == t.cost_model


def test_defaults_onnx_runs_in_ort_graphs_on_this_machines_gpu_target():
    from tensor_eqsat.target.targets import default_gpu_target

    assert default_target("model.onnx").name == "ort-cpu"
    assert default_target("M.ONNX").name == "ort-cpu"
    gpu = default_gpu_target()
    assert gpu in ("cuda", "h200")
    assert default_target("graph.json").name == gpu
    assert default_target("resnet50").name == gpu
    assert default_target(None).name == gpu


def test_analytic_gpu_targets_are_not_measurable_here():
    for name in ("a100", "p100", "h100"):
        t = get_target(name)
        assert not t.measurable and "analytic" in (t.unavailable() or "")
    pytest.importorskip("onnxruntime")
    assert get_target("ort-cpu").measurable and get_target("cpu-roofline").measurable


def test_unknown_target_lists_the_known_ones():
    with pytest.raises(TargetError, match=r"unknown target 'tpu'.*ort-cpu"):
        get_target("tpu")


def test_the_h200_target_prices_with_the_recorded_profile_and_is_not_measured_here():
    t = get_target("h200")
    assert t.cost_model == "recorded:h200" and t.backend is None
    assert not t.measurable and "recorded" in (t.unavailable() or "")
    model = parse_cost_model(t.cost_model)
    assert model.spec == "recorded:h200" and model.mode.value == "eager"


def test_default_gpu_target_follows_the_machine(monkeypatch):
    from tensor_eqsat.target import default_gpu_target, targets

    torch = pytest.importorskip("torch")
    monkeypatch.setattr(targets, "nvidia_driver_present", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert default_gpu_target() == "h200"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert default_gpu_target() == "cuda"
    assert get_target(default_gpu_target()).name == "cuda"
    # no NVIDIA driver: no CUDA device, and PyTorch is not asked (its import costs seconds)
    monkeypatch.setattr(targets, "nvidia_driver_present", lambda: False)
    assert default_gpu_target() == "h200"


def test_the_default_target_does_not_import_torch_without_an_nvidia_driver():
    import subprocess
    import sys

    if targets_module().nvidia_driver_present():
        pytest.skip("this machine has an NVIDIA driver")
    code = (
        "import sys; from tensor_eqsat.target import default_gpu_target as d; d(); "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def targets_module():
    from tensor_eqsat.target import targets

    return targets
