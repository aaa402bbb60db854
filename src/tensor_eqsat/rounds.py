"""Search rounds (DESIGN.md decision 19): the best graph of a round is searched again in a
fresh e-graph while the last round gained something and time is left.

A node limit bounds how deep one e-graph sees (the paper's 2,000 e-nodes); rebuilding the
e-graph from the best graph found lets the rules reach what lay beyond it, as TASO's
backtracking search re-expands its best graphs. :func:`more_rounds` runs the rounds after the
first under the same deadline and combines them into one result (:func:`_combine_rounds`);
:class:`RoundReport` and :class:`RoundsStop` say what each round did and why no further one ran.

A fixpoint is local (issue 43: NASRNN's stopped at 46.07 % where a chain of runs that began
without rule 128 reached 48.12 %), so at a fixpoint with time left the rounds backtrack
(``OptimizeConfig.backtracks``), each backtrack a new chain of rounds to its own fixpoint: first
a restart from the original that holds back the multi-pattern rule the best graph holds most
(:func:`_restart`), then the cheapest candidate no round started from (:func:`_backtrack_seed`,
TASO's backtracking). A chain that reaches a graph a round started from ends there.

Alternatives rejected: growing the same e-graph past the node limit between rounds (the limit is
what keeps extraction and the ILP tractable; a fresh e-graph of the best graph is as small as the
first); at the fixpoint, a round at a larger node limit (the fixpoint round's ladder already
reached 8,000 e-nodes on NASRNN for no gain, and MCTS at 4,000); the runner-up first (NASRNN:
47.97 % where the restart reaches 48.12 %, docs/search.md "Backtracking").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum
from typing import TYPE_CHECKING, Any

from tensor_eqsat.egraph.origins import merged_counts
from tensor_eqsat.extract.registry import ExtractorKind
from tensor_eqsat.search.construction import ProgressFn
from tensor_eqsat.search.portfolio import ROUND_MIN_GAIN, combine_rounds, stalled_candidates
from tensor_eqsat.search.stop import StopReason

if TYPE_CHECKING:
    from tensor_eqsat.egraph.egraph import EGraph
    from tensor_eqsat.ir.graph import Graph
    from tensor_eqsat.optimize import OptimizeResult, _Run

log = logging.getLogger("tensor_eqsat.optimize")

RoundFn = Callable[
    ["_Run", "Graph", "EGraph | None", "ProgressFn | None", "Graph | None", int], "OptimizeResult"
]
"""One round of the search: (run, source, egraph, progress, hint, index) -> its result."""


def with_counts(counts: dict[int, int], more: dict[int, int]) -> dict[int, int]:
    """Rule counts ``counts`` plus ``more``, by rule id."""
    out = dict(counts)
    for rid, n in more.items():
        out[rid] = out.get(rid, 0) + n
    return dict(sorted(out.items()))


MIN_ROUND_SECONDS = 0.5
"""A round after the first is not started with less time left than this (the portfolio's
:data:`~tensor_eqsat.search.portfolio.MIN_STAGE_SECONDS`: it could not finish a stage)."""


@dataclass(frozen=True)
class RoundReport:
    """One search round (``OptimizeConfig.rounds``).

    index: 1 for the first round; winner: the ``auto`` candidate that won it
        (``strategy@node_limit``), else the search's name; start_cost_ms: the cost of the graph it
        started from (the original, then the best graph so far); cost_ms: its best graph's cost;
        enodes: the winning e-graph's size; seconds: its wall time; stop: why its search stopped
        (``auto``: the portfolio's ``done``, ``time limit`` or ``interrupted``); gained: whether
        it lowered the cost (by more than :data:`ROUND_MIN_GAIN`); backtrack: the candidate it
        started from when it went on from a fixpoint (``saturate@2000 (round 2)``,
        :func:`_backtrack_seed`), else None (it started from the round before it).
    """

    index: int
    winner: str | None
    start_cost_ms: float
    cost_ms: float
    enodes: int
    seconds: float
    stop: str
    gained: bool
    backtrack: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class RoundsStop(Enum):
    """Why no further round ran: ``fixpoint`` (the last round gained nothing, so the graph
    handed back is a fixpoint of the search), ``time limit`` (the deadline, or a round cut short
    by it), ``interrupted`` (Ctrl-C: the best of all rounds is handed back) or ``round limit``
    (``OptimizeConfig.rounds`` rounds ran)."""

    FIXPOINT = "fixpoint"
    TIME_LIMIT = "time limit"
    INTERRUPTED = "interrupted"
    ROUND_LIMIT = "round limit"


def more_rounds(
    run: _Run,
    first: OptimizeResult,
    first_s: float,
    progress: ProgressFn | None,
    search_round: RoundFn,
) -> OptimizeResult:
    """The rounds after ``first`` (``OptimizeConfig.rounds``, DESIGN.md decision 19): while the
    last round gained something, time is left and the round limit allows, the next round
    searches that round's best graph in a fresh e-graph, with the same rules, limits and
    portfolio, under the same deadline (a caller's reserves for the check, the guard and the
    write stay outside it). At a fixpoint the rounds backtrack, up to
    ``OptimizeConfig.max_backtracks()`` times (:func:`_restart`, :func:`_backtrack_seed`), each
    backtrack a new chain of rounds to its own fixpoint. A Ctrl-C in a later round hands back
    the best of the rounds before it. One result for all the rounds (:func:`_combine_rounds`)."""
    results, reports = [first], [_round_report(1, first, first.original_cost_ms, first_s)]
    lineage: list[_Chain] = [()]  # per round: the work that led to the graph it started from
    started: list[tuple[float, int | None]] = [(first.original_cost_ms, None)]  # (cost, held rule)
    best = head = first  # the cheapest result of all; the round the next one continues
    held: int | None = None  # the rule the current chain holds back (a restart)
    restarted, backtracks = False, 0
    carried = 0  # candidates without gain the last round was given (``_Run.stalled``)
    while True:
        why = _why_stop(run, reports[-1], len(results))
        via = None
        if why is None and _started(started, head.optimized_cost_ms, held):
            why = RoundsStop.FIXPOINT  # the chain reached a graph a round already searched
        release = why is RoundsStop.FIXPOINT and held is not None
        if release and _started(started, head.optimized_cost_ms, None):
            release, held = False, None  # every rule searched this graph already: a backtrack
        if why is None:
            graph, cost, chain = head.graph, head.optimized_cost_ms, _continued(results, lineage, head)
        elif why is not RoundsStop.FIXPOINT:
            break
        elif release:
            # A held-back chain's fixpoint: it goes on from there with every rule.
            if (why := _blocked(run, len(results)) or why) is not RoundsStop.FIXPOINT:
                break
            held, graph, cost, chain = (
                None,
                head.graph,
                head.optimized_cost_ms,
                _continued(results, lineage, head),
            )
        else:
            if backtracks >= run.cfg.max_backtracks():
                break
            rule = None if restarted else _restart(run, _continued(results, lineage, best))
            found = None if rule is not None else _backtrack_seed(results, lineage, started)
            if rule is None and found is None:
                break
            if (why := _blocked(run, len(results)) or why) is not RoundsStop.FIXPOINT:
                break  # a backtrack was due: the graph handed back is not a fixpoint of the search
            restarted, backtracks = True, backtracks + 1
            if rule is not None:
                held, graph, cost, chain = rule, first.original, first.original_cost_ms, ()
                via = f"the original without rule {rule}"
            else:
                assert found is not None
                graph, cost, chain, via = found
        n = len(results) + 1
        ts = time.perf_counter()
        this = run if held is None else replace(run, actions=run.actions.without(held))
        # A round that continues the last one goes on counting its candidates without gain.
        carried = _stalled(run, results[-1], reports[-1], carried) if why is None else 0
        this = replace(this, stalled=carried)
        try:
            nxt = search_round(this, graph, None, _round_progress(progress, n), graph, n)
        except KeyboardInterrupt:
            log.warning("interrupted in round %d: returning the best of %d round(s)", n, len(results))
            why = RoundsStop.INTERRUPTED
            break
        results.append(nxt)
        lineage.append(chain)
        started.append((cost, held))
        reports.append(_round_report(n, nxt, cost, time.perf_counter() - ts, via))
        log.info("round %d: %.4f -> %.4f ms (%s)", n, cost, nxt.optimized_cost_ms, reports[-1].stop)
        head = nxt
        if nxt.optimized_cost_ms < best.optimized_cost_ms:
            best = nxt
    if len(results) == 1:
        stop = StopReason.INTERRUPTED if why is RoundsStop.INTERRUPTED else first.stop_reason
        return replace(first, rounds=tuple(reports), rounds_stop=why, stop_reason=stop)
    chain = _continued(results, lineage, best)
    return _combine_rounds(run, results, reports, best, chain, why)


def _stalled(run: _Run, last: OptimizeResult, report: RoundReport, given: int) -> int:
    """The candidates in a row without gain that ended round ``last`` (its portfolio's, from
    the cost it started from, after the ``given`` it continued counting, within the run's
    ``stall_tolerance``), for the round continuing it."""
    if last.portfolio is None:
        return 0
    tolerance = run.cfg.portfolio.stall_tolerance
    return stalled_candidates(last.portfolio.candidates, report.start_cost_ms, given, tolerance)


def _started(started: list[tuple[float, int | None]], cost: float, held: int | None) -> bool:
    """Whether a round with rule ``held`` held back, or one with every rule, already started from
    a graph of ``cost`` (MobileNet-v2: the restart's first round reached the first chain's
    fixpoint, which every rule had searched; going on from it repeated two rounds)."""
    return any(h in (held, None) and abs(cost - s) <= s * ROUND_MIN_GAIN for s, h in started)


def _restart(run: _Run, chain: _Chain) -> int | None:
    """The rule a restart from the original holds back: the multi-pattern rule whose
    applications the best graph (its history ``chain``) holds most, ties to the lowest id; None
    when it holds none. A merge applied everywhere first can block a combination of merges that
    pays more: NASRNN's fixpoint batches every pair of products sharing an operand (rule 128)
    where a round without it first merges relus (rule 127) and products sharing an addition
    (rules 69, 72), which rule 128 then batches further (docs/search.md, "Backtracking")."""
    multi = {r.name for r in run.actions.multi}
    used = merged_counts(*(share[2] for share in chain))
    ranked = [(-n, run.actions.id_of(name)) for name, n in used.items() if name in multi and n > 0]
    return min(ranked)[1] if ranked else None


_Step = tuple[tuple[Any, ...], dict[int, int], dict[str, int]]
"""One round's share of a graph's history: its steps, rule counts and ``rules_used``."""
_Chain = tuple[_Step, ...]
"""The rounds' shares that led to a graph, in order."""


def _continued(results: list[OptimizeResult], lineage: list[_Chain], res: OptimizeResult) -> _Chain:
    """The history of ``res``'s graph: its round's lineage, then the round itself."""
    k = results.index(res)
    return lineage[k] + ((tuple(res.steps), dict(res.rule_counts), res.rules_used),)


def _backtrack_seed(
    results: list[OptimizeResult], lineage: list[_Chain], started: list[tuple[float, int | None]]
) -> tuple[Graph, float, _Chain, str] | None:
    """Where the rounds go on at a fixpoint: the cheapest ``auto`` candidate of any round whose
    cost differs (by more than :data:`ROUND_MIN_GAIN`) from every cost a round started from (the
    runner-up of the search so far, as TASO's backtracking search takes the best graph it has
    not expanded yet): its graph, cost, history and label; None when every candidate's cost was
    a round's start. A candidate whose cost a round started from is taken as that graph (graphs
    of equal cost are one to the search, as the guard's finalists are)."""
    found: tuple[float, int, Graph, _Chain, str] | None = None
    for k, res in enumerate(results):
        pf = res.portfolio
        if pf is None:
            continue
        folded = _folded(res, pf.best)
        for c in pf.candidates:
            if any(abs(c.cost_ms - s) <= s * ROUND_MIN_GAIN for s, _ in started):
                continue
            if found is not None and (c.cost_ms, k) >= found[:2]:
                continue
            used = dict(c.extraction.get("rules_used", {}))
            share = (tuple(c.report.steps), with_counts(c.report.rule_counts, folded), used)
            label = c.label if k == 0 else f"{c.label} (round {k + 1})"
            found = (c.cost_ms, k, c.graph, lineage[k] + (share,), label)
    if found is None:
        return None
    return found[2], found[0], found[3], found[4]


def _folded(res: OptimizeResult, won: Any) -> dict[int, int]:
    """The fold-first counts of ``res``'s round: its rule counts less its winner's own."""
    own = {} if won is None else won.report.rule_counts
    return {rid: n - own.get(rid, 0) for rid, n in res.rule_counts.items() if n > own.get(rid, 0)}


def _blocked(run: _Run, count: int) -> RoundsStop | None:
    """What keeps a round from following the ``count``-th: the round limit or the time left
    (None: nothing)."""
    limit = run.cfg.max_rounds()
    if limit is not None and count >= limit:
        return RoundsStop.ROUND_LIMIT
    left = run.deadline.earlier(run.cfg.time_limit).left()
    return RoundsStop.TIME_LIMIT if left is not None and left < MIN_ROUND_SECONDS else None


def _round_report(
    n: int, res: OptimizeResult, start_cost: float, seconds: float, backtrack: str | None = None
) -> RoundReport:
    pf = res.portfolio
    if pf is not None:
        winner, stop = (pf.best.label if pf.best is not None else None), pf.stop.value
    else:
        winner, stop = res.settings.search, res.stop_reason.value
    gained = res.optimized_cost_ms < start_cost * (1 - ROUND_MIN_GAIN)
    return RoundReport(n, winner, start_cost, min(res.optimized_cost_ms, start_cost), res.stats.enodes,
                       seconds, stop, gained, backtrack)  # fmt: skip


def _why_stop(run: _Run, last: RoundReport, count: int) -> RoundsStop | None:
    """Why no round follows the ``count``-th, whose report is ``last`` (None: one does)."""
    if last.stop == StopReason.INTERRUPTED:
        return RoundsStop.INTERRUPTED
    if not last.gained:
        # A round cut short that found nothing does not show a fixpoint: it may not have looked.
        return RoundsStop.TIME_LIMIT if last.stop == StopReason.TIME_LIMIT else RoundsStop.FIXPOINT
    limit = run.cfg.max_rounds()
    if limit is not None and count >= limit:
        return RoundsStop.ROUND_LIMIT
    left = run.deadline.earlier(run.cfg.time_limit).left()
    if last.stop == StopReason.TIME_LIMIT or (left is not None and left < MIN_ROUND_SECONDS):
        return RoundsStop.TIME_LIMIT
    return None


def _round_progress(progress: ProgressFn | None, n: int) -> ProgressFn | None:
    """``progress`` with each event's stage named by its round (``round 2 saturate@4000``)."""
    if progress is None:
        return None
    return lambda ev: progress(replace(ev, stage=f"round {n}" + (f" {ev.stage}" if ev.stage else "")))


def _combine_rounds(
    run: _Run,
    results: list[OptimizeResult],
    reports: list[RoundReport],
    best: OptimizeResult,
    chain: _Chain,
    why: RoundsStop,
) -> OptimizeResult:
    """One result for the rounds: ``best``'s graph and cost against the first round's original;
    the steps and rule counts of the rounds that led to it (``chain``);
    construction and build seconds summed; the rounds' portfolios as one
    (:func:`~tensor_eqsat.search.portfolio.combine_rounds`: every candidate, the cheapest of all
    winning), whose finalists are the guard's alternatives with ``best``'s e-graph's
    extractions; stopped ``interrupted`` after a Ctrl-C."""
    first, cfg = results[0], run.cfg
    steps = tuple(s for share in chain for s in share[0])
    counts: dict[int, int] = {}
    for share in chain:
        counts = with_counts(counts, share[1])
    portfolio = None
    alternatives = best.alternatives
    final = dict(best.stats.final_extraction)
    final["rules_used"] = merged_counts(*(share[2] for share in chain))
    if all(r.portfolio is not None for r in results):
        portfolio = combine_rounds([r.portfolio for r in results if r.portfolio is not None])
        kinds = {k.value if isinstance(k, ExtractorKind) else str(k) for k in cfg.alternatives}
        won = portfolio.best
        alternatives = tuple(
            (c.label, c.graph) for c in portfolio.finalists(cfg.portfolio.finalists) if c is not won
        ) + tuple(a for a in best.alternatives if a[0] in kinds)
        if won is not None and "candidate" in final:
            final["candidate"] = won.label
    stats = replace(
        best.stats,
        build_s=sum(r.stats.build_s for r in results),
        initial_enodes=first.stats.initial_enodes,
        search_s=sum(r.stats.search_s for r in results),
        final_extraction=final,
    )
    stop = StopReason.INTERRUPTED if why is RoundsStop.INTERRUPTED else best.stop_reason
    return replace(
        best, original=first.original, original_cost_ms=first.original_cost_ms,
        wall_s=time.perf_counter() - run.deadline.start, stop_reason=stop, steps=steps, rule_counts=counts,
        settings=first.settings, stats=stats, alternatives=alternatives, portfolio=portfolio,
        rounds=tuple(reports), rounds_stop=why,
    )  # fmt: skip
