"""Device profiles: the shipped ones load and cite sources; bad files fail naming file and field."""

from __future__ import annotations

import json

import pytest

from tensor_eqsat.cost import load_profile, profile_names
from tensor_eqsat.cost.profiles import KIND_KEYS, profile_from_dict
from tensor_eqsat.errors import FormatError


def test_shipped_profiles():
    assert profile_names() == ["a100", "cpu", "h100", "p100"]
    for name in profile_names():
        p = load_profile(name)
        assert p.name == name
        for key in ("compute_units", "vector_tflops", "matrix_tflops", "bandwidth_gbs"):
            assert p.sources[key].strip(), f"{name}: no source for {key}"
        if p.cache_bytes:
            assert p.sources["cache_bytes"] and p.sources["cache_bandwidth_gbs"]
        assert p.calibration.strip(), f"{name}: no calibration note"
        assert set(KIND_KEYS) <= set(p.kinds)


def test_datasheet_peaks():
    a100, p100, h100 = load_profile("a100"), load_profile("p100"), load_profile("h100")
    assert (a100.compute_units, a100.vector_tflops, a100.matrix_tflops, a100.bandwidth_gbs) == (
        108,
        19.5,
        156.0,
        2039.0,
    )
    assert (p100.compute_units, p100.vector_tflops, p100.bandwidth_gbs) == (56, 9.3, 732.0)
    assert p100.matrix_tflops == p100.vector_tflops  # no tensor cores on Pascal
    assert h100.matrix_tflops > a100.matrix_tflops and h100.bandwidth_gbs > a100.bandwidth_gbs


def test_round_trip_and_custom_file(tmp_path):
    data = load_profile("a100").to_dict()
    data["name"] = "mine"
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(data))
    p = load_profile(str(path))
    assert p.name == "mine" and p.kinds == load_profile("a100").kinds


def test_unknown_profile_lists_the_known_ones():
    with pytest.raises(FormatError, match=r"unknown device profile 'v100' .*a100, cpu, h100, p100"):
        load_profile("v100")


def test_missing_file(tmp_path):
    with pytest.raises(FormatError, match=r"nope\.json: cannot read device profile"):
        load_profile(str(tmp_path / "nope.json"))


def test_invalid_json_names_the_line(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{\n  "name": "x",\n  oops\n}')
    with pytest.raises(FormatError, match=r"bad.json: line 3: invalid JSON"):
        load_profile(str(path))


def _data():
    return load_profile("a100").to_dict()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.pop("bandwidth_gbs"), "missing field 'bandwidth_gbs'"),
        (lambda d: d.update(vector_tflops=-1), "'vector_tflops' must be > 0"),
        (lambda d: d.update(vector_tflops="fast"), "'vector_tflops' must be a number"),
        (lambda d: d["sources"].pop("matrix_tflops"), "'sources' must say where 'matrix_tflops' comes from"),
        (lambda d: d["kinds"].pop("pool"), "missing parameters for 'pool'"),
        (lambda d: d["kinds"].update(bogus={}), "unknown op kind 'bogus'"),
        (lambda d: d["kinds"]["gemm"].update(unit="tensor"), "kinds.gemm: field 'unit' must be"),
        (
            lambda d: d["kinds"]["conv"].update(compute_efficiency=1.5),
            "kinds.conv: field 'compute_efficiency'",
        ),
        (lambda d: d["kinds"]["conv"].update(speed=3), "kinds.conv: unknown field 'speed'"),
        (lambda d: d.update(name=""), "field 'name' must be a non-empty"),
        (lambda d: d.update(cache_bandwidth_gbs=0), "'cache_bytes' needs 'cache_bandwidth_gbs'"),
    ],
)
def test_validation_names_the_field(edit, message):
    data = _data()
    edit(data)
    with pytest.raises(FormatError, match=message):
        profile_from_dict(data, "my.json")


def test_op_overrides_are_validated_and_used():
    from tensor_eqsat.cost import RooflineCostModel

    data = _data()
    data["ops"] = {
        "poolmax": {"unit": "vector", "compute_efficiency": 0.5, "bandwidth_efficiency": 1.0, "launch_us": 1}
    }
    prof = profile_from_dict(data)
    assert set(prof.ops) == {"poolmax"} and profile_from_dict(prof.to_dict()).ops == prof.ops
    pool = ((3, 3), (1, 1), "same", "none")
    x = ((1, 16, 32, 32),)
    m = RooflineCostModel(profile=prof)
    # the override makes max pools cheaper than average pools of the same shape
    assert m.op_cost("poolmax", pool, x, False) < m.op_cost("poolavg", pool, x, False)
    data["ops"] = {"poolmin": data["ops"]["poolmax"]}
    with pytest.raises(FormatError, match="unknown op or variant 'poolmin'"):
        profile_from_dict(data)


def test_cpu_profile_prices_pools_and_depthwise_convs_by_their_own_kernels():
    from tensor_eqsat.cost import RooflineCostModel

    prof = load_profile("cpu")
    assert {"poolmax", "poolavg", "conv2d:depthwise"} <= set(prof.ops)
    m = RooflineCostModel(profile="cpu")
    x = (1, 64, 56, 56)
    dw = m.op_cost("conv2d", ((1, 1), "same", "none"), (x, (64, 1, 3, 3)), False)
    dense = m.op_cost("conv2d", ((1, 1), "same", "none"), (x, (64, 64, 3, 3)), False)
    assert dw < dense
    # a pool's fixed work per output: a 2x2 window costs more than 4/9 of a 3x3 one
    two = m.op_cost("poolmax", ((2, 2), (2, 2), "valid", "none"), (x,), False)
    three = m.op_cost("poolmax", ((3, 3), (2, 2), "valid", "none"), (x,), False)
    assert 4 / 9 * three < two < three
