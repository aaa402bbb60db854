"""A small attention block whose merged Q/K/V projection is only cheaper for the classes jointly.

Under the A100 roofline, one (1, 64, 256) x (256, 256) projection costs less than the merged
product of two (rule 128's ``x (Wq | Wk)``), but the merged product costs less than two. The
paper's greedy-ocf prices one class at a time, so it never takes the merge and rewards MCTS with
0 for it; the joint moves take it, so MCTS OCF applies rule 128 first, for a positive reward.
"""

from __future__ import annotations

import pytest

from tensor_eqsat.cost import parse_cost_model
from tensor_eqsat.egraph import EGraph
from tensor_eqsat.extract.egraph_problem import problem_from_egraph
from tensor_eqsat.extract.greedy_ocf import GreedyOcfExtractor
from tensor_eqsat.extract.ilp import IlpExtractor
from tensor_eqsat.ir import Graph
from tensor_eqsat.optimize import optimize
from tensor_eqsat.rewrite.rewrite import apply_rule
from tensor_eqsat.rules import load_rule_set
from tensor_eqsat.search.actions import Actions

MERGE = "matmul-concat-split-shared-lhs"  # rule 128


def attention(seq: int = 64, hidden: int = 256) -> Graph:
    g = Graph()
    x = g.input((1, seq, hidden), name="x")
    q, k, v = (g.matmul(x, g.weight((hidden, hidden), name=f"w{n}")) for n in "qkv")
    scores = g.softmax(g.matmul(q, g.transpose(k, (0, 2, 1))))
    g.output(g.matmul(scores, v))
    return g


def merged_problem():
    """The attention block's e-graph after one application of rule 128, priced, and the
    original graph's problem."""
    cm = parse_cost_model("roofline:a100")
    eg = EGraph.from_graph(attention())
    rules = Actions.from_rules(load_rule_set("taso")).rewrites
    apply_rule(eg, next(r for r in rules if r.name == MERGE))
    original = problem_from_egraph(EGraph.from_graph(attention()), cm).problem
    return problem_from_egraph(eg, cm).problem, original


def test_the_merged_projection_is_only_cheaper_jointly() -> None:
    p, _ = merged_problem()
    costs = sorted({p.node_cost[n] for n in range(p.num_nodes) if p.node_op[n] == "matmul"})
    projection, *merged = [c for c in costs if c > 0.009]  # the scores and output products are cheaper
    assert merged and all(projection < m < 2 * projection for m in merged)


def test_greedy_ocf_takes_the_merge_the_ilp_takes() -> None:
    p, original = merged_problem()
    r = GreedyOcfExtractor().extract(p)
    r.check()
    assert r.dag_cost() < IlpExtractor().extract(original).dag_cost()
    assert r.dag_cost() == pytest.approx(IlpExtractor().extract(p).dag_cost())
    assert r.reported_cost == pytest.approx(r.dag_cost())


def test_the_paper_ocf_alone_keeps_the_projections() -> None:
    p, original = merged_problem()
    paper = GreedyOcfExtractor(joint=False).extract(p)
    assert paper.dag_cost() == pytest.approx(IlpExtractor().extract(original).dag_cost())


def test_mcts_ocf_applies_the_merge_for_a_reward() -> None:
    r = optimize(attention(), budget=8, node_limit=100, final_extractor="greedy-ocf", seed=0, target="a100")
    assert r.steps[0].rule == MERGE
    assert r.steps[0].reward > 0
    assert r.speedup_pct > 20


def test_with_the_paper_ocf_every_reward_is_zero() -> None:
    paper = GreedyOcfExtractor(joint=False)
    r = optimize(attention(), budget=8, node_limit=100, main_extractor=paper, final_extractor=paper, seed=0,
                 target="a100")  # fmt: skip
    assert [s.reward for s in r.steps] == [0.0] * len(r.steps)
    assert r.speedup_pct == pytest.approx(0.0, abs=1e-9)
