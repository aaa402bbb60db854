"""What a partitioned run reports: per distinct region, for the partition, and the result
(issue 29)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tensor_eqsat.optimize import OptimizeResult


@dataclass(frozen=True)
class RegionReport:
    """What the search did for one distinct region.

    key: its structural key; copies: how many regions share it; first: the index of its first
    copy; nodes: activation nodes per copy; enodes: its initial e-graph's e-nodes;
    original_ms, optimized_ms: one copy's cost before and after; budget_s: the time it was given
    (None: no limit); seconds: the time it took; stop_reason: why its search stopped; winner:
    the ``auto`` candidate that won (None for other searches); runs: how many times it was
    searched (twice when time was left over, the better kept); cut_short: whether its last
    search ran out of time before its schedule ended; rounds: the search rounds its kept result
    ran (``OptimizeConfig.rounds``, within its share); fixpoint: whether that result is a
    fixpoint of the search (its last round gained nothing).
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
    rounds: int = 1
    fixpoint: bool = False

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
    changed_regions: tuple[Any, ...] | None = None
    """The distinct regions the result rewrote, as :class:`~tensor_eqsat.partition.changes.Change`
    pairs (each region's graph and its optimized graph, with its first copy's weights), in
    search order; None when the result is not the stitched regions (the whole-graph pass won, or
    the graph was optimized whole): check the result by :func:`~tensor_eqsat.partition.changes.changes`
    then."""

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if self.partition is not None:
            out["partition"] = self.partition.to_dict()
        return out
