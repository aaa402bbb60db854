"""The rule files in the e-graph engine: every rule loads, fires on its own left side and adds
exactly its right side to the matched class (saturating whole models is in
tests/integration/test_rules_saturation.py)."""

from __future__ import annotations

import dataclasses

from tensor_eqsat.egraph import from_graph
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.ops import get_op
from tensor_eqsat.rewrite import MultiRewrite, Rewrite, apply_rule, lookup_pattern
from tensor_eqsat.rewrite.pattern import PROJECTION, Pattern, PNode, Var
from tensor_eqsat.rules.instantiate import Instance, explore, node_attrs, pattern_shapes
from tensor_eqsat.rules.rewrites import runner_rules, to_rewrite, to_rewrites
from tensor_eqsat.rules.rule_spec import RuleKind, RuleSpec
from tensor_eqsat.rules.sets import load_rule_set, rule_set_names
from tensor_eqsat.rules.soundness import build_graph


def test_all_rules_load_into_the_engine():
    for name in rule_set_names():
        rules = load_rule_set(name)
        rewrites = to_rewrites(rules)
        # the scalar-scale rules 200-203; the inference rules 300-341 (4 single, 4 multi, 6 single,
        # 2 + 4 single, 2 single)
        extra = {"taso-transformer": 4, "taso-inference": 22}.get(name, 0)
        extra_multi = 4 if name == "taso-inference" else 0
        assert len(rewrites) == 139 + extra + extra_multi
        for rule, rw in zip(rules, rewrites, strict=True):
            assert rw.name == rule.name
            assert tuple(rw.conditions) == rule.conditions
            if rule.kind is RuleKind.SINGLE:
                assert isinstance(rw, Rewrite) and (rw.lhs, rw.rhs) == (rule.lhs[0], rule.rhs[0])
            else:
                assert isinstance(rw, MultiRewrite)
                assert (rw.sources, rw.targets, rw.symmetric) == (rule.lhs, rule.rhs, rule.symmetric)
        single, multi = runner_rules(rules)
        assert (len(single), len(multi)) == (124 + extra, 15 + extra_multi)


def ground(p: Pattern, inst: Instance) -> PNode:
    """``p`` with variables replaced by the weights of the instance's graph and attribute
    expressions evaluated: a term :func:`lookup_pattern` can find."""
    if isinstance(p, Var):
        attrs = get_op("weight").make_attrs(shape=inst.shapes[p.name], name=p.name)
        return PNode("weight", tuple(zip(get_op("weight").attr_names, attrs, strict=True)), ())
    children = tuple(ground(c, inst) for c in p.children)
    if p.op == PROJECTION:
        return PNode(p.op, p.attrs, children)
    spec = get_op(p.op)
    values = node_attrs(p, inst)
    if spec.canonicalize is not None:
        ins = [pattern_shapes(c, inst)[0] for c in p.children]
        values = spec.canonicalize(ins, values)
    return PNode(p.op, tuple(zip(spec.attr_names, spec.make_attrs(**values), strict=True)), children)


def distinct_rules() -> list[RuleSpec]:
    seen, out = set(), []
    for name in rule_set_names():
        for r in load_rule_set(name):
            key = (r.lhs, r.rhs, r.conditions)
            if key not in seen:
                seen.add(key)
                out.append(r)
    return out


def test_every_rule_fires_on_its_left_side_and_adds_its_right_side():
    for rule in distinct_rules():
        inst = explore(rule, seed=0, searches=1, limit=1)[0]
        # A graph whose outputs are the rule's left sides under the instance.
        graph: Graph = build_graph(dataclasses.replace(rule, rhs=rule.lhs), inst)
        egraph = from_graph(graph)
        roots = egraph.roots[::2]
        report = apply_rule(egraph, to_rewrite(rule))
        assert report.applied >= 1, (rule.id, rule.name, report)
        for root, rhs in zip(roots, rule.rhs, strict=True):
            cid = lookup_pattern(egraph, ground(rhs, inst))
            assert cid is not None and egraph.find(cid) == egraph.find(root), (rule.id, rule.name)
