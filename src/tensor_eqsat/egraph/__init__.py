"""The e-graph engine: EGraph, EClass, ENode, analyses, Graph conversion."""

from tensor_eqsat.egraph.analysis import Analysis, MergeConflict, NoAnalysis, TensorAnalysis, TensorData
from tensor_eqsat.egraph.convert import from_classes, from_graph, to_graph
from tensor_eqsat.egraph.cycles import creates_cycle, find_cycle
from tensor_eqsat.egraph.egraph import EGraph
from tensor_eqsat.egraph.enode import EClass, ENode

__all__ = [
    "Analysis",
    "EClass",
    "EGraph",
    "ENode",
    "MergeConflict",
    "NoAnalysis",
    "TensorAnalysis",
    "TensorData",
    "creates_cycle",
    "find_cycle",
    "from_classes",
    "from_graph",
    "to_graph",
]
