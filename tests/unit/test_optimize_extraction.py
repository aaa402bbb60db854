"""optimize's final extraction at a deadline (issue 35): the solver always runs, with a 0.1 s
floor within a time budget and a 1 s floor for a construction-only ``time_limit``; its warm start
alone (greedy-dag) would miss what the ILP finds, as every region of a partitioned search reaches
its final extraction with its share spent."""

from __future__ import annotations

import time

from tensor_eqsat import Graph, OptimizeConfig
from tensor_eqsat.egraph.egraph import EGraph
from tensor_eqsat.extract.result import SolveStatus
from tensor_eqsat.optimize import _extract, optimize


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
    graph, result, _ = _extract(egraph, cfg.cost_model_object(), cfg, time.perf_counter() - 1.0)
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
    _, result, _ = _extract(egraph, cfg.cost_model_object(), cfg, time.perf_counter() - 1.0)
    assert "solver_status" in result.stats  # the solver ran, with its 1 s floor


def test_within_a_budget_with_time_left_the_solver_runs():
    egraph, cfg = _saturated(), OptimizeConfig(search="saturate", time_budget=5.0, cost_model="roofline:a100")
    _, result, _ = _extract(egraph, cfg.cost_model_object(), cfg, time.perf_counter() + 30.0)
    assert "solver_status" in result.stats and result.status is SolveStatus.OPTIMAL
