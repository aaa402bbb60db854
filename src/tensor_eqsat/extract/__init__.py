"""Extraction: choose one e-node per e-class (greedy-tree, greedy-ocf, greedy-dag, ilp)."""

from tensor_eqsat.extract.egraph_problem import EGraphProblem, problem_from_egraph
from tensor_eqsat.extract.greedy_dag import GreedyDagExtractor
from tensor_eqsat.extract.greedy_ocf import GreedyOcfExtractor
from tensor_eqsat.extract.greedy_tree import GreedyTreeExtractor
from tensor_eqsat.extract.ilp import IlpBackend, IlpConfig, IlpExtractor
from tensor_eqsat.extract.problem import ClassOrder, ExtractionError, ExtractionProblem, ProblemBuilder
from tensor_eqsat.extract.registry import Extractor, ExtractorKind, Optimality, extract, make_extractor
from tensor_eqsat.extract.result import ExtractionResult, SolveStatus

__all__ = [
    "ClassOrder",
    "EGraphProblem",
    "ExtractionError",
    "ExtractionProblem",
    "ExtractionResult",
    "Extractor",
    "ExtractorKind",
    "GreedyDagExtractor",
    "GreedyOcfExtractor",
    "GreedyTreeExtractor",
    "IlpBackend",
    "IlpConfig",
    "IlpExtractor",
    "Optimality",
    "ProblemBuilder",
    "SolveStatus",
    "extract",
    "make_extractor",
    "problem_from_egraph",
]
