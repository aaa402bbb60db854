"""The rule files as the e-graph engine's rewrites: RuleSpec -> Rewrite / MultiRewrite.

The loader keeps rules as plain data so that it does not depend on the engine; this adapter is
the one place that knows both. Names carry over (the runner keys its statistics by them), and so
do conditions and the symmetric flag; the rule id is the position in the list a RuleSet gives.
"""

from __future__ import annotations

from collections.abc import Iterable

from tensor_eqsat.rewrite.multi import MultiRewrite
from tensor_eqsat.rewrite.rewrite import Rewrite
from tensor_eqsat.rules.rule_spec import RuleKind, RuleSpec


def to_rewrite(rule: RuleSpec) -> Rewrite | MultiRewrite:
    """The engine's rewrite for one rule.

    >>> from tensor_eqsat.rules.sets import load_rule_set
    >>> print(to_rewrite(load_rule_set().by_id(62)))
    conv-relu-fuse: (relu (conv2d ?x ?w)) => (conv2d activation=relu ?x ?w)
    >>> to_rewrite(load_rule_set().by_id(128)).shared_vars
    ['a']
    """
    if rule.kind is RuleKind.SINGLE:
        (lhs,), (rhs,) = rule.lhs, rule.rhs
        return Rewrite(rule.name, lhs, rhs, rule.conditions)
    return MultiRewrite(rule.name, rule.lhs, rule.rhs, rule.conditions, symmetric=rule.symmetric)


def to_rewrites(rules: Iterable[RuleSpec]) -> list[Rewrite | MultiRewrite]:
    """The engine's rewrites for ``rules``, in the same order (for a RuleSet: by id, so the
    position is the paper's rule index, which MCTS uses as its action)."""
    return [to_rewrite(r) for r in rules]


def runner_rules(rules: Iterable[RuleSpec]) -> tuple[list[Rewrite], list[MultiRewrite]]:
    """The single and the multi-pattern rewrites, each in order, as
    :class:`~tensor_eqsat.search.runner.Runner` takes them: ``Runner(*runner_rules(rules))``."""
    single: list[Rewrite] = []
    multi: list[MultiRewrite] = []
    for rw in to_rewrites(rules):
        if isinstance(rw, MultiRewrite):
            multi.append(rw)
        else:
            single.append(rw)
    return single, multi
