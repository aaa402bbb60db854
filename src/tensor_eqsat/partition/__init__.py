"""Partitioning of large graphs: cut into regions, optimize each distinct block once, stitch."""

from tensor_eqsat.partition.driver import optimize_partitioned
from tensor_eqsat.partition.plan import PartitionConfig, partition_graph, should_partition
from tensor_eqsat.partition.report import PartitionedResult, PartitionReport

__all__ = [
    "PartitionConfig",
    "PartitionReport",
    "PartitionedResult",
    "optimize_partitioned",
    "partition_graph",
    "should_partition",
]
