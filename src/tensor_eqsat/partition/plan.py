"""What to cut: the partition settings, a graph's partition and the pipeline's choice whether to
partition at all (issue 29; the algorithm is in :mod:`tensor_eqsat.partition.cuts`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from tensor_eqsat.config import OptimizeConfig
from tensor_eqsat.egraph.egraph import EGraph
from tensor_eqsat.errors import ConfigError
from tensor_eqsat.ir.graph import Graph
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
        most this share of them distinct, so that one search serves several regions. Default
        0.5. Measured at 60 s: BERT at 24 layers (458 e-nodes; 10 regions, 4 distinct) gains
        40.71 % whole and 59.73 % partitioned, ViT-Base at 12 layers (562; 14, 3) 19.17 % both
        ways; without repetition, MobileNet-v2 (422; 25, 21) loses at its cuts (the stitched
        graph 8.54 %, whole 10.03 %) and NASNet-A (583; 16, 11) gave 38.20 % partitioned and
        37.97 % whole, one run each: kept whole, as before.
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
    graph: Graph,
    config: OptimizeConfig | None = None,
    partition: PartitionConfig | None = None,
    *,
    enodes: int | None = None,
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
    if enodes is None:  # the size of the graph's initial e-graph, when the caller has not built it
        enodes = EGraph.from_graph(graph).num_enodes
    if enodes * pcfg.room <= limit:
        return False
    part = partition_graph(graph, pcfg.target(limit))
    if len(part.regions) <= 1:
        return False
    if enodes * pcfg.fit_room >= limit:
        return True
    return len(part.distinct()) <= pcfg.max_distinct_share * len(part.regions)
