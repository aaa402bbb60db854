"""``optimize_partitioned``: optimize a large graph region by region, each distinct block once
(issue 29).

The e-graph's node limit fills up on a deep model's first layers and the rest is left as it
was (ViT-Base: 19.17 % at 12 layers, 9.7 % at 48 and 96). So a graph whose e-graph would not fit
the node limit with room to grow (:func:`should_partition`) is cut into regions
(:func:`partition_graph`: single-tensor cuts first, then the best narrow cuts, packed up to a
target size; :mod:`tensor_eqsat.partition.cuts`), regions equal up to weight values share one
canonical graph (:mod:`tensor_eqsat.partition.regions`), each distinct one is optimized once by
:func:`~tensor_eqsat.optimize.optimize` with the caller's settings (any search: ``saturate``,
``mcts``, ``auto`` or a Construction), and the results are stitched back into one Graph
(:mod:`tensor_eqsat.partition.stitch`), priced as a whole by the same cost model. 96 identical
layers cost one search.

Time. The budget (``deadline``, else the config's time budget) is shared among the distinct
regions in proportion to their weight, the region's original cost times its copies. The
heaviest (a deep model's repeated layer) goes first, and each gets its share of what is left,
so time a search does not use (one that finishes its schedule early) goes to the others; within
its share each region's search runs its rounds (``OptimizeConfig.rounds``: ``auto`` repeats from
its best graph until a round gains nothing), and the result reports a fixpoint when every
region's search (or the whole graph's, when it won) reached its own; each
share is cut by ``overrun_margin``, as a search ends a little after its budget (its last
extraction), and is at least ``min_region_seconds``. Time still left then goes to the regions
whose search was cut short, searched again with it when that at least doubles their time (the
better result kept); what remains after that (at least ``whole_min_seconds``) searches the whole
graph, where its e-graph is under the node limit, and the cheaper of it and the stitched graph
is returned. A reserve is kept for stitching and pricing.

What a cut costs: a rewrite whose left-hand side spans a cut is not found. Single-pattern rules
with nested operators can match across a cut (``matmul(matmul(a, b), c)`` across a chain of two
matmuls); multi-pattern rules whose two matches read one tensor cannot across a clean cut (all
readers of a crossing tensor are on one side), only across a split one.
:func:`~tensor_eqsat.partition.span.spanning_matches` counts the matches a partition loses on the
original graph, per rule.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import fields, replace
from typing import Any

from tensor_eqsat.config import OptimizeConfig, Search
from tensor_eqsat.cost.model import pass_cost
from tensor_eqsat.egraph.egraph import EGraph
from tensor_eqsat.egraph.origins import merged_counts
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.optimize import OptimizeResult, OptimizeStats, RoundsStop, optimize
from tensor_eqsat.partition.changes import Change, region_changes
from tensor_eqsat.partition.plan import (
    PartitionConfig,
    partition_graph,
)
from tensor_eqsat.partition.regions import Region
from tensor_eqsat.partition.report import PartitionedResult, PartitionReport, RegionReport
from tensor_eqsat.partition.stitch import stitch
from tensor_eqsat.search.construction import ProgressFn
from tensor_eqsat.search.stop import StopReason

log = logging.getLogger(__name__)


def optimize_partitioned(
    graph: Graph | str,
    config: OptimizeConfig | None = None,
    *,
    partition: PartitionConfig | None = None,
    deadline: float | None = None,
    progress: ProgressFn | None = None,
    **overrides: Any,
) -> PartitionedResult:
    """Optimize ``graph`` region by region (module docstring), each distinct region once with
    ``config`` (and ``overrides``, as :func:`~tensor_eqsat.optimize.optimize` takes them).

    deadline: a ``time.perf_counter()`` value the whole call ends by (each region's search is
        given its share of the time left). Default None: the config's time budget from now
        (``auto``: 60 s unless set; ``mcts``/``saturate``: ``time_limit`` or ``time_budget``,
        none if neither is set).
    progress: receives :class:`~tensor_eqsat.search.construction.Progress` events of each
        region's run (``rule`` names the region), elapsed from this call's start.

    A graph that partitions into one region is optimized whole. Raises what ``optimize``
    raises.

    >>> from tensor_eqsat.zoo.registry import get
    >>> r = optimize_partitioned(get("vit-base", layers=4, hidden=64, mlp=128, heads=4, image=32),
    ...                          search="saturate", node_limit=600, time_limit=20,
    ...                          partition=PartitionConfig(target_enodes=60))
    >>> r.partition.regions, r.partition.distinct, r.speedup_pct > 0
    (6, 3, True)
    """
    t0 = time.perf_counter()
    cfg = (config or OptimizeConfig()).with_overrides(**overrides)
    pcfg = partition or PartitionConfig()
    if isinstance(graph, str):
        from tensor_eqsat import zoo

        source = zoo.get(graph)
        if cfg.model is None:
            cfg = replace(cfg, model=graph)
    else:
        source = graph
    if deadline is None:
        budget = cfg.auto_time_budget() if cfg.search is Search.AUTO else cfg.run_time_limit()
        deadline = None if budget is None else t0 + budget
    part = partition_graph(source, pcfg.target(cfg.capped_node_limit()))
    partition_s = time.perf_counter() - t0
    if len(part.regions) <= 1:
        whole = optimize(
            source, _region_config(cfg, _left(deadline, pcfg.reserve_seconds)), progress=progress
        )
        return _wrap(whole, None)
    cm = cfg.cost_model_object(source)
    groups = part.distinct()
    keys = list(groups)
    # A region's share is its ops' cost (the forward pass's fixed cost is paid once, by the whole).
    fixed = pass_cost(cm)
    weight = {k: max(cm.graph_cost(groups[k][0].graph) - fixed, 1e-9) * len(groups[k]) for k in keys}
    todo = sorted(keys, key=lambda k: (-weight[k], keys.index(k)))
    best: dict[str, tuple[OptimizeResult, RegionReport]] = {}

    def search(n: int, key: str, share: float | None) -> OptimizeResult:
        rep = groups[key][0]
        ts = time.perf_counter()
        res = optimize(
            rep.graph, _region_config(cfg, share), progress=_region_progress(progress, n, len(todo))
        )
        seconds = time.perf_counter() - ts
        won = res.portfolio.best if res.portfolio is not None else None
        old = best.get(key)
        runs, spent, given = 1, seconds, share
        if old is not None:
            runs, spent = old[1].runs + 1, old[1].seconds + seconds
            given = None if share is None or old[1].budget_s is None else old[1].budget_s + share
        chosen = res if old is None or res.optimized_cost_ms < old[0].optimized_cost_ms else old[0]
        chosen_won = won if chosen is res else None
        label = (
            chosen_won.label
            if chosen_won is not None
            else (old[1].winner if old and chosen is not res else None)
        )
        report = RegionReport(
            key, len(groups[key]), rep.index, len(rep.nodes), res.stats.initial_enodes,
            chosen.original_cost_ms, min(chosen.optimized_cost_ms, chosen.original_cost_ms), given, spent,
            chosen.stop_reason.value, label, runs, _unfinished(res), len(chosen.rounds), chosen.fixpoint,
        )  # fmt: skip
        best[key] = (chosen, report)
        log.info("region %d/%d (%d copies): %.4f -> %.4f ms in %.1f s", n + 1, len(todo), len(groups[key]),
                 res.original_cost_ms, res.optimized_cost_ms, seconds)  # fmt: skip
        return res

    # A Ctrl-C that a region's search caught (``auto`` hands back its best so far) ends the
    # whole call: the regions not searched yet keep their original graph.
    interrupted = False
    for n, key in enumerate(todo):
        left = _left(deadline, pcfg.reserve_seconds)
        share = None
        if left is not None:
            rest = sum(weight[k] for k in todo[n:])
            share = max(pcfg.min_region_seconds, left * weight[key] / rest * (1 - pcfg.overrun_margin))
        if _interrupted(search(n, key, share)):
            interrupted = True
            break
    # Time a search did not use (one that finished early) goes to the regions cut short: each,
    # heaviest first, is searched again from scratch when it can have at least twice its first
    # time (a search with more time goes as far as the first and further), and the better kept.
    for n, key in enumerate(todo):
        left = _left(deadline, pcfg.reserve_seconds)
        if interrupted or key not in best:
            break
        first = best[key][1]
        if left is None or not first.cut_short:
            continue
        share = left * (1 - pcfg.overrun_margin)
        if share >= 2 * first.seconds:
            interrupted = _interrupted(search(n, key, share))
    template = next(iter(best.values()))[0]
    for key in todo:
        if key not in best:
            rep = groups[key][0]
            cost = cm.graph_cost(rep.graph)
            left_out = RegionReport(key, len(groups[key]), rep.index, len(rep.nodes), 0, cost, cost, None,
                                    0.0, StopReason.INTERRUPTED.value, None, 0, False, 0)  # fmt: skip
            best[key] = (_unsearched(template, rep.graph, cost), left_out)
    optimized = {k: best[k][0].graph if best[k][0].optimized_cost_ms <= best[k][0].original_cost_ms
                 else groups[k][0].graph for k in todo}  # fmt: skip
    reports = [best[k][1] for k in todo]
    results = [best[k][0] for k in todo]
    tst = time.perf_counter()
    stitched = stitch(source, part.regions, optimized)
    original_cost, stitched_cost = cm.graph_cost(source), cm.graph_cost(stitched)
    fell_back = stitched_cost > original_cost
    final, final_cost = (source, original_cost) if fell_back else (stitched, stitched_cost)
    stitch_s = time.perf_counter() - tst
    whole_pct, whole_won, whole_stop = None, False, None
    left = _left(deadline, pcfg.reserve_seconds)
    # Time the regions left: the whole graph too, where its e-graph can still grow, as the
    # rewrites that span cuts are found only there (TT: 17.35 % partitioned in 30 s of 60,
    # 17.44 % whole).
    if (
        pcfg.whole_pass
        and not interrupted
        and left is not None
        and left >= pcfg.whole_min_seconds
        and EGraph.from_graph(source).num_enodes < cfg.capped_node_limit()
    ):
        whole = optimize(source, _region_config(cfg, left * (1 - pcfg.overrun_margin)))
        whole_pct, whole_stop = whole.speedup_pct, whole.rounds_stop
        if whole.optimized_cost_ms < final_cost:
            final, final_cost, whole_won = whole.graph, whole.optimized_cost_ms, True
    index_of = {k: i for i, k in enumerate(todo)}
    changed: tuple[Change, ...] | None = None
    if not whole_won:
        changed = () if fell_back else tuple(region_changes(source, groups, optimized, todo))
    report = PartitionReport(
        len(part.regions), len(keys), part.target, tuple(c.width for c in part.cuts), tuple(reports),
        tuple(index_of[r.key] for r in part.regions), stitched_cost, fell_back, partition_s, stitch_s,
        whole_pct, whole_won,
    )  # fmt: skip
    combined = _combine(source, final, original_cost, final_cost, t0, results, groups, todo, report, cfg)
    stops = [whole_stop] if whole_won else [r.rounds_stop for r in results if r.rounds]
    combined = replace(combined, changed_regions=changed, rounds_stop=_rounds_stop(stops))
    return replace(combined, stop_reason=StopReason.INTERRUPTED) if interrupted else combined


def _rounds_stop(stops: list[RoundsStop | None]) -> RoundsStop | None:
    """The partitioned result's ``rounds_stop``: ``fixpoint`` when every region's search (or the
    whole graph's, when it won) reached its fixpoint, else the first other reason (None when no
    search ran)."""
    if not stops:
        return None
    return next((s for s in stops if s is not RoundsStop.FIXPOINT), RoundsStop.FIXPOINT)


def _interrupted(res: OptimizeResult) -> bool:
    """Whether a region's search ended on a Ctrl-C (caught by ``auto``'s portfolio)."""
    if res.stop_reason is StopReason.INTERRUPTED:
        return True
    return res.portfolio is not None and res.portfolio.stop == StopReason.INTERRUPTED.value


def _unsearched(template: OptimizeResult, graph: Graph, cost: float) -> OptimizeResult:
    """A region left as it was (the call was interrupted before its search), shaped like the
    searched regions' ``template``."""
    stats = OptimizeStats(0.0, 0, {}, 0.0, 0, 0, 0.0, {"extractor": None, "status": None}, 0.0)
    return replace(template, graph=graph, original=graph, original_cost_ms=cost, optimized_cost_ms=cost,
                   wall_s=0.0, stop_reason=StopReason.INTERRUPTED, steps=(), rule_counts={}, stats=stats,
                   alternatives=(), portfolio=None, rounds=(), rounds_stop=None)  # fmt: skip


def _unfinished(res: OptimizeResult) -> bool:
    """Whether a region's search ran out of time before its schedule ended."""
    if res.portfolio is not None:
        return res.portfolio.stop == StopReason.TIME_LIMIT.value
    return res.stop_reason is StopReason.TIME_LIMIT


def _left(deadline: float | None, reserve: float) -> float | None:
    return None if deadline is None else max(deadline - time.perf_counter() - reserve, 0.0)


def _region_config(cfg: OptimizeConfig, seconds: float | None) -> OptimizeConfig:
    """``cfg`` for one region's search of ``seconds`` (None: the config's own limits); no
    alternatives (they would be extractions of one region, not of the stitched graph), and no
    partitioning of the region itself, should the config have a ``partition`` switch."""
    off: dict[str, Any] = {"alternatives": ()}
    if "partition" in {f.name for f in fields(cfg)}:
        off["partition"] = False
    if seconds is None:
        return replace(cfg, **off)
    seconds = max(seconds, 1e-3)
    if cfg.time_limit is not None:  # (a config has a time limit or a time budget, not both)
        return replace(cfg, time_limit=min(cfg.time_limit, seconds), **off)
    return replace(cfg, time_budget=seconds, **off)


def _region_progress(progress: ProgressFn | None, n: int, total: int) -> ProgressFn | None:
    if progress is None:
        return None
    label = f"region {n + 1}/{total}"
    return lambda p: progress(replace(p, rule=f"{label}: {p.rule or p.phase}"))


def _wrap(result: OptimizeResult, report: PartitionReport | None) -> PartitionedResult:
    return PartitionedResult(**{**result.__dict__, "partition": report})


def _combine(
    source: Graph,
    final: Graph,
    original_cost: float,
    final_cost: float,
    t0: float,
    results: list[OptimizeResult],
    groups: dict[str, list[Region]],
    todo: list[str],
    report: PartitionReport,
    cfg: OptimizeConfig,
) -> PartitionedResult:
    """One result for the whole graph from the distinct regions' results (``todo`` order)."""
    copies = [len(groups[k]) for k in todo]
    rule_counts: Counter[int] = Counter()
    for res, c in zip(results, copies, strict=True):
        for rule, k in res.rule_counts.items():
            rule_counts[rule] += k * c
    heaviest = results[0]
    reasons = {r.stop_reason for r in results}
    stop = heaviest.stop_reason if len(reasons) > 1 else next(iter(reasons))
    stats = OptimizeStats(
        build_s=sum(r.stats.build_s for r in results),
        initial_enodes=sum(r.stats.initial_enodes for r in results),
        construction={"partition": report.to_dict()},
        search_s=sum(r.stats.search_s for r in results),
        enodes=sum(r.stats.enodes for r in results),
        classes=sum(r.stats.classes for r in results),
        final_extraction_s=sum(r.stats.final_extraction_s for r in results),
        final_extraction={
            # The extractor and the least certain status of the regions' final extractions.
            "extractor": heaviest.stats.final_extraction.get("extractor"),
            "status": _weakest(r.stats.final_extraction.get("status") for r in results),
            "regions": [r.stats.final_extraction for r in results],
            # Each distinct region's applications, once per copy of it in the graph.
            "rules_used": merged_counts(
                *({k: n * c for k, n in r.rules_used.items()} for r, c in zip(results, copies, strict=True))
            ),
        },
        costing_s=report.stitch_s,
    )
    # The call's own limits, not the heaviest region's share of them.
    settings = replace(
        heaviest.settings, model=cfg.model, time_budget=cfg.time_budget, time_limit=cfg.time_limit
    )
    wall = time.perf_counter() - t0
    log.info("partitioned %s: %d regions (%d distinct), %.4f -> %.4f ms in %.1f s", cfg.model or "graph",
             report.regions, report.distinct, original_cost, final_cost, wall)  # fmt: skip
    return PartitionedResult(
        final, source, original_cost, final_cost, wall, stop, (), dict(rule_counts), settings, stats,
        partition=report,
    )  # fmt: skip


def _weakest(statuses: Any) -> str:
    """``optimal`` when every region's extraction is, else the first other status."""
    seen = [s for s in statuses if s is not None]
    return next((s for s in seen if s != "optimal"), "optimal" if seen else "none")


__all__ = ["optimize_partitioned"]
