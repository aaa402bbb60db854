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
so time a search does not use (one that finishes its schedule early) goes to the others; each
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
from dataclasses import dataclass, field, replace
from typing import Any

from tensor_eqsat.config import OptimizeConfig, Search
from tensor_eqsat.egraph.egraph import EGraph
from tensor_eqsat.errors import ConfigError
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.optimize import OptimizeResult, OptimizeStats, optimize
from tensor_eqsat.partition.cuts import (
    Gap,
    activation_order,
    coalesce,
    gaps,
    piece_sizes,
    segments,
    weight_only_nodes,
)
from tensor_eqsat.partition.regions import ReaderIndex, Region, build_region
from tensor_eqsat.partition.stitch import stitch
from tensor_eqsat.search.construction import Progress, ProgressFn
from tensor_eqsat.search.stop import StopReason

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartitionConfig:
    """Settings of partitioning (independent of :class:`~tensor_eqsat.config.OptimizeConfig`).

    target_enodes: a region's initial e-nodes should not exceed this (a region with no narrow cut
        inside may). Default None: ``node_limit // region_room``.
    region_room: how many times its initial size a region's e-graph may grow within the node
        limit (sets the default target). Default 32: 62 e-nodes at the paper's 2,000, one
        ViT-Base layer or three BERT layers. Measured with ``auto`` at 60 s
        (``benchmarks/scale.py --target``): BERT at 24 layers gains 59.81 % at 62 (three layers
        a region), 59.00 % at 125 (six) and 58.51 % at 35 (one: the layer cuts then hide
        ``matmul(matmul(x, W), Wq)``); ViT-Base at 96 layers in 20 s gains 19.43 % at 62 and
        18.65 % at 125.
    room: a graph whose initial e-graph has at most ``node_limit / room`` e-nodes is never
        partitioned (:func:`should_partition`). Default 5: 400 e-nodes at 2,000 (BERT at 8
        layers has 154 and gains 59.81 % whole, at 24 layers 458 and 40.71 %).
    fit_room: a graph whose initial e-graph has at least ``node_limit / fit_room`` e-nodes is
        always partitioned (if it can be cut): it does not fit with room to grow. Default 2:
        1,000 e-nodes at 2,000.
    max_distinct_share: in between, a graph is partitioned only when its regions repeat: at
        most this share of them distinct. Default 0.5. NASNet-A (583 e-nodes; 16 regions, 11
        distinct) gains 37.97 % whole and 36.96 % partitioned at 60 s; ViT-Base at 12 layers
        (562; 12 regions, 3 distinct) 19.17 % both ways; BERT at 24 layers (458; 8, 3) 40.71 %
        whole and 59.81 % partitioned.
    min_region_seconds: the least time a distinct region's search gets. Default 1.0.
    overrun_margin: each region's search is given this fraction less than its share, as a
        search may end after its budget (an ``auto`` search on a 2-layer ViT-Base region ran
        20.2 s on a 17.9 s budget). Default 0.15.
    reserve_seconds: time kept from the budget for partitioning, stitching and pricing. Default
        1.0.
    whole_pass: with at least ``whole_min_seconds`` left once every region is searched, search
        the whole graph too with that time (when its e-graph is under the node limit) and return
        it if it is cheaper than the stitched graph. Default True.
    whole_min_seconds: see ``whole_pass``. Default 5.0.

    >>> PartitionConfig().target(2000), PartitionConfig(target_enodes=300).target(2000)
    (62, 300)
    """

    target_enodes: int | None = None
    region_room: int = 32
    room: float = 5.0
    fit_room: float = 2.0
    max_distinct_share: float = 0.5
    min_region_seconds: float = 1.0
    overrun_margin: float = 0.15
    reserve_seconds: float = 1.0
    whole_pass: bool = True
    whole_min_seconds: float = 5.0

    def __post_init__(self) -> None:
        if self.target_enodes is not None and (
            not isinstance(self.target_enodes, int) or self.target_enodes < 1
        ):
            raise ConfigError(
                f"PartitionConfig.target_enodes must be a positive integer, got {self.target_enodes!r}"
            )
        if not isinstance(self.region_room, int) or self.region_room < 1:
            raise ConfigError(
                f"PartitionConfig.region_room must be a positive integer, got {self.region_room!r}"
            )
        if not self.room > 0:
            raise ConfigError(f"PartitionConfig.room must be positive, got {self.room!r}")
        if not 0 < self.fit_room <= self.room:
            raise ConfigError(f"PartitionConfig.fit_room must be in (0, room], got {self.fit_room!r}")
        if not 0 < self.max_distinct_share <= 1:
            raise ConfigError(
                f"PartitionConfig.max_distinct_share must be in (0, 1], got {self.max_distinct_share!r}"
            )
        if not self.min_region_seconds > 0:
            raise ConfigError(
                f"PartitionConfig.min_region_seconds must be positive, got {self.min_region_seconds!r}"
            )
        if not 0 <= self.overrun_margin < 1:
            raise ConfigError(
                f"PartitionConfig.overrun_margin must be in [0, 1), got {self.overrun_margin!r}"
            )
        if not self.reserve_seconds >= 0:
            raise ConfigError(f"PartitionConfig.reserve_seconds must be >= 0, got {self.reserve_seconds!r}")

    def target(self, node_limit: int) -> int:
        """The region target size in initial e-nodes for a run with ``node_limit``."""
        if self.target_enodes is not None:
            return self.target_enodes
        return max(1, node_limit // self.region_room)


@dataclass(frozen=True)
class Partition:
    """A graph cut into regions.

    regions: in topological order. gaps: every candidate cut of the activation order.
    cuts: the gaps between regions. target: the target size used.
    """

    graph: Graph = field(repr=False)
    regions: tuple[Region, ...]
    gaps: tuple[Gap, ...] = field(repr=False)
    cuts: tuple[Gap, ...]
    target: int

    def distinct(self) -> dict[str, list[Region]]:
        """Region key -> its copies, in order of first appearance."""
        out: dict[str, list[Region]] = {}
        for r in self.regions:
            out.setdefault(r.key, []).append(r)
        return out

    def region_of(self) -> dict[int, int]:
        """Activation node id -> index of the region holding it."""
        return {nid: r.index for r in self.regions for nid in r.nodes}


def partition_graph(graph: Graph, target: int) -> Partition:
    """Cut ``graph`` into regions of about ``target`` initial e-nodes (module docstring of
    :mod:`tensor_eqsat.partition.cuts`).

    >>> from tensor_eqsat.zoo.registry import get
    >>> part = partition_graph(get("vit-base", layers=8), target=125)
    >>> len(part.regions), len(part.distinct()), [c.width for c in part.cuts]
    (6, 3, [1, 1, 1, 1, 1])
    """
    fixed = weight_only_nodes(graph)
    order = activation_order(graph, fixed)
    sizes = piece_sizes(graph, order, fixed)
    all_gaps = gaps(graph, order)
    pieces = segments(sizes, all_gaps, target)
    index = ReaderIndex(graph, order)
    keys = [build_region(graph, order, a, b, fixed, index).key for a, b in pieces]
    piece_total = [sum(sizes[a:b]) for a, b in pieces]
    groups = coalesce(pieces, piece_total, keys, target)
    regions = []
    for i, group in enumerate(groups):
        a, b = pieces[group[0]][0], pieces[group[-1]][1]
        regions.append(build_region(graph, order, a, b, fixed, index, number=i))
    by_pos = {g.position: g for g in all_gaps}
    cuts = tuple(by_pos[pieces[g[0]][0]] for g in groups[1:])
    return Partition(graph, tuple(regions), tuple(all_gaps), cuts, target)


def should_partition(
    graph: Graph, config: OptimizeConfig | None = None, partition: PartitionConfig | None = None
) -> bool:
    """Whether ``graph`` is worth partitioning (the pipeline's default choice): it can be cut,
    and its initial e-graph would not fit the node limit with room to grow: over ``node_limit
    / fit_room`` e-nodes, or over ``node_limit / room`` with repeated regions (at most
    ``max_distinct_share`` of them distinct), where one search serves several regions. A graph
    with little repetition in between (NASNet-A) loses more at its cuts than it gains.

    >>> from tensor_eqsat.zoo.registry import get
    >>> should_partition(get("vit-base")), should_partition(get("vit-base", layers=2))
    (True, False)
    >>> should_partition(get("nasneta")), should_partition(get("bert", layers=24))
    (False, True)
    """
    cfg = config or OptimizeConfig()
    pcfg = partition or PartitionConfig()
    limit = cfg.capped_node_limit()
    enodes = EGraph.from_graph(graph).num_enodes
    if enodes * pcfg.room <= limit:
        return False
    part = partition_graph(graph, pcfg.target(limit))
    if len(part.regions) <= 1:
        return False
    if enodes * pcfg.fit_room >= limit:
        return True
    return len(part.distinct()) <= pcfg.max_distinct_share * len(part.regions)


@dataclass(frozen=True)
class RegionReport:
    """What the search did for one distinct region.

    key: its structural key; copies: how many regions share it; first: the index of its first
    copy; nodes: activation nodes per copy; enodes: its initial e-graph's e-nodes;
    original_ms, optimized_ms: one copy's cost before and after; budget_s: the time it was given
    (None: no limit); seconds: the time it took; stop_reason: why its search stopped; winner:
    the ``auto`` candidate that won (None for other searches); runs: how many times it was
    searched (twice when time was left over, the better kept); cut_short: whether its last
    search ran out of time before its schedule ended.
    """

    key: str
    copies: int
    first: int
    nodes: int
    enodes: int
    original_ms: float
    optimized_ms: float
    budget_s: float | None
    seconds: float
    stop_reason: str
    winner: str | None = None
    runs: int = 1
    cut_short: bool = False

    @property
    def gain_pct(self) -> float:
        """One copy's speedup, percent."""
        return (
            0.0 if self.original_ms <= 0 else (self.original_ms - self.optimized_ms) / self.original_ms * 100
        )

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "gain_pct": self.gain_pct}


@dataclass(frozen=True)
class PartitionReport:
    """What partitioning did: ``regions`` regions (``distinct`` of them different), the
    ``target`` size, the widths of the ``cuts`` between regions (1: a single-tensor cut), one
    :class:`RegionReport` per distinct region (heaviest first, as searched), the ``sequence`` of
    distinct-region indices region by region, the stitched graph's cost, ``fell_back`` when
    the stitched graph cost more than the original and the original was returned, and the
    speedup of the whole-graph search run with time the regions left (``whole_pct``; None when
    none ran) and whether its graph was returned (``whole_won``)."""

    regions: int
    distinct: int
    target: int
    cuts: tuple[int, ...]
    searched: tuple[RegionReport, ...]
    sequence: tuple[int, ...]
    stitched_ms: float
    fell_back: bool = False
    partition_s: float = 0.0
    stitch_s: float = 0.0
    whole_pct: float | None = None
    whole_won: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "regions": self.regions,
            "distinct": self.distinct,
            "target": self.target,
            "cuts": list(self.cuts),
            "single_tensor_cuts": sum(w == 1 for w in self.cuts),
            "searched": [r.to_dict() for r in self.searched],
            "sequence": list(self.sequence),
            "stitched_ms": self.stitched_ms,
            "fell_back": self.fell_back,
            "partition_s": self.partition_s,
            "stitch_s": self.stitch_s,
            "whole_pct": self.whole_pct,
            "whole_won": self.whole_won,
        }


@dataclass(frozen=True)
class PartitionedResult(OptimizeResult):
    """An :class:`~tensor_eqsat.optimize.OptimizeResult` of a partitioned run, with its
    ``partition`` report (None when the graph was optimized whole)."""

    partition: PartitionReport | None = None

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if self.partition is not None:
            out["partition"] = self.partition.to_dict()
        return out


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
    cm = cfg.cost_model_object()
    groups = part.distinct()
    keys = list(groups)
    weight = {k: max(cm.graph_cost(groups[k][0].graph), 1e-9) * len(groups[k]) for k in keys}
    todo = sorted(keys, key=lambda k: (-weight[k], keys.index(k)))
    best: dict[str, tuple[OptimizeResult, RegionReport]] = {}

    def search(n: int, key: str, share: float | None) -> OptimizeResult:
        rep = groups[key][0]
        ts = time.perf_counter()
        res = optimize(
            rep.graph, _region_config(cfg, share), progress=_region_progress(progress, t0, n, len(todo))
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
            chosen.stop_reason.value, label, runs, _unfinished(res),
        )  # fmt: skip
        best[key] = (chosen, report)
        log.info("region %d/%d (%d copies): %.4f -> %.4f ms in %.1f s", n + 1, len(todo), len(groups[key]),
                 res.original_cost_ms, res.optimized_cost_ms, seconds)  # fmt: skip
        return res

    for n, key in enumerate(todo):
        left = _left(deadline, pcfg.reserve_seconds)
        share = None
        if left is not None:
            rest = sum(weight[k] for k in todo[n:])
            share = max(pcfg.min_region_seconds, left * weight[key] / rest * (1 - pcfg.overrun_margin))
        search(n, key, share)
    # Time a search did not use (one that finished early) goes to the regions cut short: each,
    # heaviest first, is searched again from scratch when it can have at least twice its first
    # time (a search with more time goes as far as the first and further), and the better kept.
    for n, key in enumerate(todo):
        left = _left(deadline, pcfg.reserve_seconds)
        first = best[key][1]
        if left is None or not first.cut_short:
            continue
        share = left * (1 - pcfg.overrun_margin)
        if share >= 2 * first.seconds:
            search(n, key, share)
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
    whole_pct = None
    left = _left(deadline, pcfg.reserve_seconds)
    # Time the regions left: the whole graph too, where its e-graph can still grow, as the
    # rewrites that span cuts are found only there (TT: 17.35 % partitioned in 30 s of 60,
    # 17.44 % whole).
    if (
        pcfg.whole_pass
        and left is not None
        and left >= pcfg.whole_min_seconds
        and EGraph.from_graph(source).num_enodes < cfg.capped_node_limit()
    ):
        whole = optimize(source, _region_config(cfg, left * (1 - pcfg.overrun_margin)))
        whole_pct = whole.speedup_pct
        if whole.optimized_cost_ms < final_cost:
            final, final_cost = whole.graph, whole.optimized_cost_ms
    index_of = {k: i for i, k in enumerate(todo)}
    report = PartitionReport(
        len(part.regions), len(keys), part.target, tuple(c.width for c in part.cuts), tuple(reports),
        tuple(index_of[r.key] for r in part.regions), stitched_cost, fell_back, partition_s, stitch_s,
        whole_pct, final is not stitched and not fell_back,
    )  # fmt: skip
    return _combine(source, final, original_cost, final_cost, t0, results, groups, todo, report, cfg)


def _unfinished(res: OptimizeResult) -> bool:
    """Whether a region's search ran out of time before its schedule ended."""
    if res.portfolio is not None:
        return res.portfolio.stop == StopReason.TIME_LIMIT.value
    return res.stop_reason is StopReason.TIME_LIMIT


def _left(deadline: float | None, reserve: float) -> float | None:
    return None if deadline is None else max(deadline - time.perf_counter() - reserve, 0.0)


def _region_config(cfg: OptimizeConfig, seconds: float | None) -> OptimizeConfig:
    """``cfg`` for one region's search of ``seconds`` (None: the config's own limits); no
    alternatives (they would be extractions of one region, not of the stitched graph)."""
    if seconds is None:
        return replace(cfg, alternatives=())
    seconds = max(seconds, 1e-3)
    limit = None if cfg.time_limit is None else min(cfg.time_limit, seconds)
    return replace(cfg, time_budget=seconds, time_limit=limit, alternatives=())


def _region_progress(progress: ProgressFn | None, t0: float, n: int, total: int) -> ProgressFn | None:
    if progress is None:
        return None
    start = time.perf_counter() - t0
    label = f"region {n + 1}/{total}"
    return lambda p: progress(replace(p, elapsed=p.elapsed + start, rule=f"{label}: {p.rule or p.phase}"))


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
        final_extraction={"regions": [r.stats.final_extraction for r in results]},
        costing_s=report.stitch_s,
    )
    settings = replace(heaviest.settings, model=cfg.model)
    wall = time.perf_counter() - t0
    log.info("partitioned %s: %d regions (%d distinct), %.4f -> %.4f ms in %.1f s", cfg.model or "graph",
             report.regions, report.distinct, original_cost, final_cost, wall)  # fmt: skip
    return PartitionedResult(
        final, source, original_cost, final_cost, wall, stop, (), dict(rule_counts), settings, stats,
        partition=report,
    )  # fmt: skip


__all__ = [
    "Partition",
    "PartitionConfig",
    "PartitionReport",
    "PartitionedResult",
    "Progress",
    "RegionReport",
    "optimize_partitioned",
    "partition_graph",
    "should_partition",
]
