"""Property test: the multi-pattern join (shared variables plus concat shape keys) applies exactly
what testing the whole product of source matches applied.

A reduced zoo model is grown by a random, seeded sequence of the built-in rules; then every
multi-pattern rule is applied once with the shape keys and once without (the product the join
replaces, minus only the shared-variable buckets). The two e-graphs must be equal and the
applications must report the same number of applied pairs; the join may only consider fewer
pairs.
"""

from __future__ import annotations

import functools

from hypothesis import given, settings
from hypothesis import strategies as st

from tensor_eqsat import zoo
from tensor_eqsat.egraph import from_graph
from tensor_eqsat.rewrite import MultiRewrite, Rewrite, apply_rule
from tensor_eqsat.rules.rewrites import to_rewrites
from tensor_eqsat.rules.sets import load_rule_set
from tensor_eqsat.zoo.reduced import REDUCED_PARAMS

MODELS = ("squeezenet", "nasneta", "nasrnn", "inceptionv3")


@functools.cache
def _rules() -> list[Rewrite | MultiRewrite]:
    return to_rewrites(load_rule_set())


@settings(max_examples=12)
@given(st.sampled_from(MODELS), st.lists(st.integers(0, 138), min_size=0, max_size=6))
def test_join_applies_what_the_product_applies(model: str, actions: list[int]) -> None:
    rules = _rules()
    eg = from_graph(zoo.get(model, **REDUCED_PARAMS[model]))
    for a in actions:
        apply_rule(eg, rules[a % len(rules)], node_budget=300)
    for rule in rules:
        if not isinstance(rule, MultiRewrite) or not rule._concat_keys:
            continue
        joined, product = eg.copy(), eg.copy()
        r1 = apply_rule(joined, rule, node_budget=400)
        keys = rule._concat_keys
        rule._concat_keys = ()
        try:
            r2 = apply_rule(product, rule, node_budget=400)
        finally:
            rule._concat_keys = keys
        assert (r1.applied, r1.nodes_added) == (r2.applied, r2.nodes_added), rule.name
        assert r1.matches <= r2.matches
        assert joined.content_hash() == product.content_hash(), rule.name
