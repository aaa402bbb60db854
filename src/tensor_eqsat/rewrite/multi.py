"""MultiRewrite: two source patterns rewritten together into two targets (TENSAT §2.4).

A multi-pattern rule fires on a *pair* of matches, one per source, that agree on every shared
variable (same class for tensor variables, same value for attribute variables). Both targets are
planned together (a node they share, such as the ``split`` under ``(get index=0 ...)`` and
``(get index=1 ...)``, is added once), type-checked before anything is added, filtered for cycles,
committed, and unioned with their source classes: target 1 with match 1's class, target 2 with
match 2's class.

Pairs are enumerated as TENSAT does: each source is canonicalized (variables renamed in order of
first appearance) so that equal sources are searched once; a *symmetric* rule whose two sources
are the same canonical pattern iterates unordered pairs ``i < j`` of that one match list (the
swapped pair would give the mirrored result); otherwise the full product. A pair whose two matches
are in the same class is skipped. Pairs are generated lazily, so a node budget that runs out early
does not pay for the whole product.

The pairs are found by a hash join, never by testing the product: each match is keyed by the
values of the shared variables and by a *shape key* for every ``(concat axis=K ?u ?v)`` of the
targets whose two operands come one from each source (the rank and the dims outside axis K,
which concat needs equal). Only pairs with equal keys are built and type-checked, so the
relu-concat rules, which share no variable, no longer plan and reject the whole quadratic
product (issue 15: 793k right-hand sides planned in one SqueezeNet MCTS run, most of them for
nothing).
A match whose class cannot be a concat operand at all (a tuple-valued class, a rank <= K) joins
nothing. The key is a necessary condition of the type check, so the surviving pairs, in the same
order, are exactly the ones the product would have applied.

Unlike TENSAT's pass, the cycle check runs against the current e-graph for every pair (no stale
descendant map), and newly added nodes are counted against the budget in every mode. It runs
while the pair is planned (``Plan(avoid=...)``): on a chain of same-shaped ``relu`` nodes, as in
MobileNet-v2, most pairs of the relu-concat rules have one node downstream of the other, and they
are now rejected at their first planned node, before the split sizes are evaluated and both
targets type-checked. Such a pair is counted as ``rejected_cycle`` even if a later node of it
would not have type-checked (nothing is added either way).
"""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from tensor_eqsat.egraph.analysis import TensorAnalysis
from tensor_eqsat.rewrite.conditions import RuleCondition, holds, normalize_conditions
from tensor_eqsat.rewrite.ematch import INVALID, ClosesCycle, Match, Plan, Searcher, Subst, Template, commit
from tensor_eqsat.rewrite.pattern import (
    AttrValue,
    AttrVar,
    Expr,
    ListValue,
    Pattern,
    PatternError,
    PNode,
    Var,
    parse_pattern,
)
from tensor_eqsat.rewrite.rewrite import (
    ApplyReport,
    _Counts,
    _with_seconds,
    apply_each,
    check_merge,
    check_rule_vars,
    keeps_dtype,
    revalidate,
)

if TYPE_CHECKING:
    from tensor_eqsat.egraph.egraph import EGraph


class PairMatch(NamedTuple):
    """A compatible pair of source matches and their merged substitution."""

    first: Match
    second: Match
    subst: Subst


def canonical_form(p: Pattern) -> tuple[Pattern, dict[str, str]]:
    """``p`` with variables renamed ``v0, v1, ...`` in order of first appearance (attributes
    before children), and the map original name -> canonical name.

    >>> from tensor_eqsat.rewrite.pattern import parse_pattern
    >>> a, _ = canonical_form(parse_pattern("(matmul ?x ?w1)"))
    >>> b, m = canonical_form(parse_pattern("(matmul ?y ?w2)"))
    >>> a == b, m
    (True, {'y': 'v0', 'w2': 'v1'})
    """
    mapping: dict[str, str] = {}

    def name(n: str) -> str:
        if n not in mapping:
            mapping[n] = f"v{len(mapping)}"
        return mapping[n]

    def value(v: AttrValue) -> AttrValue:
        if isinstance(v, AttrVar):
            return AttrVar(name(v.name))
        if isinstance(v, Var):
            return Var(name(v.name))
        if isinstance(v, Expr):
            return Expr(v.fn, tuple(value(a) for a in v.args))
        if isinstance(v, ListValue):
            return ListValue(tuple(value(a) for a in v.items))
        return v

    def pattern(q: Pattern) -> Pattern:
        if isinstance(q, Var):
            return Var(name(q.name))
        attrs = tuple((k, value(v)) for k, v in q.attrs)
        return PNode(q.op, attrs, tuple(pattern(c) for c in q.children))

    return pattern(p), mapping


class MultiRewrite:
    """A two-source, two-target rewrite rule.

    name: unique name.
    sources: the two left-hand sides (op patterns); shared variables must bind the same classes.
    targets: the two right-hand sides; target i is unioned with the class source i matched.
    conditions: over the variables of both sources (parsed, text, or callables; the callable's
        ``eclass`` argument is the first source's class).
    symmetric: the rule is invariant under swapping the sources and the targets, so when the
        sources are the same canonical pattern only unordered pairs are tried. Default False.

    >>> part = "(split axis=1 sizes=[(dim ?w1 1) (dim ?w2 1)] (matmul ?x (concat axis=1 ?w1 ?w2)))"
    >>> r = MultiRewrite.parse(
    ...     "matmul-concat",
    ...     ("(matmul ?x ?w1)", "(matmul ?x ?w2)"),
    ...     (f"(get index=0 {part})", f"(get index=1 {part})"),
    ...     symmetric=True,
    ... )
    >>> r.shared_vars
    ['x']
    """

    def __init__(
        self,
        name: str,
        sources: Sequence[Pattern],
        targets: Sequence[Pattern],
        conditions: Sequence[RuleCondition | str] = (),
        *,
        symmetric: bool = False,
    ) -> None:
        if len(sources) != 2 or len(targets) != 2:
            raise PatternError(
                f"rule {name}: a multi-pattern rule has 2 sources and 2 targets, "
                f"got {len(sources)} and {len(targets)}"
            )
        for i, s in enumerate(sources):
            if not isinstance(s, PNode):
                raise PatternError(f"rule {name}: source {i + 1} must be an op pattern, not {s}")
        self.name = name
        self.sources = (sources[0], sources[1])
        self.targets = (targets[0], targets[1])
        self.symmetric = symmetric
        self.conditions = normalize_conditions(conditions, f"rule {name}")
        self._searchers = (Searcher(sources[0]), Searcher(sources[1]))
        self._templates = (Template(targets[0]), Template(targets[1]))
        tv = self._searchers[0].tensor_vars + self._searchers[1].tensor_vars
        av = self._searchers[0].attr_vars + self._searchers[1].attr_vars
        check_rule_vars(name, tv, av, self.targets, self.conditions)
        own0 = set(self._searchers[0].tensor_vars) | set(self._searchers[0].attr_vars)
        own1 = set(self._searchers[1].tensor_vars) | set(self._searchers[1].attr_vars)
        self.shared_vars: list[str] = [v for v in dict.fromkeys(tv + av) if v in own0 and v in own1]
        canon0, map0 = canonical_form(sources[0])
        canon1, map1 = canonical_form(sources[1])
        self.same_source = canon0 == canon1
        self._canon = (Searcher(canon0), Searcher(canon1))
        self._back = ({c: o for o, c in map0.items()}, {c: o for o, c in map1.items()})
        self._concat_keys = _concat_keys(self.targets, own0 - own1, own1 - own0)

    @classmethod
    def parse(
        cls,
        name: str,
        sources: Sequence[str],
        targets: Sequence[str],
        conditions: Sequence[RuleCondition | str] = (),
        *,
        symmetric: bool = False,
    ) -> MultiRewrite:
        """Build a rule from pattern text."""
        src = [parse_pattern(t, f"rule {name}: source {i + 1}") for i, t in enumerate(sources)]
        dst = [parse_pattern(t, f"rule {name}: target {i + 1}") for i, t in enumerate(targets)]
        return cls(name, src, dst, conditions, symmetric=symmetric)

    def __reduce__(self) -> tuple[Any, ...]:
        # Compiled closures do not pickle; a rule is rebuilt from its patterns instead.
        return (_rebuild_multi, (self.name, self.sources, self.targets, self.conditions, self.symmetric))

    def __str__(self) -> str:
        cond = "".join(f" if {c}" for c in self.conditions)
        sym = " (symmetric)" if self.symmetric else ""
        return (
            f"{self.name}: {self.sources[0]}, {self.sources[1]} => "
            f"{self.targets[0]}, {self.targets[1]}{cond}{sym}"
        )

    def __repr__(self) -> str:
        return f"MultiRewrite({str(self)!r})"

    # -- search ----------------------------------------------------------------------------------
    def _source_matches(self, egraph: EGraph) -> tuple[list[Match], list[Match]]:
        first = self._canon[0].search(egraph)
        if not first:
            return first, []  # no pair: the second source need not be searched
        second = first if self.same_source else self._canon[1].search(egraph)
        return first, second

    def iter_matches(self, egraph: EGraph) -> Iterator[PairMatch]:
        """Compatible pairs of source matches whose conditions hold, generated lazily from the
        match lists of the current e-graph (which is rebuilt first).

        Pairs come in the order of the full product (or of ``i < j`` pairs), restricted to the
        compatible ones, which a hash join on the shared variables finds directly.
        """
        first, second = self._source_matches(egraph)
        if not first or not second:
            return
        back0, back1 = self._back
        shared = self.shared_vars
        # Each source match renamed to the rule's variables once (not once per pair it joins).
        firsts = [_renamed(m, back0) for m in first]
        seconds = firsts if second is first and back1 == back0 else [_renamed(m, back1) for m in second]
        concat = self._concat_keys if isinstance(egraph.analysis, TensorAnalysis) else ()
        data = egraph.internals.data
        find = egraph.internals.find

        def key(s: Subst, side: int) -> tuple[object, ...] | None:
            out: list[object] = [s[v] for v in shared]
            for axis, u, v in concat:
                shapes = data[find(s[(u, v)[side]])].shapes
                if len(shapes) != 1 or not 0 <= axis < len(shapes[0]):
                    return None  # not a concat operand: joins nothing
                shape = shapes[0]
                out.append((len(shape), shape[:axis], shape[axis + 1 :]))
            return tuple(out)

        buckets: dict[tuple[object, ...], list[int]] = {}
        for j, (s2, _) in enumerate(seconds):
            k2 = key(s2, 1)
            if k2 is not None:
                buckets.setdefault(k2, []).append(j)
        unordered = self.symmetric and self.same_source
        for i, (s1, m1) in enumerate(firsts):
            k1 = key(s1, 0)
            if k1 is None:
                continue
            for j in buckets.get(k1, ()):
                if unordered and j <= i:
                    continue
                s2, m2 = seconds[j]
                if find(m1.eclass) == find(m2.eclass):
                    continue
                merged = {**s1, **s2}
                if self.conditions and not holds(self.conditions, egraph, m1.eclass, merged):
                    continue
                yield _new_tuple(PairMatch, (m1, m2, merged))

    def search(self, egraph: EGraph, limit: int | None = None) -> list[PairMatch]:
        """Compatible pairs (at most ``limit``)."""
        return list(itertools.islice(self.iter_matches(egraph), limit))

    def has_match(self, egraph: EGraph) -> bool:
        """Whether some compatible pair exists now."""
        return next(self.iter_matches(egraph), None) is not None

    # -- apply -----------------------------------------------------------------------------------
    def apply(
        self,
        egraph: EGraph,
        pairs: Iterable[PairMatch],
        *,
        node_budget: int | None = None,
        deadline: float | None = None,
        rebuild: bool = True,
    ) -> ApplyReport:
        """Apply both targets to each pair (see the module docstring)."""
        return apply_each(self.name, egraph, pairs, self._apply_pair, node_budget, deadline, rebuild)

    def run(
        self,
        egraph: EGraph,
        *,
        node_budget: int | None = None,
        match_limit: int | None = None,
        deadline: float | None = None,
    ) -> ApplyReport:
        """Enumerate pairs and apply each once, then rebuild (see :func:`apply_rule`).

        When ``node_budget`` may not hold every pair (pairs times the most e-nodes one pair can
        add exceeds it), the pairs are applied breadth-first over their *sites* (the classes
        of the shared variables, or the first match's class when none is shared): one pair per
        site, then a second per site, and so on. So a short budget spreads over the graph
        instead of going to the first sites in class order (TENSAT's order, kept whenever
        everything fits): on the Transformer-Transducer, rule 128 at the 2,000-e-node limit
        merges Q/K/V projections in every attention layer instead of all pairs of the first
        layers.
        """
        t0 = time.perf_counter()
        pairs: Iterable[PairMatch] = self.iter_matches(egraph)
        if match_limit is not None:
            pairs = itertools.islice(pairs, match_limit)
        if node_budget is not None:
            found = list(pairs)
            if len(found) * self.max_new_nodes > node_budget:
                found = self._breadth_first(egraph, found)
            pairs = found
        report = self.apply(egraph, pairs, node_budget=node_budget, deadline=deadline)
        return _with_seconds(report, time.perf_counter() - t0)

    @functools.cached_property
    def max_new_nodes(self) -> int:
        """The most e-nodes one pair can add: the distinct operator sub-patterns of both targets
        (a sub-pattern the two share, like the ``split``, is added once)."""
        seen: set[Pattern] = set()

        def walk(p: Pattern) -> None:
            if isinstance(p, PNode) and p not in seen:
                seen.add(p)
                for c in p.children:
                    walk(c)

        for t in self.targets:
            walk(t)
        return len(seen)

    def _breadth_first(self, egraph: EGraph, pairs: list[PairMatch]) -> list[PairMatch]:
        """``pairs`` reordered round-robin over their sites (stable within a site)."""
        find = egraph.find
        shared = self.shared_vars
        sites: dict[object, list[PairMatch]] = {}
        for pair in pairs:
            site = tuple(pair.subst[v] for v in shared) if shared else find(pair.first.eclass)
            sites.setdefault(site, []).append(pair)
        out: list[PairMatch] = []
        groups = list(sites.values())
        depth = 0
        while groups:
            out.extend(g[depth] for g in groups)
            depth += 1
            groups = [g for g in groups if len(g) > depth]
        return out

    def _apply_pair(self, egraph: EGraph, pair: PairMatch, stats: _Counts) -> None:
        find = egraph.find
        c1 = find(pair.first.eclass)
        c2 = find(pair.second.eclass)
        if c1 == c2:
            stats.stale += 1
            return
        subst = pair.subst
        version = egraph.internals.blacklist_version
        if pair.first.stamp != version or pair.second.stamp != version:
            s1 = revalidate(egraph, self._searchers[0], c1, subst)
            s2 = revalidate(egraph, self._searchers[1], c2, subst)
            if s1 is None or s2 is None:
                stats.stale += 1
                return
            subst = {**s1, **s2}
            c1, c2 = find(c1), find(c2)
        plan = Plan(egraph, avoid=(c1, c2))
        try:
            r1 = self._templates[0].plan(subst, plan)
            r2 = self._templates[1].plan(subst, plan)
        except ClosesCycle:
            stats.cycle += 1
            return
        except INVALID:
            stats.shape += 1
            return
        if not (keeps_dtype(egraph, c1, plan.value(r1)) and keeps_dtype(egraph, c2, plan.value(r2))):
            stats.shape += 1
            return
        check_merge(egraph, self.name, c1, plan.value(r1))
        check_merge(egraph, self.name, c2, plan.value(r2))
        ceiling: Any = None
        if egraph.cycle_filter:
            height = egraph.internals.height
            ceiling = min(height[c1], height[c2])
        ids: list[int] = []
        root1 = commit(plan, r1, ids, ceiling=ceiling)
        root2 = commit(plan, r2, ids, ceiling=ceiling)
        u1 = egraph.union(c1, root1)
        u2 = egraph.union(c2, root2)
        if plan.steps or u1 or u2:
            stats.applied += 1


_new_tuple = tuple.__new__


def _renamed(m: Match, back: dict[str, str]) -> tuple[Subst, Match]:
    """A source match with its canonical variables renamed back to the rule's: (subst, match)."""
    s = {back[k]: v for k, v in m.subst.items()}
    return s, _new_tuple(Match, (m.eclass, s, m.stamp))


def _concat_keys(
    targets: Sequence[Pattern], own0: set[str], own1: set[str]
) -> tuple[tuple[int, str, str], ...]:
    """``(axis, u, v)`` for every ``(concat axis=K ?u ?v)`` in ``targets`` with ``u`` bound only
    by source 1 and ``v`` only by source 2 (either order): the shapes a pair must agree on."""
    out: dict[tuple[int, str, str], None] = {}

    def walk(p: Pattern) -> None:
        if not isinstance(p, PNode):
            return
        if p.op == "concat" and len(p.children) == 2:
            axis = dict(p.attrs).get("axis")
            a, b = p.children
            if isinstance(axis, int) and axis >= 0 and isinstance(a, Var) and isinstance(b, Var):
                if a.name in own0 and b.name in own1:
                    out[(axis, a.name, b.name)] = None
                elif a.name in own1 and b.name in own0:
                    out[(axis, b.name, a.name)] = None
        for c in p.children:
            walk(c)

    for t in targets:
        walk(t)
    return tuple(out)


def _rebuild_multi(
    name: str,
    sources: Sequence[Pattern],
    targets: Sequence[Pattern],
    conditions: Sequence[RuleCondition],
    symmetric: bool,
) -> MultiRewrite:
    return MultiRewrite(name, sources, targets, conditions, symmetric=symmetric)
