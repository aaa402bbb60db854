"""optimize's final extraction at a deadline (issue 35): the solver always runs, with a 0.1 s
floor within a time budget and a 1 s floor for a construction-only ``time_limit``; its warm start
alone (greedy-dag) would miss what the ILP finds, as every region of a partitioned search reaches
its final extraction with its share spent."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from tensor_eqsat import Graph, OptimizeConfig
from tensor_eqsat.egraph.egraph import EGraph
from tensor_eqsat.extract.result import SolveStatus
from tensor_eqsat.optimize import EXTRACTION_RESERVE, _extract, optimize
from tensor_eqsat.search.construction import ConstructionReport
from tensor_eqsat.search.stop import StopReason


def chain() -> Graph:
    g = Graph()
    x = g.input((1, 64), name="x")
    g.output(g.matmul(g.matmul(x, g.weight((64, 64), name="w1")), g.weight((64, 64), name="w2")))
    return g


def _saturated() -> EGraph:
    egraph = EGraph.from_graph(chain())
    optimize(chain(), search="saturate", node_limit=60, final_extractor="greedy-dag", egraph=egraph)
    return egraph


def test_within_a_budget_no_time_left_the_solver_still_runs():
    egraph, cfg = _saturated(), OptimizeConfig(search="saturate", time_budget=5.0, cost_model="roofline:a100")
    graph, result, _, _ = _extract(egraph, cfg.cost_model_object(), cfg, time.perf_counter() - 1.0)
    assert "solver_status" in result.stats and result.extractor == "ilp"  # with its 0.1 s floor
    assert cfg.cost_model_object().graph_cost(graph) < cfg.cost_model_object().graph_cost(chain())


def test_a_deep_partitioned_model_keeps_its_gain_with_little_time():
    # Each region reaches its final extraction with its share spent: skipping the solver there
    # handed back greedy-dag's answer for every region (ViT-Base at 48 layers: +0.0 %).
    from tensor_eqsat.partition import optimize_partitioned
    from tensor_eqsat.zoo import get

    g = get("vit-base", layers=24)
    cfg = OptimizeConfig(time_budget=6.0, cost_model="roofline:a100")
    r = optimize_partitioned(g, cfg, deadline=time.perf_counter() + 6.0)
    assert r.speedup_pct > 5.0, r.speedup_pct


def test_a_run_time_limit_used_up_still_solves():
    egraph, cfg = _saturated(), OptimizeConfig(search="saturate", time_limit=5.0, cost_model="roofline:a100")
    _, result, _, _ = _extract(egraph, cfg.cost_model_object(), cfg, time.perf_counter() - 1.0)
    assert "solver_status" in result.stats  # the solver ran, with its 1 s floor


def test_within_a_budget_with_time_left_the_solver_runs():
    egraph, cfg = _saturated(), OptimizeConfig(search="saturate", time_budget=5.0, cost_model="roofline:a100")
    _, result, _, _ = _extract(egraph, cfg.cost_model_object(), cfg, time.perf_counter() + 30.0)
    assert "solver_status" in result.stats and result.status is SolveStatus.OPTIMAL


def _vit_layer_saturated() -> tuple[Graph, EGraph]:
    """A small ViT layer (the repeated region of a partitioned ViT) and its e-graph saturated to
    1,000 e-nodes: large enough that a 0.1 s solve does not finish here."""
    from tensor_eqsat.partition.plan import PartitionConfig, partition_graph
    from tensor_eqsat.zoo import get

    g = get("vit-base", layers=2, hidden=64, mlp=128, heads=4, image=32)
    groups = partition_graph(g, PartitionConfig().target(2000)).distinct()
    layer = max(groups.values(), key=lambda regions: len(regions[0].nodes))[0].graph
    egraph = EGraph.from_graph(layer)
    optimize(layer, search="saturate", node_limit=1000, final_extractor="greedy-dag", egraph=egraph)
    return layer, egraph


def test_a_solve_cut_short_hands_back_what_the_search_was_rewarded_for():
    # Issue 35: with its share spent, the final ILP of a large e-graph returned its greedy-dag
    # warm start, the original here, although the main extractor (MCTS's reward) saw the gain:
    # a longer budget grew a larger e-graph and gained 0 % where a shorter one gained 19 %.
    layer, egraph = _vit_layer_saturated()
    cfg = OptimizeConfig(time_budget=5.0, cost_model="roofline:a100")
    cm = cfg.cost_model_object(layer)
    original = cm.graph_cost(layer)
    dag, _, _, _ = _extract(egraph, cm, replace(cfg, final_extractor="greedy-dag"), None)
    ocf, _, _, _ = _extract(egraph, cm, replace(cfg, final_extractor="greedy-ocf"), None)
    assert cm.graph_cost(dag) == pytest.approx(original)  # the warm start alone gains nothing
    assert cm.graph_cost(ocf) < 0.95 * original
    graph, result, _, _ = _extract(egraph, cm, cfg, time.perf_counter() - 1.0)
    assert result.extractor == "ilp"
    assert cm.graph_cost(graph) <= cm.graph_cost(ocf) * (1 + 1e-9)


class _UntilDeadline:
    """A construction that adds nothing and returns at its deadline, recording it."""

    name = "until-deadline"

    def __init__(self) -> None:
        self.given: list[float | None] = []

    def construct(self, egraph, actions, *, seed, deadline, progress):
        self.given.append(deadline)
        while deadline is not None and time.perf_counter() < deadline:
            time.sleep(0.01)
        return ConstructionReport(StopReason.TIME_LIMIT)


def test_within_a_budget_a_construction_leaves_its_extraction_time():
    mine = _UntilDeadline()
    t0 = time.perf_counter()
    r = optimize(chain(), search=mine, time_budget=1.0, cost_model="roofline:a100")
    (given,) = mine.given
    # (0.1 s for what precedes the deadline's start on a loaded machine: 0.062 s was seen; without
    # the reserve the construction would be given the whole second)
    assert given is not None and given - t0 <= (1 - EXTRACTION_RESERVE) * 1.0 + 0.1
    assert r.wall_s <= 1.1


def test_a_time_limit_bounds_the_construction_alone():
    mine = _UntilDeadline()
    t0 = time.perf_counter()
    optimize(chain(), search=mine, time_limit=0.5, cost_model="roofline:a100")
    t1 = time.perf_counter()
    (given,) = mine.given
    # The limit counts from the construction's start (after the e-graph is built), in full: the
    # ILP gets its own time after it.
    assert given is not None and t0 + 0.5 <= given <= t1
