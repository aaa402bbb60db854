"""The ops of today's inference graphs (issue 33) are priced by every cost model: the analytic
rooflines, the recorded H200 table (through its fitted fallback: the table has no row for them),
measured PyTorch kernels on this CPU and ONNX Runtime."""

from __future__ import annotations

import pytest

from tensor_eqsat.cost.spec import parse_cost_model
from tensor_eqsat.ir.ops import get_op
from tensor_eqsat.ir.types import OpKind

CASES = {
    "silu": ((), ((8, 64, 56, 56),)),
    "hardsigmoid": ((), ((8, 64, 56, 56),)),
    "hardswish": ((), ((8, 64, 56, 56),)),
    "clip": ((0.0, 6.0), ((8, 64, 56, 56),)),
    "pow": ((2.0,), ((8, 128, 512),)),
    "rsqrt": ((), ((8, 128, 1),)),
    "pad": (((0, 0, 1, 1, 0, 0, 1, 1), "zero"), ((8, 64, 56, 56),)),
    "slice": ((3, 0, 32, 1), ((8, 8, 128, 64),)),
    "expand": (((1, 2, 4, 128, 64),), ((1, 2, 1, 128, 64),)),
    "mean": (((2,), True), ((8, 128, 512),)),
}


def _attrs(op, values):
    spec = get_op(op)
    return spec.make_attrs(**dict(zip(spec.attr_names, values, strict=True)))


@pytest.mark.parametrize("spec", ["roofline:a100", "roofline:h100", "roofline:cpu", "recorded:h200"])
@pytest.mark.parametrize("op", sorted(CASES))
def test_analytic_and_recorded_models_price_every_new_op(spec, op):
    model = parse_cost_model(spec)
    values, shapes = CASES[op]
    cost = model.op_cost(op, _attrs(op, values), shapes, False)
    if get_op(op).kind is OpKind.VIEW:
        assert cost == 0.0  # a slice is a free view, like split
    else:
        assert cost > 0.0, (spec, op)
    assert model.op_cost(op, _attrs(op, values), shapes, True) == 0.0  # folded with the weights


def test_bigger_inputs_cost_more_on_the_recorded_h200():
    model = parse_cost_model("recorded:h200")
    small = model.op_cost("silu", (), ((1, 64, 56, 56),), False)
    big = model.op_cost("silu", (), ((64, 64, 112, 112),), False)
    assert big > small > 0.0


SMALL = {
    "silu": ((), ((4, 64),)),
    "hardsigmoid": ((), ((4, 64),)),
    "hardswish": ((), ((4, 64),)),
    "clip": ((0.0, 6.0), ((4, 64),)),
    "pow": ((2.0,), ((4, 64),)),
    "rsqrt": ((), ((4, 64),)),
    "pad": (((0, 0, 1, 1, 0, 0, 1, 1), "zero"), ((1, 4, 8, 8),)),
    "slice": ((1, 0, 32, 1), ((4, 64),)),
    "expand": (((1, 2, 4, 8, 8),), ((1, 2, 1, 8, 8),)),
    "mean": (((1,), True), ((4, 64),)),
}


def test_measured_cpu_times_every_new_op(tmp_path):
    pytest.importorskip("torch")
    model = parse_cost_model(
        "measured:cpu", cache_path=tmp_path / "t.sqlite3", warmup=1, repeats=3, max_seconds=0.05
    )
    assert set(SMALL) == set(CASES)
    for op, (values, shapes) in SMALL.items():
        cost = model.op_cost(op, _attrs(op, values), shapes, False)
        if get_op(op).kind is OpKind.VIEW:
            assert cost == 0.0, op
        else:
            assert cost > 0.0, op
