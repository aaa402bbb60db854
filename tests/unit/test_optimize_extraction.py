"""optimize's final extraction at a deadline (issue 35): within a time budget, no time left means
the ILP's warm start, unsolved; a construction-only ``time_limit`` still gives the solver its floor."""

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


def test_within_a_budget_no_time_left_extracts_the_warm_start_unsolved():
    egraph, cfg = _saturated(), OptimizeConfig(search="saturate", time_budget=5.0, cost_model="roofline:a100")
    graph, result, _ = _extract(egraph, cfg.cost_model_object(), cfg, time.perf_counter() - 1.0)
    assert result.status is SolveStatus.TIME_LIMIT and "solver_status" not in result.stats
    assert result.extractor == "ilp" and result.stats["source"] == "greedy"
    assert cfg.cost_model_object().graph_cost(graph) < cfg.cost_model_object().graph_cost(chain())


def test_a_run_time_limit_used_up_still_solves():
    egraph, cfg = _saturated(), OptimizeConfig(search="saturate", time_limit=5.0, cost_model="roofline:a100")
    _, result, _ = _extract(egraph, cfg.cost_model_object(), cfg, time.perf_counter() - 1.0)
    assert "solver_status" in result.stats  # the solver ran, with its 1 s floor


def test_within_a_budget_with_time_left_the_solver_runs():
    egraph, cfg = _saturated(), OptimizeConfig(search="saturate", time_budget=5.0, cost_model="roofline:a100")
    _, result, _ = _extract(egraph, cfg.cost_model_object(), cfg, time.perf_counter() + 30.0)
    assert "solver_status" in result.stats and result.status is SolveStatus.OPTIMAL
