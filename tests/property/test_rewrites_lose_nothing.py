"""Property test: no rule application takes away an extraction the e-graph offered before.

A reduced zoo model is grown by a random, seeded sequence of applicable built-in rules (the walk
``benchmarks/cycle_cut.py`` makes, with a smaller node budget). After every application that
changed the e-graph, each extractor's answer on the e-graph before is carried over node by node
(``EGraphProblem.carry_over``) and must still be a valid extraction of no higher DAG cost. This is
what "the cycle filter loses nothing" means, independently of any solver: an exact extractor's
best cost cannot rise, because its earlier optimum stays available (the ILP "rise" that
``cycle_cut.py`` once reported on SqueezeNet, seed 1, step 11 was SCIP stopping at its time
limit: the earlier answer carries over at 0.15334 ms, and HiGHS proves that optimal).
"""

from __future__ import annotations

import functools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensor_eqsat import zoo
from tensor_eqsat.cost.spec import parse_cost_model
from tensor_eqsat.egraph import EGraph, find_cycle
from tensor_eqsat.extract.egraph_problem import problem_from_egraph
from tensor_eqsat.extract.registry import ExtractorKind, make_extractor
from tensor_eqsat.extract.result import ExtractionResult
from tensor_eqsat.rewrite import MultiRewrite, Rewrite, apply_rule
from tensor_eqsat.rules.rewrites import to_rewrites
from tensor_eqsat.rules.sets import load_rule_set
from tensor_eqsat.zoo.reduced import REDUCED_PARAMS

MODELS = ("squeezenet", "nasneta", "inceptionv3", "resnext50", "mobilenetv2")
KINDS = (ExtractorKind.GREEDY_TREE, ExtractorKind.GREEDY_DAG, ExtractorKind.GREEDY_OCF)


@functools.cache
def _rules() -> list[Rewrite | MultiRewrite]:
    return to_rewrites(load_rule_set())


def _answers(eg: EGraph) -> dict[ExtractorKind, tuple[float, list[object]]]:
    ep = problem_from_egraph(eg, parse_cost_model("roofline"))
    out = {}
    for kind in KINDS:
        r = make_extractor(kind).extract(ep.problem)
        out[kind] = (r.dag_cost(), list(ep.choice(r).values()))
    return out


def _walk(model: str, seed: int, steps: int, limit: int) -> int:
    """Grow the model; assert after each changing application; return how many changed it."""
    rng = random.Random(seed)
    eg = EGraph.from_graph(zoo.get(model, **REDUCED_PARAMS[model]))
    cm = parse_cost_model("roofline")
    before = _answers(eg)
    changed = 0
    for step in range(steps):
        candidates = [r for r in _rules() if r.has_match(eg)]
        if not candidates:
            break
        rule = rng.choice(candidates)
        if not apply_rule(eg, rule, node_budget=max(1, limit - eg.num_enodes)).changed:
            continue
        changed += 1
        assert find_cycle(eg) is None
        ep = problem_from_egraph(eg, cm)
        for kind, (cost, nodes) in before.items():
            carried = ExtractionResult(ep.problem, tuple(ep.carry_over(nodes)), "carried", 0.0, 0.0)
            where = f"{model} seed {seed} step {step} {rule.name}: {kind.value}'s earlier answer"
            assert carried.is_valid(), f"{where} is no longer a valid extraction"
            assert carried.dag_cost() <= cost * (1 + 1e-9) + 1e-12, f"{where} costs more"
        before = _answers(eg)
    return changed


@pytest.mark.parametrize("model", MODELS)
def test_seeded_walks_keep_every_earlier_answer(model: str) -> None:
    # Seeds 2 and 3 of the benchmark's walks, fewer steps (seeds 0 and 1 leave reduced
    # Inception-v3 unchanged): the walks must really change the e-graph.
    assert sum(_walk(model, seed, steps=6, limit=700) for seed in (2, 3)) > 0


@settings(max_examples=10, deadline=None)
@given(st.sampled_from(MODELS), st.integers(0, 2**31 - 1))
def test_random_walks_keep_every_earlier_answer(model: str, seed: int) -> None:
    _walk(model, seed, steps=5, limit=600)


def test_the_squeezenet_walk_that_looked_like_a_loss_keeps_its_answer() -> None:
    # cycle_cut.py's seed-1 SqueezeNet walk, whose step 11 SCIP priced higher at its time limit.
    assert _walk("squeezenet", 1, steps=12, limit=1500) >= 10
