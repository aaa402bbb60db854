"""Partitioning of large graphs: cut into regions, optimize each distinct block once, stitch."""

from tensor_eqsat.partition.driver import (
    PartitionConfig,
    PartitionedResult,
    PartitionReport,
    optimize_partitioned,
    partition_graph,
    should_partition,
)

__all__ = [
    "PartitionConfig",
    "PartitionReport",
    "PartitionedResult",
    "optimize_partitioned",
    "partition_graph",
    "should_partition",
]
