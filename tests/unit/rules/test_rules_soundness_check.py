"""The numeric verifier: every built-in rule holds, and wrong rules are caught with a
counterexample."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tensor_eqsat.rewrite.pattern import PNode
from tensor_eqsat.rules.instantiate import Instance
from tensor_eqsat.rules.loader import parse_rules
from tensor_eqsat.rules.rule_spec import RuleSpec
from tensor_eqsat.rules.sets import load_rule_set
from tensor_eqsat.rules.soundness import (
    VerifyConfig,
    build_graph,
    check_instance,
    leaf_data,
    verify_rule,
    verify_rules,
)


def one(text: str) -> RuleSpec:
    (rule,) = parse_rules(text, "test.rules")
    return rule


def test_every_builtin_rule_verifies():
    # Both sets: the NASRNN variant adds one distinct rule; equal rules are verified once.
    rules = [*load_rule_set("taso"), *load_rule_set("taso-nasrnn")]
    report = verify_rules(rules)
    failed = [
        (v.rule_id, v.name, v.reason, v.counterexample and v.counterexample.describe()) for v in report.failed
    ]
    assert failed == []
    assert len(report) == 278
    for v in report.verdicts:
        assert v.shape_checks >= 10 and v.numeric_checks >= 5, (v.rule_id, v.shape_checks, v.numeric_checks)


def test_the_scalar_scale_rules_verify_at_every_rank():
    rules = [r for r in load_rule_set("taso-transformer") if r.id >= 200]
    report = verify_rules(rules)
    assert [v.rule_id for v in report.verdicts if v.verified] == [200, 201, 202, 203]
    for v in report.verdicts:
        assert v.numeric_checks >= 5, (v.rule_id, v.numeric_checks)
        assert {2, 3, 4} <= set(v.ranks), (v.rule_id, v.ranks)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        # a*(a+b) is not a + a*b
        ("rule 0 w single\n (ewadd ?a (ewmul ?a ?b)) => (ewmul ?a (ewadd ?a ?b))", "value"),
        # concatenation is not commutative
        ("rule 0 w single\n (concat axis=0 ?a ?b) => (concat axis=0 ?b ?a)", "value"),
        # relu does not commute with scaling by a negative number
        ("rule 0 w single\n (relu (smul scalar=-2.0 ?a)) => (smul scalar=-2.0 (relu ?a))", "value"),
        # the fused activation is applied after the conv, not before
        ("rule 0 w single\n (conv2d activation=relu ?x ?w) => (conv2d (relu ?x) ?w)", "value"),
        # the scalar-scale rules: both scales must reach the product, each once
        (
            "rule 0 w single\n (matmul (smul scalar=?s ?a) (smul scalar=?t ?b)) => (matmul (smul scalar=?s ?a) ?b)",  # noqa: E501
            "value",
        ),
        ("rule 0 w single\n (smul scalar=?s (smul scalar=?t ?x)) => (smul scalar=(mul ?s ?s) ?x)", "value"),
        # a transposed product has another shape
        (
            "rule 0 w single\n (matmul ?a ?b) => (matmul (transpose perm=[1 0] ?b) (transpose perm=[1 0] ?a))",  # noqa: E501
            "shape",
        ),
    ],
)
def test_wrong_rules_are_caught(text, problem):
    verdict = verify_rule(one(text))
    assert not verdict.verified
    assert verdict.counterexample is not None and verdict.counterexample.problem == problem
    cex = verdict.counterexample
    replay = check_instance(one(text), cex.instance, seed=0)
    assert replay is not None  # the counterexample replays
    if problem == "value":
        assert cex.max_error > 1e-3
        assert "max |lhs - rhs|" in cex.describe()
    else:
        assert cex.lhs_shape != cex.rhs_shape


def test_a_wrong_second_pair_of_a_multi_rule_is_reported_as_pair_1():
    split = "(split axis=0 sizes=[(dim ?a 0) (dim ?b 0)] (relu (concat axis=0 ?a ?b)))"
    rule = one(f"rule 0 w multi\n (relu ?a) => (get index=0 {split})\n (relu ?b) => (get index=0 {split})")
    verdict = verify_rule(rule)
    assert not verdict.verified and verdict.counterexample is not None
    assert verdict.counterexample.pair == 1


def drop_conditions(rule: RuleSpec) -> RuleSpec:
    return dataclasses.replace(rule, conditions=())


@pytest.mark.parametrize(
    ("rule_id", "problem"),
    [
        (110, "shape"),  # concat-hoist: ewadd broadcasting along the concat axis
        (72, "shape"),  # a batched weight times a matrix: the product's column axis is not ?a's
        (2, "shape"),  # rank-general row-axis concats: a batched ?c moves the product's row axis
        (7, "shape"),  # rank-general column-axis concats: a batched ?b moves the column axis
        (73, "shape"),
        (114, "value"),  # grouped conv: concatenated weights interleave the groups differently
        (58, "value"),  # a 1x1 kernel broadcast into a 3x3 one is not a 1x1 conv
    ],
)
def test_builtin_rules_fail_without_their_conditions(rule_id, problem):
    rule = load_rule_set("taso").by_id(rule_id)
    assert rule.conditions
    verdict = verify_rule(drop_conditions(rule))
    assert not verdict.verified
    assert verdict.counterexample is not None and verdict.counterexample.problem == problem


@pytest.mark.parametrize(
    ("rule_id", "shapes"),
    [
        # A batched weight times a matrix whose row count happens to equal the two column counts:
        # the product's split then type-checks along the wrong axis. The search does not reach
        # this coincidence on its own, so the instance is given.
        (128, {"a": (2, 2), "b": (1, 2, 1), "c": (1, 2, 1)}),
        (129, {"a": (2, 2), "b": (4, 2, 3), "c": (2, 2)}),
    ],
)
def test_matmul_split_rules_need_their_rank_condition(rule_id, shapes):
    from tensor_eqsat.rules.instantiate import InstanceSearch

    rule = load_rule_set("taso").by_id(rule_id)
    inst = Instance(shapes)
    unconditioned = InstanceSearch(drop_conditions(rule))
    assert unconditioned.check(inst)
    outputs = unconditioned.outputs(inst)
    assert outputs is not None and any(lhs != rhs for lhs, rhs in outputs)
    assert not InstanceSearch(rule).check(inst)  # the condition excludes it


def test_every_builtin_rule_is_checked_at_ranks_2_3_and_4():
    # Rules over matrices and elementwise ops run on numbers at top ranks 2, 3 and 4 (batched
    # and broadcast operands); rules with a conv, pool, merge or enlarge only exist at rank 4.
    four_d = {"conv2d", "poolmax", "poolavg", "merge", "enlarge", "batchnorm"}
    from tensor_eqsat.rewrite.pattern import walk

    for v, rule in zip(verify_rules(load_rule_set("taso")).verdicts, load_rule_set("taso"), strict=True):
        ops = {q.op for p in (*rule.lhs, *rule.rhs) for q in walk(p) if isinstance(q, PNode)}
        expected = {4} if ops & four_d else {2, 3, 4}
        assert expected <= set(v.ranks), (rule.id, v.ranks)


def test_rank_general_rules_hold_for_a_rank_3_activation_times_rank_2_weights():
    rules = load_rule_set("taso")
    cases = {
        72: {"a": (2, 5, 4), "b": (4, 3), "c": (4, 6)},
        128: {"a": (2, 5, 4), "b": (4, 3), "c": (4, 6)},
        69: {"a": (2, 5, 4), "b": (4, 3), "c": (2, 5, 2), "d": (2, 3)},
        129: {"a": (2, 5, 4), "b": (4, 3), "c": (2, 1, 4)},
    }
    for rule_id, shapes in cases.items():
        rule = rules.by_id(rule_id)
        inst = Instance(shapes)
        from tensor_eqsat.rules.instantiate import InstanceSearch

        assert InstanceSearch(rule).check(inst), rule_id
        assert check_instance(rule, inst) is None, rule_id


def test_enlarge_rule_needs_its_kernel_parity_condition():
    rule = load_rule_set("taso").by_id(137)
    even_in_odd = Instance({"x": (1, 2, 5, 5), "w1": (2, 2, 2, 2), "w2": (2, 2, 3, 3)})
    odd_in_odd = Instance({"x": (1, 2, 5, 5), "w1": (2, 2, 1, 1), "w2": (2, 2, 3, 3)})
    even_in_even = Instance({"x": (1, 2, 5, 5), "w1": (2, 2, 2, 2), "w2": (2, 2, 4, 4)})
    cex = check_instance(rule, even_in_odd)
    assert cex is not None and cex.problem == "value"
    assert check_instance(rule, odd_in_odd) is None
    assert check_instance(rule, even_in_even) is None
    from tensor_eqsat.rules.instantiate import InstanceSearch

    search = InstanceSearch(rule)
    assert not search.check(even_in_odd)  # the condition excludes exactly the failing case
    assert search.check(odd_in_odd) and search.check(even_in_even)


def test_a_rule_that_never_type_checks_is_not_verified():
    verdict = verify_rule(one("rule 0 never single\n (concat axis=7 ?a ?b) => (concat axis=7 ?b ?a)"))
    assert not verdict.verified
    assert verdict.counterexample is None
    assert verdict.reason.startswith("no shapes found")


def test_conditions_restrict_the_instances():
    # The plain rule is wrong under broadcasting; with the condition it verifies.
    text = (
        "rule 0 r single\n (concat axis=0 (relu ?a) (ewadd ?b ?c)) => (concat axis=0 (relu ?a) (ewadd ?c ?b))"
    )
    assert verify_rule(one(text)).verified  # ewadd is commutative under broadcasting too
    wrong = (
        "rule 0 r single\n (concat axis=0 (ewadd ?a ?b) (ewadd ?a ?c)) => (ewadd ?a (concat axis=0 ?b ?c))"
    )
    assert not verify_rule(one(wrong)).verified
    fixed = wrong + "\n if (== (rank ?a) 0)"
    assert verify_rule(one(fixed)).verified


def test_verification_is_deterministic_and_seeded():
    rule = load_rule_set("taso").by_id(91)
    a, b = verify_rule(rule), verify_rule(rule)
    assert (a.verified, a.shape_checks, a.numeric_checks) == (b.verified, b.shape_checks, b.numeric_checks)
    wrong = one("rule 0 w single\n (ewadd ?a (ewmul ?a ?b)) => (ewmul ?a (ewadd ?a ?b))")
    c1, c2 = verify_rule(wrong).counterexample, verify_rule(wrong).counterexample
    assert c1 == c2
    other = verify_rule(rule, VerifyConfig(seed=5))
    assert other.verified


def test_build_graph_shares_variables_and_orders_outputs():
    rule = load_rule_set("taso").by_id(128)
    inst = Instance({"a": (3, 4), "b": (4, 2), "c": (4, 5)})
    g = build_graph(rule, inst)
    assert [g.shape_of(ref) for ref in g.outputs] == [(3, 2), (3, 2), (3, 5), (3, 5)]
    assert sorted(g.name_of(n.id) for n in g.weights()) == ["a", "b", "c"]
    data = leaf_data(rule, inst, seed=3)
    assert all(np.all(np.abs(v) <= 1) for v in data.values())
    assert check_instance(rule, inst) is None


def test_verify_rules_reports_in_order_and_calls_progress():
    rules = list(load_rule_set("taso"))[:3]
    seen = []
    report = verify_rules(rules, progress=seen.append)
    assert [v.rule_id for v in report.verdicts] == [0, 1, 2] == [v.rule_id for v in seen]
    assert report.all_verified and report.failed == []
    assert report.verdicts[0].to_json()["verified"] is True
