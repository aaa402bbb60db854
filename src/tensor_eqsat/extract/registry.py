"""The Extractor protocol and the registry of extractors by name.

An extractor turns an :class:`~tensor_eqsat.extract.problem.ExtractionProblem` into an
:class:`~tensor_eqsat.extract.result.ExtractionResult`. The four built-in ones are registered under
:class:`ExtractorKind`; each carries the cost it is optimal for (extraction-gym's ``Optimal`` tag),
which the differential tests use: extractors optimal for the same cost must agree, and none may
beat them.

Example:
    >>> from tensor_eqsat.extract.problem import ProblemBuilder
    >>> b = ProblemBuilder()
    >>> _ = b.add_node("x", "input", cost=0.0)
    >>> _ = b.add_node("y", "relu", ["x"], cost=0.5)
    >>> extract(b.build(roots=["y"]), "greedy-dag").dag_cost()
    0.5
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from tensor_eqsat.errors import parse_enum
from tensor_eqsat.extract.greedy_dag import GreedyDagExtractor
from tensor_eqsat.extract.greedy_ocf import GreedyOcfExtractor
from tensor_eqsat.extract.greedy_tree import GreedyTreeExtractor
from tensor_eqsat.extract.ilp import IlpConfig, IlpExtractor
from tensor_eqsat.extract.problem import ExtractionProblem
from tensor_eqsat.extract.result import ExtractionResult


@runtime_checkable
class Extractor(Protocol):
    """Chooses one e-node per e-class. ``name`` is its registered name."""

    name: str

    def extract(self, problem: ExtractionProblem) -> ExtractionResult:
        """Extract the roots of ``problem``; raises ExtractionError if that is impossible."""
        ...


class Optimality(enum.Enum):
    """The cost an extractor provably minimises (None: a heuristic)."""

    NONE = "none"
    TREE = "tree"
    DAG = "dag"


class ExtractorKind(enum.Enum):
    """The built-in extractors, by CLI name."""

    GREEDY_TREE = "greedy-tree"
    GREEDY_OCF = "greedy-ocf"
    GREEDY_DAG = "greedy-dag"
    ILP = "ilp"

    @property
    def optimality(self) -> Optimality:
        """TREE for greedy-tree (a Bellman-Ford fixpoint), DAG for ilp (when solved to
        optimality), NONE for the greedy DAG heuristics."""
        return EXTRACTORS[self][1]


ExtractorFactory = Callable[[IlpConfig | None], Extractor]
"""Makes a fresh extractor; receives the ILP settings (only ``ilp`` reads them)."""

EXTRACTORS: dict[ExtractorKind, tuple[ExtractorFactory, Optimality]] = {
    ExtractorKind.GREEDY_TREE: (lambda _: GreedyTreeExtractor(), Optimality.TREE),
    ExtractorKind.GREEDY_OCF: (lambda _: GreedyOcfExtractor(), Optimality.NONE),
    ExtractorKind.GREEDY_DAG: (lambda _: GreedyDagExtractor(), Optimality.NONE),
    ExtractorKind.ILP: (IlpExtractor, Optimality.DAG),
}
"""The built-in extractors: kind -> (factory, the cost it is optimal for). One table, so that a
new extractor is one line here and one member of :class:`ExtractorKind`."""


def make_extractor(kind: ExtractorKind | str, *, ilp_config: IlpConfig | None = None) -> Extractor:
    """A fresh extractor of the given kind.

    Args:
        kind: an :class:`ExtractorKind` or its name (``"greedy-tree"``, ``"greedy-ocf"``,
            ``"greedy-dag"``, ``"ilp"``).
        ilp_config: settings for ``ilp``. Default :class:`IlpConfig` ().

    Raises:
        ConfigError: an unknown name, listing the known ones.
    """
    factory, _ = EXTRACTORS[parse_kind(kind)]
    return factory(ilp_config)


def parse_kind(kind: ExtractorKind | str) -> ExtractorKind:
    """The ExtractorKind for a name; ConfigError (a ValueError) listing the known names otherwise."""
    return parse_enum(ExtractorKind, kind, "extractor")


def extract(
    problem: ExtractionProblem,
    kind: ExtractorKind | str = ExtractorKind.GREEDY_DAG,
    *,
    ilp_config: IlpConfig | None = None,
) -> ExtractionResult:
    """Extract ``problem`` with the named extractor (default greedy-dag)."""
    return make_extractor(kind, ilp_config=ilp_config).extract(problem)
