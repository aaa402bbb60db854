"""Shape instantiation: instances type-check, are distinct, respect conditions and reach the
broadcasting and grouping cases the verifier needs."""

from __future__ import annotations

import random

from tensor_eqsat.rules.instantiate import Instance, InstanceSearch, ShapeSpace, explore, pattern_shapes
from tensor_eqsat.rules.loader import parse_rules
from tensor_eqsat.rules.rule_spec import RuleSpec
from tensor_eqsat.rules.sets import load_rule_set


def one(text: str) -> RuleSpec:
    (rule,) = parse_rules(text, "test.rules")
    return rule


def test_every_instance_type_checks_and_is_distinct():
    rule = load_rule_set("taso").by_id(91)
    search = InstanceSearch(rule)
    found = search.explore(seed=3)
    assert len(found) >= 20
    assert len({i.key() for i in found}) == len(found)
    for inst in found:
        assert search.check(inst)
        for lhs, rhs in [(pattern_shapes(p, inst), pattern_shapes(q, inst)) for p, q in rule.pairs]:
            assert lhs == rhs


def test_conditions_hold_in_every_instance():
    rule = one("rule 0 r single\n (ewadd ?a ?b) => (ewadd ?b ?a)\n if (== (rank ?a) 3)\n if (< (dim ?b 0) 3)")
    found = explore(rule, seed=0)
    assert found
    assert all(len(i.shapes["a"]) == 3 and i.shapes["b"][0] < 3 for i in found)


def test_broadcasting_cases_are_reached():
    found = explore(one("rule 0 r single\n (ewadd ?a ?b) => (ewadd ?b ?a)"), seed=0)
    pairs = [(i.shapes["a"], i.shapes["b"]) for i in found]
    assert any(len(a) != len(b) for a, b in pairs)  # rank broadcasting
    assert any(len(a) == len(b) and a != b for a, b in pairs)  # dims of 1 against larger ones
    assert any(len(a) == 0 or len(b) == 0 for a, b in pairs)  # scalars


def test_grouped_convs_are_reached():
    found = explore(one("rule 0 r single\n (relu (conv2d ?x ?w)) => (conv2d activation=relu ?x ?w)"), seed=0)
    groups = {i.shapes["x"][1] // i.shapes["w"][1] for i in found}
    assert 1 in groups and len(groups) >= 3


def test_rank_vectors_of_a_conv_rule_are_all_4d():
    search = InstanceSearch(load_rule_set("taso").by_id(120))
    vectors = search.rank_vectors(random.Random(0))
    assert vectors == [{"x": 4, "w": 4}]


def test_every_check_sits_at_exactly_one_level():
    search = InstanceSearch(load_rule_set("taso").by_id(137))
    levels = [i for level in search.levels for i in level]
    assert sorted(levels) == list(range(len(search.items)))
    assert search.levels[0] == []  # nothing can be judged before a variable is chosen
    assert set(search.order) == {"x", "w1", "w2"}


def test_attribute_variables_take_values_of_their_attribute():
    rule = one(
        "rule 0 r single\n (relu (conv2d activation=?act ?x ?w)) => (relu (conv2d activation=?act ?x ?w))"
    )
    found = explore(rule, seed=0)
    assert {i.attrs["act"] for i in found} <= {"none", "relu", "sigmoid", "tanh"}
    assert len({i.attrs["act"] for i in found}) >= 2


def test_a_rule_that_never_type_checks_has_no_instances():
    assert explore(one("rule 0 r single\n (concat axis=6 ?a ?b) => (concat axis=6 ?b ?a)"), seed=0) == []


def test_a_smaller_space_is_respected():
    space = ShapeSpace(ranks=(2,), dims=(2, 3))
    found = explore(one("rule 0 r single\n (matmul ?a ?b) => (matmul ?a ?b)"), seed=0, space=space)
    assert found and all(len(s) == 2 for i in found for s in i.shapes.values())


def test_describe_names_every_variable():
    assert Instance({"a": (2, 3), "b": ()}, {"act": "relu"}).describe() == "?a=(2, 3) ?b=() ?act='relu'"
