"""Side conditions of rewrite rules.

A condition is either a parsed :class:`~tensor_eqsat.rewrite.pattern.Condition` (``(== (dim ?x 1)
(dim ?w 0))``, text accepted and parsed) over attribute variables and shapes of tensor variables,
or a Python callable ``(egraph, eclass, subst) -> bool`` (egg's ``Condition``), for languages
whose facts are not attributes (the toy arithmetic language's "x is not zero").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Union

from tensor_eqsat.rewrite.ematch import shape_getter
from tensor_eqsat.rewrite.pattern import Condition, check_condition, parse_condition, value_vars

if TYPE_CHECKING:
    from tensor_eqsat.egraph.egraph import EGraph

ConditionFn = Callable[["EGraph", int, Mapping[str, Any]], bool]
RuleCondition = Union[Condition, ConditionFn]  # noqa: UP007
"""A parsed condition or a callable ``(egraph, eclass, subst) -> bool``."""


def normalize_conditions(conditions: Sequence[RuleCondition | str], source: str) -> tuple[RuleCondition, ...]:
    """Parse text conditions; keep parsed ones and callables. Raises PatternError / TypeError."""
    out: list[RuleCondition] = []
    for i, c in enumerate(conditions):
        if isinstance(c, str):
            out.append(parse_condition(c, f"{source}: condition {i + 1}"))
        elif isinstance(c, Condition) or callable(c):
            out.append(c)
        else:
            raise TypeError(f"{source}: condition {i + 1} is {type(c).__name__}, not a condition")
    return tuple(out)


def condition_vars(c: RuleCondition) -> list[str]:
    """Variable names a parsed condition mentions (none for callables)."""
    if isinstance(c, Condition):
        return [v.name for v in value_vars(c.lhs) + value_vars(c.rhs)]
    return []


def holds(conditions: Sequence[RuleCondition], egraph: EGraph, eclass: int, subst: Mapping[str, Any]) -> bool:
    """Whether every condition holds for a match."""
    if not conditions:
        return True
    shape_of = shape_getter(egraph, subst)
    for c in conditions:
        if isinstance(c, Condition):
            if not check_condition(c, subst, shape_of):
                return False
        elif not c(egraph, eclass, subst):
            return False
    return True
