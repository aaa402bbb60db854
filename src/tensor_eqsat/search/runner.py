"""Runner: TENSAT-style equality saturation with node, iteration and time limits.

Each iteration (egg's loop with TENSAT's multi-pattern hook):

1. stop if a limit is reached (iterations, e-nodes, time);
2. in the first ``k_multi`` iterations, apply every multi-pattern rule once, in order, sharing the
   node budget ``node_multi`` across all those iterations (TENSAT's ``MultiPatterns`` hook, which
   runs before the single rules of the same iteration);
3. search every single-pattern rule on the same e-graph, then apply each rule's matches in rule
   order (egg: all rules see the e-graph as it was at the start of the search phase); every
   application gets the e-nodes remaining under the node limit (checked between matches, so the
   limit is crossed by at most one match's nodes) and stops at the time limit;
4. rebuild; record an :class:`Iteration`; stop as *saturated* if nothing changed.

Cycle filtering is the e-graph's (see ``egraph/egraph.py``); the runner adds nothing for it.
egg's BackoffScheduler is not reproduced: the paper's comparisons run TENSAT with a node limit
that is reached in a few iterations, and MCTS applies one rule at a time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tensor_eqsat.rewrite.ematch import Match
from tensor_eqsat.rewrite.multi import MultiRewrite
from tensor_eqsat.rewrite.rewrite import Rewrite
from tensor_eqsat.search.stop import StopReason

if TYPE_CHECKING:
    from tensor_eqsat.egraph.egraph import EGraph

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunnerConfig:
    """Limits of a saturation run.

    node_limit: stop once the e-graph has this many e-nodes or more. Default 2000 (the paper's).
    iter_limit: stop after this many iterations. Default 30 (egg's).
    time_limit: stop after this many seconds (checked between rules). Default 10.0 (TENSAT's).
    k_multi: multi-pattern rules run in iterations ``0 .. k_multi - 1``. Default 1 (TENSAT's).
    node_multi: e-nodes the multi-pattern rules may add in total, over all their iterations.
        Default 2000 (the paper artifact's).
    match_limit: consider at most this many matches per rule and iteration. Default None (all).
    """

    node_limit: int = 2000
    iter_limit: int = 30
    time_limit: float = 10.0
    k_multi: int = 1
    node_multi: int = 2000
    match_limit: int | None = None


@dataclass
class Iteration:
    """Statistics of one runner iteration.

    applied: rule name -> matches applied (that changed the e-graph), for rules that applied any.
    matches: rule name -> matches found (pairs for multi-pattern rules), for rules with any.
    enodes, classes: e-graph size at the end of the iteration.
    multi_time, search_time, apply_time, rebuild_time: seconds spent in each phase.
    changed: whether the iteration changed the e-graph.
    """

    index: int
    applied: dict[str, int] = field(default_factory=dict)
    matches: dict[str, int] = field(default_factory=dict)
    enodes: int = 0
    classes: int = 0
    multi_time: float = 0.0
    search_time: float = 0.0
    apply_time: float = 0.0
    rebuild_time: float = 0.0
    changed: bool = False

    @property
    def total_time(self) -> float:
        return self.multi_time + self.search_time + self.apply_time + self.rebuild_time


@dataclass
class RunReport:
    """The result of :meth:`Runner.run`."""

    stop_reason: StopReason
    iterations: list[Iteration]
    seconds: float
    enodes: int
    classes: int

    @property
    def applied(self) -> dict[str, int]:
        """Total applications per rule over the run."""
        out: dict[str, int] = {}
        for it in self.iterations:
            for name, n in it.applied.items():
                out[name] = out.get(name, 0) + n
        return out


class Runner:
    """Saturates an e-graph with single- and multi-pattern rules.

    rules: single-pattern rules, applied in this order.
    multi_rules: multi-pattern rules, applied in this order in the first ``k_multi`` iterations.
    config: limits (:class:`RunnerConfig`); keyword overrides are accepted too.

    >>> from tensor_eqsat.egraph import from_graph
    >>> from tensor_eqsat.ir import Graph
    >>> g = Graph(); a = g.input((2, 2), name="a"); b = g.input((2, 2), name="b")
    >>> g.output(g.ewadd(a, b))
    >>> eg = from_graph(g)
    >>> report = Runner([Rewrite.parse("comm", "(ewadd ?x ?y)", "(ewadd ?y ?x)")]).run(eg)
    >>> report.stop_reason, len(report.iterations), eg.num_enodes
    (<StopReason.SATURATED: 'saturated'>, 2, 4)
    """

    def __init__(
        self,
        rules: Sequence[Rewrite] = (),
        multi_rules: Sequence[MultiRewrite] = (),
        config: RunnerConfig | None = None,
        **overrides: object,
    ) -> None:
        names = [r.name for r in rules] + [r.name for r in multi_rules]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate rule names: {', '.join(dupes)}")
        self.rules = list(rules)
        self.multi_rules = list(multi_rules)
        base = config or RunnerConfig()
        if overrides:
            from dataclasses import replace

            base = replace(base, **overrides)  # type: ignore[arg-type]
        self.config = base

    def run(self, egraph: EGraph) -> RunReport:
        """Saturate ``egraph`` in place until a limit is reached or nothing changes."""
        cfg = self.config
        t0 = time.perf_counter()
        deadline = t0 + cfg.time_limit
        multi_budget = cfg.node_multi
        iterations: list[Iteration] = []
        egraph.rebuild()
        reason: StopReason | None = None
        while reason is None:
            reason = self._limit(egraph, len(iterations), deadline)
            if reason is not None:
                break
            it = Iteration(index=len(iterations))
            v0 = egraph.version
            if it.index < cfg.k_multi and self.multi_rules and multi_budget > 0:
                t = time.perf_counter()
                for multi in self.multi_rules:
                    budget = min(multi_budget, cfg.node_limit - egraph.num_enodes)
                    if budget <= 0 or time.perf_counter() >= deadline:
                        break
                    r = multi.run(egraph, node_budget=budget, match_limit=cfg.match_limit, deadline=deadline)
                    multi_budget -= max(r.nodes_added, 0)
                    self._record(it, r.rule, r.matches, r.applied)
                it.multi_time = time.perf_counter() - t
            t = time.perf_counter()
            found: list[tuple[Rewrite, list[Match]]] = []
            for rule in self.rules:
                found.append((rule, rule.search(egraph, cfg.match_limit)))
                if time.perf_counter() >= deadline:
                    break
            it.search_time = time.perf_counter() - t
            t = time.perf_counter()
            for rule, matches in found:
                if not matches:
                    continue
                budget = cfg.node_limit - egraph.num_enodes
                if budget <= 0:
                    break
                r = rule.apply(egraph, matches, node_budget=budget, deadline=deadline, rebuild=False)
                self._record(it, r.rule, r.matches, r.applied)
                if egraph.num_enodes >= cfg.node_limit or time.perf_counter() >= deadline:
                    break
            it.apply_time = time.perf_counter() - t
            t = time.perf_counter()
            egraph.rebuild()
            it.rebuild_time = time.perf_counter() - t
            it.enodes = egraph.num_enodes
            it.classes = egraph.num_classes
            it.changed = egraph.version != v0
            iterations.append(it)
            log.debug(
                "iteration %d: %d e-nodes, %d classes, %d applications",
                it.index,
                it.enodes,
                it.classes,
                sum(it.applied.values()),
            )
            if not it.changed:
                reason = StopReason.SATURATED
        return RunReport(
            stop_reason=reason,
            iterations=iterations,
            seconds=time.perf_counter() - t0,
            enodes=egraph.num_enodes,
            classes=egraph.num_classes,
        )

    def _limit(self, egraph: EGraph, n_iter: int, deadline: float) -> StopReason | None:
        if egraph.num_enodes >= self.config.node_limit:
            return StopReason.NODE_LIMIT
        if n_iter >= self.config.iter_limit:
            return StopReason.ITERATION_LIMIT
        if time.perf_counter() >= deadline:
            return StopReason.TIME_LIMIT
        return None

    @staticmethod
    def _record(it: Iteration, name: str, matches: int, applied: int) -> None:
        if matches:
            it.matches[name] = it.matches.get(name, 0) + matches
        if applied:
            it.applied[name] = it.applied.get(name, 0) + applied
