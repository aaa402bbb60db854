"""Property test: greedy-OCF through a memo prices every e-graph exactly as a fresh extraction.

A search prices e-graph after e-graph, each its parent plus one rule application, but not
always the parent of the e-graph priced just before (a rollout ends, the next one starts from
another tree node). Here a reduced zoo model grows a seeded tree of states: each new state is a
copy of a random earlier one with a random applicable rule applied, and one memo prices them in
creation order. Every memo pricing must give the fresh extraction's reported cost, bit for bit,
and the same choices; and the memo must really skip work.
"""

from __future__ import annotations

import functools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensor_eqsat import zoo
from tensor_eqsat.cost.spec import parse_cost_model
from tensor_eqsat.egraph import EGraph
from tensor_eqsat.extract.egraph_problem import problem_from_egraph
from tensor_eqsat.extract.greedy_ocf import GreedyOcfExtractor, OcfMemo
from tensor_eqsat.extract.problem import ClassOrder
from tensor_eqsat.rewrite import MultiRewrite, Rewrite, apply_rule
from tensor_eqsat.rules.rewrites import to_rewrites
from tensor_eqsat.rules.sets import load_rule_set
from tensor_eqsat.zoo.reduced import REDUCED_PARAMS

MODELS = ("squeezenet", "nasrnn", "mobilenetv2", "bert", "inceptionv3")


@functools.cache
def _rules() -> list[Rewrite | MultiRewrite]:
    return to_rewrites(load_rule_set())


def _grow_and_price(model: str, seed: int, states: int, limit: int) -> tuple[int, int]:
    """Grow a tree of ``states`` e-graphs, price each through one memo and afresh; assert they
    agree; return (classes priced, classes taken from the memo)."""
    rng = random.Random(seed)
    cm = parse_cost_model("roofline")
    extractor = GreedyOcfExtractor()
    memo = OcfMemo()
    tree = [EGraph.from_graph(zoo.get(model, **REDUCED_PARAMS[model]))]
    classes = reused = 0
    for i in range(states):
        eg = tree[-1] if i == 0 else rng.choice(tree).copy()
        if i:
            candidates = [r for r in _rules() if r.has_match(eg)]
            if not candidates:
                continue
            apply_rule(eg, rng.choice(candidates), node_budget=max(1, limit - eg.num_enodes))
            tree.append(eg)
        ep = problem_from_egraph(eg, cm)
        fresh = extractor.extract(ep.problem)
        memoized = extractor.extract_incremental(ep.problem, ep.enodes, memo)
        where = f"{model} seed {seed} state {i}"
        assert memoized.reported_cost == fresh.reported_cost, where
        assert memoized.choices == fresh.choices, where
        classes += ep.problem.num_classes
        reused += memoized.stats["reused"]
    return classes, reused


@pytest.mark.parametrize("model", MODELS)
def test_memo_pricing_equals_fresh_extraction_on_a_tree_of_states(model: str) -> None:
    classes, reused = _grow_and_price(model, seed=0, states=16, limit=800)
    assert 0 < reused < classes  # the memo was used, and states differed


@settings(max_examples=10, deadline=None)
@given(st.sampled_from(MODELS), st.integers(0, 2**31 - 1))
def test_memo_pricing_equals_fresh_extraction_for_random_trees(model: str, seed: int) -> None:
    _grow_and_price(model, seed, states=8, limit=600)


def test_a_memo_entry_for_an_unrelated_egraph_is_not_trusted() -> None:
    # Two different models' e-graphs reuse class ids with other meanings: pricing one after the
    # other through the same memo must still give each one's fresh answer.
    cm = parse_cost_model("roofline")
    extractor = GreedyOcfExtractor()
    memo = OcfMemo()
    for model in ("squeezenet", "nasrnn", "squeezenet"):
        ep = problem_from_egraph(EGraph.from_graph(zoo.get(model, **REDUCED_PARAMS[model])), cm)
        fresh = extractor.extract(ep.problem)
        memoized = extractor.extract_incremental(ep.problem, ep.enodes, memo)
        assert (memoized.reported_cost, memoized.choices) == (fresh.reported_cost, fresh.choices)


def test_a_memo_entry_with_the_same_nodes_at_other_shapes_is_not_trusted() -> None:
    # The same network at two image sizes: e-nodes above the inputs are equal values (same ops,
    # attributes and child ids), their costs are not, and the memo must see that.
    cm = parse_cost_model("roofline")
    extractor = GreedyOcfExtractor()
    memo = OcfMemo()
    reused = []
    for image in (32, 64, 32):
        params = {**REDUCED_PARAMS["mobilenetv2"], "image": image}
        ep = problem_from_egraph(EGraph.from_graph(zoo.get("mobilenetv2", **params)), cm)
        fresh = extractor.extract(ep.problem)
        memoized = extractor.extract_incremental(ep.problem, ep.enodes, memo)
        assert (memoized.reported_cost, memoized.choices) == (fresh.reported_cost, fresh.choices)
        reused.append(memoized.stats["reused"])
    assert reused[1] > 0  # some classes (those whose costs do not depend on the size) were reused


def test_blacklisting_a_chosen_node_is_seen() -> None:
    cm = parse_cost_model("roofline")
    extractor = GreedyOcfExtractor()
    rng = random.Random(0)
    eg = EGraph.from_graph(zoo.get("squeezenet", **REDUCED_PARAMS["squeezenet"]))
    for _ in range(6):
        apply_rule(eg, rng.choice([r for r in _rules() if r.has_match(eg)]), node_budget=200)
    memo = OcfMemo()
    ep = problem_from_egraph(eg, cm)
    base = extractor.extract_incremental(ep.problem, ep.enodes, memo)
    choice = ep.choice(base)
    changed = 0
    for cid in [c.id for c in eg.classes() if len(c.nodes) > 1 and c.id in choice][:8]:
        copy = eg.copy()
        copy.blacklist_node(choice[cid])
        ep = problem_from_egraph(copy, cm)
        fresh = extractor.extract(ep.problem)
        memoized = extractor.extract_incremental(ep.problem, ep.enodes, memo)
        assert (memoized.reported_cost, memoized.choices) == (fresh.reported_cost, fresh.choices)
        changed += fresh.choices != base.choices
    assert changed


def test_other_class_orders_fall_back_to_the_sweeps() -> None:
    cm = parse_cost_model("roofline")
    ep = problem_from_egraph(EGraph.from_graph(zoo.get("squeezenet", **REDUCED_PARAMS["squeezenet"])), cm)
    memo = OcfMemo()
    extractor = GreedyOcfExtractor(order=ClassOrder.PROBLEM)
    r = extractor.extract_incremental(ep.problem, ep.enodes, memo)
    assert r.reported_cost == extractor.extract(ep.problem).reported_cost
    assert "reused" not in r.stats and not memo.entries
