"""Cost models price a graph in its precision: the dtype's bytes and compute rates."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tensor_eqsat import zoo
from tensor_eqsat.config import OptimizeConfig
from tensor_eqsat.cost.dtype_rates import compute_scale, rates
from tensor_eqsat.cost.recorded import RecordedCostModel, export_table, load_table
from tensor_eqsat.cost.roofline import RooflineCostModel
from tensor_eqsat.ir.cast import cast_graph
from tensor_eqsat.ir.types import OpKind

BIG_MATMUL = ("matmul", ("none",), ((4096, 4096), (4096, 4096)), False)
BIG_ADD = ("ewadd", (), ((64, 1024, 1024), (64, 1024, 1024)), False)


def test_roofline_uses_tensor_core_rates_and_two_byte_elements():
    fp32 = RooflineCostModel(profile="h100")
    bf16 = fp32.with_dtype("bf16")
    assert bf16 is not fp32 and fp32.with_dtype("fp32") is fp32
    # Compute-bound: TF32 (494.7) to bf16 tensor cores (989.4) halves the compute term.
    assert bf16.op_cost(*BIG_MATMUL) == pytest.approx(fp32.op_cost(*BIG_MATMUL) / 2, rel=0.05)
    # Memory-bound: half the bytes.
    assert bf16.op_cost(*BIG_ADD) == pytest.approx(fp32.op_cost(*BIG_ADD) / 2, rel=0.05)


def test_a_device_without_half_precision_rates_moves_fewer_bytes_only():
    cpu = RooflineCostModel(profile="cpu")
    half = cpu.with_dtype("fp16")
    assert rates("cpu", "fp16") == (0.0, 0.0)
    assert half.op_cost(*BIG_ADD) < cpu.op_cost(*BIG_ADD)
    assert half.op_cost(*BIG_MATMUL) == pytest.approx(cpu.op_cost(*BIG_MATMUL), rel=0.05)


def test_compute_scale_knows_pytorch_runs_float32_convs_in_tf32():
    assert compute_scale("h200", OpKind.GEMM, "bf16") == pytest.approx(67.0 / 989.4)
    assert compute_scale("h200", OpKind.CONV, "bf16") == pytest.approx(494.7 / 989.4)
    assert compute_scale("h200", OpKind.ELEMENTWISE, "bf16") == pytest.approx(67.0 / 133.8)
    assert compute_scale("unknown-device", OpKind.GEMM, "bf16") == 1.0


def test_recorded_h200_prices_bf16_below_fp32_and_from_its_fit():
    m = RecordedCostModel("h200")
    half = m.with_dtype("bf16")
    for name in ("bert", "resnet50"):
        g = zoo.get(name)
        assert half.graph_cost(cast_graph(g, "bf16")) < m.graph_cost(g)
    # A large GEMM nobody timed: the fit, with bf16 tensor cores instead of fp32 SIMT units.
    assert half.op_cost(*BIG_MATMUL) < m.op_cost(*BIG_MATMUL) / 5


def test_a_table_prices_the_dtype_it_holds(tmp_path):
    table = load_table("h200")
    path = export_table(dataclasses.replace(table, dtype="bfloat16"), tmp_path / "bf16.json")
    assert json.loads(path.read_text())["dtype"] == "bfloat16"
    held = RecordedCostModel(str(path), mode="isolated")
    assert held.table.dtype == "bfloat16"
    (op, attrs, shapes), ms = next((k, v) for k, v in held.table.entries.items() if k[0] == "matmul")
    from tensor_eqsat.cost.recorded import decode_attrs, decode_shapes

    args = (op, decode_attrs(attrs), decode_shapes(shapes), False)
    # A bf16 graph reads the table as it is; a float32 one costs more (4-byte elements, slower units).
    assert held.with_dtype("bf16").op_cost(*args) == pytest.approx(ms)
    assert held.op_cost(*args) > ms


def test_a_bad_table_dtype_is_refused(tmp_path):
    data = json.loads(export_table(load_table("h200"), tmp_path / "t.json").read_text())
    data["dtype"] = "float8"
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(Exception, match="dtype must be float32, float16 or bfloat16, got 'float8'"):
        RecordedCostModel(str(tmp_path / "bad.json"))


@pytest.mark.parametrize("spec", ["roofline:a100", "recorded:h200"])
def test_the_config_prices_a_graph_in_its_precision(spec):
    g = cast_graph(zoo.get("squeezenet"), "fp16")
    model = OptimizeConfig(cost_model=spec).cost_model_object(g)
    assert model.dtype.value == "float16"
    assert OptimizeConfig(cost_model=spec).cost_model_object(zoo.get("squeezenet")).dtype.value == "float32"
