"""Partitioning (issue 29): cuts, structural keys, stitching, repeated blocks searched once, the
deadline."""

from __future__ import annotations

import time

import numpy as np
import pytest

from tensor_eqsat.config import OptimizeConfig
from tensor_eqsat.errors import ConfigError
from tensor_eqsat.io.equivalence import verify
from tensor_eqsat.ir.graph import Graph, Tensor
from tensor_eqsat.partition import driver
from tensor_eqsat.partition.cuts import Gap, activation_order, coalesce, gaps, segments, weight_only_nodes
from tensor_eqsat.partition.driver import optimize_partitioned
from tensor_eqsat.partition.plan import PartitionConfig, partition_graph, should_partition
from tensor_eqsat.partition.regions import structural_key
from tensor_eqsat.partition.span import spanning_matches
from tensor_eqsat.partition.stitch import stitch
from tensor_eqsat.rules.sets import load_rule_set
from tensor_eqsat.search.actions import Actions
from tensor_eqsat.zoo.registry import get

SMALL_VIT = {"image": 32, "patch": 16, "hidden": 64, "heads": 4, "mlp": 128, "classes": 10}
SMALL_BERT = {"seq_len": 8, "hidden": 32, "heads": 4}


def block(g: Graph, x: Tensor, width: int, i: int, *, activation: str = "none") -> Tensor:
    """A residual block: x + relu(x·W1)·W2, weights named by block."""
    h = g.matmul(x, g.weight((x.shape[-1], width), name=f"b{i}.w1"), activation="relu")
    return g.ewadd(x, g.matmul(h, g.weight((width, x.shape[-1]), name=f"b{i}.w2"), activation=activation))


def chain(blocks: int, width: int = 8) -> Graph:
    g = Graph()
    x = g.input((4, 8), name="x")
    for i in range(blocks):
        x = block(g, x, width, i)
    g.output(x)
    return g


def single_tensor_positions(g: Graph) -> list[int]:
    order = activation_order(g)
    return [order[p.position - 1] for p in gaps(g, order) if p.single_tensor]


# -- cuts ----------------------------------------------------------------------------------------


def test_a_chain_of_blocks_has_a_single_tensor_cut_after_each_residual_add():
    g = chain(4)
    adds = [n.id for n in g.nodes if n.op == "ewadd"]
    # the residual adds (the last one is the output, with nothing after it)
    assert [nid for nid in single_tensor_positions(g) if g.nodes[nid].op == "ewadd"] == adds[:-1]
    part = partition_graph(g, target=5)
    assert len(part.regions) == 4
    assert [c.width for c in part.cuts] == [1, 1, 1]
    assert len(part.distinct()) == 1  # the four blocks are one block up to weights


def test_a_diamond_has_no_single_tensor_cut_inside_it():
    g = Graph()
    x = g.input((4, 8), name="x")
    a = g.matmul(x, g.weight((8, 8), name="a"))
    b = g.matmul(x, g.weight((8, 8), name="b"))
    g.output(g.ewadd(g.relu(a), g.tanh(b)))
    order = activation_order(g)
    # x is read on both sides of every gap between its two readers: no single-tensor cut
    assert [p.width for p in gaps(g, order)] == [2, 2, 2, 2]
    assert not any(p.single_tensor for p in gaps(g, order))
    # a piece over the target with no single-tensor cut is cut at its best narrow cut, never
    # between two readers of x
    part = partition_graph(g, target=2)
    assert len(part.regions) > 1
    assert (
        stitch(g, part.regions, {k: rs[0].graph for k, rs in part.distinct().items()}).op_counts()
        == g.op_counts()
    )


def test_multiple_outputs_are_region_outputs_and_come_back_in_order():
    g = Graph()
    x = g.input((4, 8), name="x")
    y = block(g, x, 8, 0)
    early = g.relu(y)  # read by nothing after: a graph output only
    z = block(g, y, 8, 1)
    g.output(z, early, x)
    part = partition_graph(g, target=6)
    assert len(part.regions) >= 2
    out = stitch(g, part.regions, {k: rs[0].graph for k, rs in part.distinct().items()})
    assert [out.shape_of(r) for r in out.outputs] == [g.shape_of(r) for r in g.outputs]
    assert verify(g, out).ok


def test_segments_cut_at_the_best_gaps_only_where_needed():
    sizes = [1, 4, 4, 4, 4, 1]
    best, worse = [Gap(1, 1, 0), Gap(3, 1, 0), Gap(5, 1, 0)], [Gap(2, 2, 0), Gap(4, 2, 1)]
    assert segments(sizes, best + worse, 100) == [(0, 6)]  # fits: not cut
    assert segments(sizes, best + worse, 9) == [(0, 1), (1, 3), (3, 5), (5, 6)]
    assert segments(sizes, best + worse, 5) == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6)]
    assert segments(sizes, [], 3) == [(0, 6)]  # nothing to cut at: one piece, whatever its size


def test_coalesce_keeps_repeated_pieces_aligned():
    pieces = [(i, i + 1) for i in range(6)]
    # A B A fits 5, but [A B A][B A B] would be two different regions: [A B] three times is one
    assert coalesce(pieces, [2, 1, 2, 1, 2, 1], "ABABAB", 5) == [[0, 1], [2, 3], [4, 5]]
    # with no repeat to align to, regions are packed greedily
    assert coalesce(pieces, [2, 1, 2, 1, 2, 1], "ABCDEF", 5) == [[0, 1, 2], [3, 4, 5]]


def test_weight_only_nodes_are_not_ordered():
    g = Graph()
    x = g.input((4, 8), name="x")
    w = g.matmul(g.weight((8, 8), name="a"), g.weight((8, 8), name="b"))
    g.output(g.matmul(x, w))
    assert weight_only_nodes(g) == {1, 2, 3}
    assert activation_order(g) == [4]


# -- structural keys -----------------------------------------------------------------------------


def test_layers_with_different_weights_have_the_same_key():
    g = get("vit-base", layers=4, **SMALL_VIT)
    part = partition_graph(g, target=40)
    keys = [r.key for r in part.regions]
    assert len(set(keys)) < len(keys)
    body = part.distinct()[keys[1]]
    # copies read different weights with different data-free names, yet share one key
    names = [{g.name_of(w) for w in r.weights} for r in body]
    assert len(body) >= 2 and names[0] != names[1]


def test_a_different_shape_or_attribute_changes_the_key():
    def net(width: int = 8, activation: str = "none") -> str:
        g = Graph()
        x = g.input((4, 8), name="x")
        g.output(block(g, x, width, 0, activation=activation))
        return partition_graph(g, target=100).regions[0].key

    assert net() == net()
    assert net() != net(width=16)
    assert net() != net(activation="relu")


def test_the_key_sees_which_weights_are_shared():
    def net(shared: bool) -> str:
        g = Graph()
        x = g.input((4, 8), name="x")
        w = g.weight((8, 8), name="w")
        v = w if shared else g.weight((8, 8), name="v")
        g.output(g.ewadd(g.matmul(x, w), g.matmul(x, v)))
        return structural_key(partition_graph(g, target=100).regions[0].graph)

    assert net(True) != net(False)


# -- stitching -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "params"),
    [("vit-base", {"layers": 3, **SMALL_VIT}), ("bert", {"layers": 4, **SMALL_BERT})],
)
def test_stitching_the_unoptimized_regions_gives_the_original_back(model, params):
    g = get(model, **params)
    part = partition_graph(g, target=30)
    assert len(part.regions) > 1
    out = stitch(g, part.regions, {k: rs[0].graph for k, rs in part.distinct().items()})
    assert out.op_counts() == g.op_counts()
    assert [n.attrs for n in out.inputs()] == [n.attrs for n in g.inputs()]
    assert verify(g, out).ok


@pytest.mark.parametrize(
    ("model", "params", "target"),
    [("vit-base", {"layers": 3, **SMALL_VIT}, 60), ("bert", {"layers": 4, **SMALL_BERT}, 30)],
)
def test_partitioned_optimization_keeps_the_numerics(model, params, target):
    g = get(model, **params)
    r = optimize_partitioned(
        g, search="saturate", node_limit=400, time_limit=30, model=model, target="a100",
        partition=PartitionConfig(target_enodes=target),
    )  # fmt: skip
    assert r.partition is not None and r.partition.regions > 1
    assert r.speedup_pct > 0
    assert r.optimized_cost_ms == pytest.approx(r.partition.stitched_ms)
    report = verify(g, r.graph)
    assert report.ok, report
    # the stitched graph is an ordinary graph, priced whole by the run's cost model
    cm = OptimizeConfig(target="a100").cost_model_object()
    assert cm.graph_cost(r.graph) == pytest.approx(r.optimized_cost_ms)


def test_weight_data_follows_each_copy():
    g = chain(3)
    rng = np.random.default_rng(0)
    for n in g.weights():
        g.weight_data[g.name_of(n.id)] = rng.standard_normal(n.shapes[0]).astype(np.float32)
    r = optimize_partitioned(g, search="saturate", node_limit=200, time_limit=10,
                             partition=PartitionConfig(target_enodes=5))  # fmt: skip
    assert r.partition is not None and r.partition.distinct == 1
    assert verify(g, r.graph).ok


# -- the driver ----------------------------------------------------------------------------------


@pytest.fixture
def searched(monkeypatch):
    """The sizes of the graphs the driver hands to ``optimize``, in order."""
    calls: list[int] = []
    real = driver.optimize

    def counting(graph, config=None, **kw):
        calls.append(len(graph))
        return real(graph, config, **kw)

    monkeypatch.setattr(driver, "optimize", counting)
    return calls


def test_repeated_blocks_are_searched_once(searched):
    g = chain(8)
    r = optimize_partitioned(g, search="saturate", node_limit=200, time_limit=10,
                             partition=PartitionConfig(target_enodes=5, whole_pass=False))  # fmt: skip
    assert r.partition is not None
    assert (r.partition.regions, r.partition.distinct) == (8, 1)
    assert len(searched) == 1
    assert r.partition.searched[0].copies == 8
    assert r.partition.whole_pct is None
    assert verify(g, r.graph).ok


def test_time_left_over_searches_the_whole_graph_too(searched):
    g = Graph()
    x = g.input((4, 8), name="x")
    y = g.matmul(x, g.weight((8, 8), name="a"))  # the cut between the two matmuls hides x·(A·B)
    g.output(g.matmul(y, g.weight((8, 8), name="b")))
    cfg = PartitionConfig(target_enodes=1, whole_min_seconds=0.5)
    r = optimize_partitioned(
        g, search="saturate", node_limit=200, time_limit=10, partition=cfg, target="a100"
    )
    assert r.partition is not None and r.partition.regions == 2
    assert searched == [3, 5]  # the two matmuls are one block, then the whole graph
    assert r.partition.whole_won and r.partition.whole_pct == pytest.approx(50.0)
    assert r.speedup_pct == pytest.approx(50.0) and r.partition.stitched_ms == r.original_cost_ms
    assert verify(g, r.graph).ok


def test_a_short_deadline_is_respected():
    g = chain(6)
    t = time.perf_counter()
    r = optimize_partitioned(
        g, search="auto", deadline=t + 2.0, partition=PartitionConfig(target_enodes=5, min_region_seconds=0.5)
    )
    assert r.partition is not None
    assert time.perf_counter() - t < 2.0 + 1.5
    assert verify(g, r.graph).ok


@pytest.mark.slow
def test_the_deadline_is_respected():
    g = get("vit-base", layers=6, **SMALL_VIT)
    t = time.perf_counter()
    r = optimize_partitioned(g, search="auto", deadline=t + 6.0, partition=PartitionConfig(target_enodes=60))
    elapsed = time.perf_counter() - t
    assert r.partition is not None and r.partition.distinct >= 2
    # each region's budget is its share of what was left (at least min_region_seconds)
    assert all(0 < (s.budget_s or 0) <= 6.0 for s in r.partition.searched)
    assert elapsed < 6.0 + 3.0  # an ILP may finish a little past its share
    assert verify(g, r.graph).ok


def test_one_region_is_optimized_whole():
    g = chain(1)
    r = optimize_partitioned(g, search="saturate", node_limit=200, time_limit=10)
    assert r.partition is None
    assert verify(g, r.graph).ok


def test_should_partition_follows_the_node_limit():
    g = get("vit-base", layers=4, **SMALL_VIT)
    assert not should_partition(g)
    assert should_partition(g, OptimizeConfig(node_limit=200), PartitionConfig(target_enodes=40))


def test_bad_settings_are_named():
    with pytest.raises(ConfigError, match="target_enodes"):
        PartitionConfig(target_enodes=0)
    with pytest.raises(ConfigError, match="room"):
        PartitionConfig(room=0)


def test_spanning_matches_count_the_rules_a_cut_hides():
    actions = Actions.from_rules(load_rule_set("taso"))
    g = Graph()
    x = g.input((4, 8), name="x")
    for i in range(4):  # x + (x·A + x·B)·C: the projections of x merge inside a block
        a = g.matmul(x, g.weight((8, 8), name=f"b{i}.a"))
        b = g.matmul(x, g.weight((8, 8), name=f"b{i}.b"))
        x = g.ewadd(x, g.matmul(g.ewadd(a, b), g.weight((8, 8), name=f"b{i}.c")))
    g.output(x)
    part = partition_graph(g, target=8)
    assert len(part.regions) == 4 and all(c.single_tensor for c in part.cuts)
    report = spanning_matches(part, actions)
    assert report.total > 0 and report.lost == 0  # residual cuts hide nothing here
    # cut inside a block, between the two readers of x, the merge of its projections is lost
    inner = spanning_matches(partition_graph(g, target=2), actions)
    assert inner.total == report.total and inner.lost > 0


def test_opaque_nodes_named_per_layer_are_one_block_and_keep_their_own_payload():
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from tensor_eqsat.io.opaque import TensorSlot, build_opaque

    def exp_attrs(layer: int) -> dict:
        node = onnx.helper.make_node("Exp", ["a"], ["b"], name=f"/h.{layer}/Exp")
        float32 = onnx.TensorProto.FLOAT
        return build_opaque(node, [TensorSlot(float32, (4, 8))], [(float32, (4, 8))],
                            [onnx.helper.make_opsetid("", 18)])  # fmt: skip

    g = Graph()
    x = g.input((4, 8), name="x")
    payloads = []
    for i in range(3):
        attrs = exp_attrs(i)
        payloads.append(attrs["payload"])
        y = g.add("opaque", [g.sdiv(x, 8.0)], **attrs)[0]
        x = g.ewadd(x, g.matmul(y, g.weight((8, 8), name=f"b{i}.w")))
    g.output(x)
    assert len(set(payloads)) == 3  # the node names differ
    part = partition_graph(g, target=6)
    assert len(part.regions) == 3 and len(part.distinct()) == 1
    out = stitch(g, part.regions, {k: rs[0].graph for k, rs in part.distinct().items()})
    kept = [n.attr_dict()["payload"] for n in out.nodes if n.op == "opaque"]
    assert kept == payloads  # each copy keeps its own node
    assert verify(g, out).ok


def test_progress_names_the_region_and_counts_from_the_start():
    events = []
    g = chain(4)
    optimize_partitioned(
        g, search="saturate", node_limit=200, time_limit=10, progress=events.append,
        partition=PartitionConfig(target_enodes=5, whole_pass=False),
    )  # fmt: skip
    assert events and all(e.rule is not None and e.rule.startswith("region 1/1") for e in events)
    assert [e.at for e in events] == sorted(e.at for e in events)  # one clock across regions


def test_regions_keep_the_dtype_of_their_inputs_and_weights():
    from tensor_eqsat.ir.cast import cast_graph, precision
    from tensor_eqsat.partition.cuts import activation_order, weight_only_nodes
    from tensor_eqsat.partition.regions import ReaderIndex, build_region

    g = Graph()
    x = g.input((2, 4), name="x")
    y = g.matmul(x, g.weight((4, 4), name="a"))
    g.output(g.matmul(y, g.weight((4, 4), name="b")))
    h = cast_graph(g, "bf16")
    order, fixed = activation_order(h), weight_only_nodes(h)
    index = ReaderIndex(h, order)
    second = build_region(h, order, 1, 2, fixed, index)
    # A region of a bf16 graph is a bf16 graph: it is priced and rewritten in bf16.
    assert precision(second.graph).value == "bfloat16"
    assert {d for n in second.graph.nodes for d in n.dtypes} == {"bfloat16"}


def test_a_reduced_precision_graph_is_priced_in_its_dtype_when_partitioned():
    from tensor_eqsat.ir.cast import cast_graph

    g = cast_graph(chain(3), "bf16")
    r = optimize_partitioned(g, search="saturate", node_limit=200, time_limit=10,
                             partition=PartitionConfig(target_enodes=5))  # fmt: skip
    assert r.partition is not None
    bf16 = OptimizeConfig().cost_model_object(g)
    assert bf16.dtype.value == "bfloat16"
    assert r.original_cost_ms == pytest.approx(bf16.graph_cost(g))
    assert r.original_cost_ms < OptimizeConfig().cost_model_object().graph_cost(chain(3))
    assert verify(g, r.graph).ok


@pytest.mark.slow
def test_each_region_runs_its_rounds_and_the_result_says_whether_all_reached_a_fixpoint():
    g = get("vit-base", layers=3, **SMALL_VIT)
    kw = {"search": "saturate", "node_limit": 400, "time_limit": 30, "model": "vit-base", "target": "a100"}
    part = PartitionConfig(target_enodes=60, whole_pass=False)
    r = optimize_partitioned(g, **kw, rounds=0, partition=part)
    assert r.partition is not None and r.partition.regions > 1
    assert all(reg.rounds >= 1 and reg.fixpoint for reg in r.partition.searched)
    assert any(reg.rounds > 1 for reg in r.partition.searched)  # a region that gained searched again
    assert r.fixpoint and r.to_dict()["fixpoint"] is True
    one = optimize_partitioned(g, **kw, partition=part)  # saturate alone: one round per region
    assert one.partition is not None and all(reg.rounds == 1 for reg in one.partition.searched)
    assert not one.fixpoint and r.optimized_cost_ms <= one.optimized_cost_ms
    assert verify(g, r.graph).ok
