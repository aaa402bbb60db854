"""Rewrite: a named single-pattern rule ``lhs => rhs`` with optional conditions.

Applying a rule to all its current matches once (:func:`apply_rule`) is the unit of work of both
searches: the saturation runner does it for every rule in every iteration, and MCTS uses it as
one action. For each match, in search order:

1. if the blacklist changed since the search, the match is re-verified (TENSAT's
   ``contains_blacklist``: a blacklisted node is never a rule source);
2. the right-hand side is *planned*: attribute expressions are evaluated and the analysis infers
   the shape of every node not already in the e-graph; a node that does not type-check rejects
   the match before anything is added (TENSAT's CheckApply);
3. a match whose new nodes would reach the matched class is rejected (cycle filter);
4. the plan is committed and its root unioned with the matched class.

The e-graph is rebuilt at the end. The returned :class:`ApplyReport` says whether the e-graph
changed and how many e-nodes were added.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from tensor_eqsat.egraph.errors import MergeConflict
from tensor_eqsat.rewrite.conditions import RuleCondition, condition_vars, holds, normalize_conditions
from tensor_eqsat.rewrite.ematch import INVALID, ClosesCycle, Match, Plan, Searcher, Subst, Template, commit
from tensor_eqsat.rewrite.pattern import Pattern, PatternError, PNode, parse_pattern

if TYPE_CHECKING:
    from tensor_eqsat.egraph.egraph import EGraph


@dataclass(frozen=True)
class ApplyReport:
    """What one application of a rule to its current matches did.

    rule: the rule's name.
    matches: matches considered (pairs of matches for a multi-pattern rule).
    applied: matches that changed the e-graph (new nodes or a union of distinct classes).
    nodes_added: e-nodes after minus e-nodes before (after the rebuild).
    rejected_shape: matches whose right-hand side did not type-check.
    rejected_cycle: matches skipped because they would have closed a cycle.
    rejected_stale: matches no longer present when their turn came (blacklisted meanwhile).
    budget_exhausted: True if the node budget or deadline stopped the application early.
    changed: True if the e-graph is different afterwards.
    seconds: wall time, search included when the rule searched itself.
    """

    rule: str
    matches: int
    applied: int
    nodes_added: int
    rejected_shape: int = 0
    rejected_cycle: int = 0
    rejected_stale: int = 0
    budget_exhausted: bool = False
    changed: bool = False
    seconds: float = 0.0


class Rule(Protocol):
    """What :func:`apply_rule` and the runner need from a rule (Rewrite or MultiRewrite)."""

    name: str

    def run(
        self,
        egraph: EGraph,
        *,
        node_budget: int | None = None,
        match_limit: int | None = None,
        deadline: float | None = None,
    ) -> ApplyReport: ...

    def has_match(self, egraph: EGraph) -> bool: ...


def apply_rule(
    egraph: EGraph,
    rule: Rule,
    *,
    node_budget: int | None = None,
    match_limit: int | None = None,
    deadline: float | None = None,
) -> ApplyReport:
    """Apply ``rule`` (single or multi-pattern) to all its current matches once; rebuilds.

    node_budget: stop once this many e-nodes were added. Default None (no budget).
    match_limit: consider at most this many matches. Default None (all).
    deadline: a ``time.perf_counter()`` value after which no further match is applied.

    >>> from tensor_eqsat.egraph import from_graph
    >>> from tensor_eqsat.ir import Graph
    >>> g = Graph(); a = g.input((2, 2), name="a"); b = g.input((2, 2), name="b")
    >>> g.output(g.ewadd(a, b))
    >>> eg = from_graph(g)
    >>> r = apply_rule(eg, Rewrite.parse("add-comm", "(ewadd ?x ?y)", "(ewadd ?y ?x)"))
    >>> r.changed, r.matches, r.nodes_added, eg.num_classes
    (True, 1, 1, 3)
    >>> apply_rule(eg, Rewrite.parse("add-comm", "(ewadd ?x ?y)", "(ewadd ?y ?x)")).changed
    False
    """
    return rule.run(egraph, node_budget=node_budget, match_limit=match_limit, deadline=deadline)


def check_rule_vars(
    name: str,
    lhs_vars: Iterable[str],
    lhs_attr_vars: Iterable[str],
    rhs: Sequence[Pattern],
    conditions: Sequence[RuleCondition],
) -> None:
    """Raise PatternError for variables a rule uses but its left-hand side(s) do not bind, and for
    a name used both as a tensor and as an attribute variable."""
    tvars = set(lhs_vars)
    avars = set(lhs_attr_vars)
    clash = tvars & avars
    if clash:
        raise PatternError(f"rule {name}: ?{sorted(clash)[0]} is both a tensor and an attribute variable")
    for i, p in enumerate(rhs):
        t = Template(p)
        where = "right-hand side" if len(rhs) == 1 else f"target {i + 1}"
        for v in t.tensor_vars:
            if v not in tvars:
                raise PatternError(f"rule {name}: {where} uses ?{v}, which the left-hand side does not bind")
        for v in t.attr_vars:
            if v not in avars:
                raise PatternError(
                    f"rule {name}: {where} uses attribute ?{v}, which the left-hand side does not bind"
                )
    for i, c in enumerate(conditions):
        for v in condition_vars(c):
            if v not in tvars and v not in avars:
                raise PatternError(f"rule {name}: condition {i + 1} uses unbound ?{v}")


class Rewrite:
    """A single-pattern rewrite rule.

    name: unique name (reports and the runner key statistics by it).
    lhs, rhs: parsed patterns (:func:`~tensor_eqsat.rewrite.pattern.parse_pattern`); the
        left-hand side must be an op pattern, every right-hand variable must be bound by it.
    conditions: parsed conditions, condition text, or callables ``(egraph, eclass, subst)``.

    Raises PatternError at construction for unbound variables or a bare-variable left-hand side.

    >>> r = Rewrite.parse("fuse-relu", "(relu (conv2d ?x ?w))", "(conv2d activation=relu ?x ?w)")
    >>> print(r)
    fuse-relu: (relu (conv2d ?x ?w)) => (conv2d activation=relu ?x ?w)
    >>> Rewrite.parse("bad", "(relu ?x)", "(ewadd ?x ?y)")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tensor_eqsat.rewrite.pattern.PatternError: rule bad: right-hand side uses ?y, which the left-hand ...
    """

    def __init__(
        self,
        name: str,
        lhs: Pattern,
        rhs: Pattern,
        conditions: Sequence[RuleCondition | str] = (),
    ) -> None:
        if not isinstance(lhs, PNode):
            raise PatternError(f"rule {name}: the left-hand side must be an op pattern, not {lhs}")
        self.name = name
        self.lhs = lhs
        self.rhs = rhs
        self.conditions = normalize_conditions(conditions, f"rule {name}")
        self.searcher = Searcher(lhs)
        self.template = Template(rhs)
        check_rule_vars(name, self.searcher.tensor_vars, self.searcher.attr_vars, [rhs], self.conditions)

    @classmethod
    def parse(cls, name: str, lhs: str, rhs: str, conditions: Sequence[RuleCondition | str] = ()) -> Rewrite:
        """Build a rule from pattern text (errors name the rule and the side)."""
        return cls(
            name,
            parse_pattern(lhs, f"rule {name}: left-hand side"),
            parse_pattern(rhs, f"rule {name}: right-hand side"),
            conditions,
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # Compiled closures do not pickle; a rule is rebuilt from its patterns instead.
        return (Rewrite, (self.name, self.lhs, self.rhs, self.conditions))

    def __str__(self) -> str:
        cond = "".join(f" if {c}" for c in self.conditions)
        return f"{self.name}: {self.lhs} => {self.rhs}{cond}"

    def __repr__(self) -> str:
        return f"Rewrite({str(self)!r})"

    # -- search and apply ------------------------------------------------------------------------
    def search(self, egraph: EGraph, limit: int | None = None) -> list[Match]:
        """Matches of the left-hand side whose conditions hold (at most ``limit``)."""
        if not self.conditions:
            return self.searcher.search(egraph, limit)
        out = []
        for m in self.searcher.search(egraph):
            if holds(self.conditions, egraph, m.eclass, m.subst):
                out.append(m)
                if limit is not None and len(out) >= limit:
                    break
        return out

    def has_match(self, egraph: EGraph) -> bool:
        """Whether the left-hand side currently matches (MCTS prunes rules that do not)."""
        return bool(self.search(egraph, limit=1))

    def apply(
        self,
        egraph: EGraph,
        matches: Iterable[Match],
        *,
        node_budget: int | None = None,
        deadline: float | None = None,
        rebuild: bool = True,
    ) -> ApplyReport:
        """Apply the right-hand side to ``matches`` (from :meth:`search`, possibly stale)."""
        return apply_each(self.name, egraph, matches, self._apply_one, node_budget, deadline, rebuild)

    def run(
        self,
        egraph: EGraph,
        *,
        node_budget: int | None = None,
        match_limit: int | None = None,
        deadline: float | None = None,
    ) -> ApplyReport:
        """Search, then apply to every match once, then rebuild (see :func:`apply_rule`)."""
        t0 = time.perf_counter()
        report = self.apply(
            egraph, self.search(egraph, match_limit), node_budget=node_budget, deadline=deadline
        )
        return _with_seconds(report, time.perf_counter() - t0)

    def _apply_one(self, egraph: EGraph, m: Match, stats: _Counts) -> None:
        find = egraph.internals.find
        cid = find(m.eclass)
        subst = m.subst
        if m.stamp != egraph.internals.blacklist_version:
            fresh = revalidate(egraph, self.searcher, cid, subst)
            if fresh is None:
                stats.stale += 1
                return
            subst = fresh
            cid = find(cid)
        plan = Plan(egraph, avoid=(cid,))
        try:
            ref = self.template.plan(subst, plan)
        except ClosesCycle:  # a new node would reach the matched class (see Plan's ``avoid``)
            stats.cycle += 1
            return
        except INVALID:
            stats.shape += 1
            return
        if not keeps_dtype(egraph, cid, plan.value(ref)):
            stats.shape += 1
            return
        check_merge(egraph, self.name, cid, plan.value(ref))
        if ref >= 0:
            if egraph.union(cid, ref):
                stats.applied += 1
            return
        ceiling = egraph.internals.height[cid] if egraph.cycle_filter else None
        root = commit(plan, ref, [], ceiling=ceiling)
        egraph.union(cid, root)
        stats.applied += 1


def keeps_dtype(egraph: EGraph, cid: int, value: object) -> bool:
    """True unless a right-hand side would give class ``cid`` other dtypes than it has: a rule
    applies only where its two sides have the same dtypes (DESIGN.md decision 17), so such a
    match is skipped like an ill-typed one, not an error (``(cast to=float16 ?x) => ?x`` is
    sound exactly where ``?x`` is float16 already)."""
    want = getattr(egraph.internals.data[egraph.find(cid)], "dtypes", None)
    return want is None or getattr(value, "dtypes", None) == want


def check_merge(egraph: EGraph, rule: str, cid: int, value: object) -> None:
    """Raise MergeConflict, naming the rule, if a right-hand side's analysis value cannot be
    merged with the class it is about to join (the rule is unsound, e.g. changes a shape)."""
    try:
        egraph.analysis.merge(egraph.internals.data[egraph.find(cid)], value)
    except MergeConflict as exc:
        raise MergeConflict(f"rule {rule}: right-hand side does not fit e-class {cid}: {exc}") from None


def revalidate(egraph: EGraph, searcher: Searcher, cid: int, subst: Subst) -> Subst | None:
    """Re-match a possibly stale match (the blacklist changed since the search): the
    substitution with canonical class ids if the left-hand side still matches, else None."""
    egraph.rebuild()
    find = egraph.find
    tvars = set(searcher.tensor_vars)
    canon = {k: find(v) if k in tvars else v for k, v in subst.items()}
    own = {k: v for k, v in canon.items() if k in tvars or k in searcher.attr_vars}
    if not searcher.match_class(egraph, find(cid), own):
        return None
    return canon


class _Counts:
    __slots__ = ("applied", "budget", "cycle", "matches", "shape", "stale")

    def __init__(self) -> None:
        self.matches = 0
        self.applied = 0
        self.shape = 0
        self.cycle = 0
        self.stale = 0
        self.budget = False

    def report(self, name: str, egraph: EGraph, v0: int, n0: int, t0: float) -> ApplyReport:
        return ApplyReport(
            rule=name,
            matches=self.matches,
            applied=self.applied,
            nodes_added=egraph.num_enodes - n0,
            rejected_shape=self.shape,
            rejected_cycle=self.cycle,
            rejected_stale=self.stale,
            budget_exhausted=self.budget,
            changed=egraph.version != v0,
            seconds=time.perf_counter() - t0,
        )


def apply_each(
    name: str,
    egraph: EGraph,
    items: Iterable[Any],
    apply_one: Callable[[EGraph, Any, _Counts], None],
    node_budget: int | None,
    deadline: float | None,
    rebuild: bool,
) -> ApplyReport:
    """Apply ``apply_one`` to each match (single) or pair (multi) until the node budget or the
    deadline runs out, then rebuild: the one loop behind both rule kinds' ``apply``."""
    t0 = time.perf_counter()
    v0 = egraph.version
    n0 = egraph.num_enodes
    stats = _Counts()
    internals = egraph.internals
    for item in items:
        if node_budget is not None and egraph.num_enodes - n0 >= node_budget:
            stats.budget = True
            break
        if deadline is not None and time.perf_counter() >= deadline:
            stats.budget = True
            break
        stats.matches += 1
        start = internals.next_node
        apply_one(egraph, item, stats)
        if internals.next_node > start:  # one span per application (egraph/origins.py)
            internals.note_origin(start, name)
    if rebuild:
        egraph.rebuild()
    return stats.report(name, egraph, v0, n0, t0)


def _with_seconds(report: ApplyReport, seconds: float) -> ApplyReport:
    from dataclasses import replace

    return replace(report, seconds=seconds)
