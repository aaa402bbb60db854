"""Search rounds (DESIGN.md decision 19): the best graph of a round is searched again in a
fresh e-graph while the last round gained something and time is left.

A node limit bounds how deep one e-graph sees (the paper's 2,000 e-nodes); rebuilding the
e-graph from the best graph found lets the rules reach what lay beyond it, as TASO's
backtracking search re-expands its best graphs. :func:`more_rounds` runs the rounds after the
first under the same deadline and combines them into one result (:func:`_combine_rounds`);
:class:`RoundReport` and :class:`RoundsStop` say what each round did and why no further one ran.

Alternative rejected: growing the same e-graph past the node limit between rounds (the limit is
what keeps extraction and the ILP tractable; a fresh e-graph of the best graph is as small as the
first).
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
from tensor_eqsat.search.portfolio import ROUND_MIN_GAIN, combine_rounds
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
        it lowered the cost (by more than :data:`ROUND_MIN_GAIN`).
    """

    index: int
    winner: str | None
    start_cost_ms: float
    cost_ms: float
    enodes: int
    seconds: float
    stop: str
    gained: bool

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
    searches the best graph so far in a fresh e-graph, with the same rules, limits and
    portfolio, under the same deadline (a caller's reserves for the check, the guard and the
    write stay outside it). A Ctrl-C in a later round hands back the best of the rounds before
    it. One result for all the rounds (:func:`_combine_rounds`)."""
    results, reports = [first], [_round_report(1, first, first.original_cost_ms, first_s)]
    best = first
    while (why := _why_stop(run, reports[-1], len(results))) is None:
        n = len(results) + 1
        ts = time.perf_counter()
        try:
            nxt = search_round(run, best.graph, None, _round_progress(progress, n), best.graph, n)
        except KeyboardInterrupt:
            log.warning("interrupted in round %d: returning the best of %d round(s)", n, len(results))
            why = RoundsStop.INTERRUPTED
            break
        results.append(nxt)
        reports.append(_round_report(n, nxt, best.optimized_cost_ms, time.perf_counter() - ts))
        log.info("round %d: %.4f -> %.4f ms (%s)", n, best.optimized_cost_ms, nxt.optimized_cost_ms,
                 reports[-1].stop)  # fmt: skip
        if nxt.optimized_cost_ms < best.optimized_cost_ms:
            best = nxt
    if len(results) == 1:
        stop = StopReason.INTERRUPTED if why is RoundsStop.INTERRUPTED else first.stop_reason
        return replace(first, rounds=tuple(reports), rounds_stop=why, stop_reason=stop)
    return _combine_rounds(run, results, reports, best, why)


def _round_report(n: int, res: OptimizeResult, start_cost: float, seconds: float) -> RoundReport:
    pf = res.portfolio
    if pf is not None:
        winner, stop = (pf.best.label if pf.best is not None else None), pf.stop.value
    else:
        winner, stop = res.settings.search, res.stop_reason.value
    gained = res.optimized_cost_ms < start_cost * (1 - ROUND_MIN_GAIN)
    return RoundReport(n, winner, start_cost, min(res.optimized_cost_ms, start_cost), res.stats.enodes,
                       seconds, stop, gained)  # fmt: skip


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
    why: RoundsStop,
) -> OptimizeResult:
    """One result for the rounds: ``best``'s graph and cost against the first round's original;
    the steps and rule counts of the rounds that led to it (the first up to ``best``'s);
    construction and build seconds summed; the rounds' portfolios as one
    (:func:`~tensor_eqsat.search.portfolio.combine_rounds`: every candidate, the cheapest of all
    winning), whose finalists are the guard's alternatives with ``best``'s e-graph's
    extractions; stopped ``interrupted`` after a Ctrl-C."""
    first, cfg = results[0], run.cfg
    chain = results[: results.index(best) + 1]
    steps = tuple(s for r in chain for s in r.steps)
    counts: dict[int, int] = {}
    for r in chain:
        counts = with_counts(counts, r.rule_counts)
    portfolio = None
    alternatives = best.alternatives
    final = dict(best.stats.final_extraction)
    final["rules_used"] = merged_counts(*(r.rules_used for r in chain))
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
