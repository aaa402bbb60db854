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


def _island_graph():
    """A bf16 graph with a float32 softmax island (cast up, softmax, cast back), as
    reduced-precision transformers write attention."""
    from tensor_eqsat.ir.graph import Graph

    g = Graph()
    x = g.input((8, 512, 512), name="x", dtype="bf16")
    scores = g.matmul(x, g.weight((512, 512), name="w", dtype="bf16"))
    soft = g.softmax(g.cast(scores, "float32"), axis=-1)
    g.output(g.cast(soft, "bfloat16"))
    return g, soft


@pytest.mark.parametrize("spec", ["roofline:h100", "recorded:h200"])
def test_a_float32_op_inside_a_bf16_graph_costs_what_it_costs_alone_in_float32(spec):
    from tensor_eqsat.cost.model import node_costs
    from tensor_eqsat.cost.spec import parse_cost_model
    from tensor_eqsat.ir.graph import Graph

    g, soft = _island_graph()
    model = OptimizeConfig(cost_model=spec).cost_model_object(g)
    assert model.dtype.value == "bfloat16"  # the graph's precision
    costs = {n.id: c for n, c in node_costs(model, g)}
    alone = Graph()
    alone.output(alone.softmax(alone.input((8, 512, 512), name="s"), axis=-1))
    fp32 = parse_cost_model(spec)
    assert costs[soft.node] == pytest.approx(fp32.graph_cost(alone) - _pass(fp32))
    # Priced in bf16 it would be cheaper (2-byte elements): what the island was charged before.
    in_bf16 = model.op_cost("softmax", g.nodes[soft.node].attrs, ((8, 512, 512),), False)
    assert in_bf16 < costs[soft.node]
    # The bf16 matmul keeps its bf16 price.
    mm = next(n for n in g.nodes if n.op == "matmul")
    own = model.op_cost("matmul", mm.attrs, ((8, 512, 512), (512, 512)), False)
    assert costs[mm.id] == pytest.approx(own)


def _pass(model):
    from tensor_eqsat.cost.model import pass_cost

    return pass_cost(model)


def test_extraction_prices_each_e_node_in_its_own_dtype():
    from tensor_eqsat.cost.model import node_costs
    from tensor_eqsat.egraph import EGraph
    from tensor_eqsat.extract.egraph_problem import problem_from_egraph

    g, _ = _island_graph()
    model = OptimizeConfig(cost_model="roofline:h100").cost_model_object(g)
    ep = problem_from_egraph(EGraph.from_graph(g), model)
    by_op = {}
    for i, op in enumerate(ep.problem.node_op):
        by_op.setdefault(op, []).append(ep.problem.node_cost[i])
    graph_costs = {n.op: c for n, c in node_costs(model, g) if n.op != "cast"}
    assert by_op["softmax"] == [pytest.approx(graph_costs["softmax"])]
    assert by_op["matmul"] == [pytest.approx(graph_costs["matmul"])]
    # The DAG cost of the graph's own extraction equals the graph's cost.
    assert sum(by_op["softmax"] + by_op["matmul"] + by_op["cast"]) == pytest.approx(
        sum(c for _, c in node_costs(model, g))
    )


def test_op_dtype_is_the_inputs_floating_precision():
    from tensor_eqsat.ir.dtypes import op_dtype

    assert op_dtype(["bfloat16", "bfloat16"]) == "bfloat16"
    assert op_dtype(["int64", "float16"]) == "float16"
    assert op_dtype(["float32", "bfloat16"]) == "float32"
    assert op_dtype([None, "int64"]) is None
