"""The --cost-model spec parser."""

from __future__ import annotations

import importlib

import pytest

from tensor_eqsat.cost import CostModelError, RooflineCostModel, UnitCostModel, parse_cost_model
from tensor_eqsat.cost import measured as measured_mod


def test_default_is_roofline_on_the_a100():
    m = parse_cost_model()
    assert isinstance(m, RooflineCostModel)
    assert m.spec == "roofline:a100" and m.profile.name == "a100"
    assert m.weight_ops.value == "fold" and not m.taso_compat


@pytest.mark.parametrize("name", ["a100", "p100", "h100", "cpu"])
def test_roofline_profiles(name):
    assert parse_cost_model(f"roofline:{name}").profile.name == name


def test_flags_reach_the_model():
    m = parse_cost_model("roofline:cpu", weight_ops="count", taso_compat=True)
    assert m.weight_ops.value == "count" and m.taso_compat
    assert isinstance(parse_cost_model("unit"), UnitCostModel)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("fast", r"unknown cost model 'fast' \(known: measured, recorded, roofline, unit"),
        ("roofline:tpu", "roofline: unknown device profile 'tpu'"),
        ("unit:x", "unit: takes no argument"),
    ],
)
def test_bad_specs(spec, message):
    with pytest.raises(CostModelError, match=message):
        parse_cost_model(spec)


def test_unknown_option():
    with pytest.raises(CostModelError, match="roofline: unknown option 'threads'"):
        parse_cost_model("roofline", threads=2)


def test_missing_torch_names_the_extra(monkeypatch):
    real = importlib.import_module

    def fake(name, *a, **kw):
        if name == "torch":
            raise ModuleNotFoundError("No module named 'torch'")
        return real(name, *a, **kw)

    monkeypatch.setattr(measured_mod.importlib, "import_module", fake)
    with pytest.raises(CostModelError, match=r"needs PyTorch.*'torch' extra.*tensor-eqsat\[torch\]"):
        parse_cost_model("measured")
