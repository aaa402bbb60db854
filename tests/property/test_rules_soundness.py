"""Property: every built-in rule agrees on numbers for instances drawn independently of the
verifier's own seed (other search seeds, other data seeds)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tensor_eqsat.rules.instantiate import InstanceSearch
from tensor_eqsat.rules.sets import load_rule_set
from tensor_eqsat.rules.soundness import check_instance

RULES = [
    *load_rule_set("taso"),
    load_rule_set("taso-nasrnn").by_id(128),
    *(r for r in load_rule_set("taso-transformer") if r.id >= 200),
]


@given(
    rule_index=st.integers(0, len(RULES) - 1),
    search_seed=st.integers(1, 10**6),
    data_seed=st.integers(0, 10**6),
    pick=st.integers(0, 10**6),
)
def test_builtin_rules_hold_on_independent_instances(rule_index, search_seed, data_seed, pick):
    rule = RULES[rule_index]
    search = InstanceSearch(rule)
    found = search.explore(seed=search_seed, searches=2, limit=40, random_edits=20)
    assert found, f"rule {rule.id}: no instance"
    inst = found[pick % len(found)]
    outputs = search.outputs(inst)
    assert outputs is not None and all(lhs == rhs for lhs, rhs in outputs)
    cex = check_instance(rule, inst, seed=data_seed)
    assert cex is None, f"rule {rule.id} ({rule.name}): {cex.describe()}"
