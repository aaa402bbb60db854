"""A schedule: the ``auto`` search written as data, a sequence of stages that yield candidates.

Each :class:`Stage` says what to run (one saturation rung, the saturation ladder, MCTS, or any
:class:`~tensor_eqsat.search.construction.Construction`), from which e-graph (the source, the
last saturated rung's, the best candidate's), up to which node limit (the first, ``growth`` times
it, or twice the start's size), with which share of the time left, and when (always, or on what
the stages before it found). :class:`~tensor_eqsat.search.portfolio.Portfolio` runs a schedule;
every stage's e-graph is extracted by the final extractor into a candidate, and the cheapest
candidate wins. :data:`AUTO_SCHEDULE` is the default (the portfolio's module docstring has the
measurements behind its order); ``PortfolioConfig(schedule=...)`` replaces it, and a user's
construction joins it as ``Stage(StageKind.CONSTRUCTION, "mine", construction=obj)``.

Alternatives rejected: the schedule as code (an ``if`` chain in the portfolio that a user could
not extend or read as a list); a stage per node limit of the ladder (the ladder's length is
decided while it runs, from the time its rungs take).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from tensor_eqsat.errors import ConfigError


class StageKind(enum.Enum):
    """What a stage runs."""

    SATURATE = "saturate"
    """One TENSAT saturation rung at the stage's node limit."""
    LADDER = "ladder"
    """Saturation rungs at growing node limits (``growth`` times the last each), while the next
    is predicted to end within the stage's share of the time left (with share 1.0: until the
    deadline); it ends for good at a rung that saturates, after ``stall_rungs`` rungs without
    gain, above ``max_node_limit`` or the memory limit, or after a rung cut short."""
    MCTS = "mcts"
    """The paper's MCTS (``mcts_budget`` simulations per step) up to the stage's node limit."""
    CONSTRUCTION = "construction"
    """The stage's own :class:`~tensor_eqsat.search.construction.Construction`."""


class Start(enum.Enum):
    """The e-graph a stage grows (a copy of it)."""

    SOURCE = "source"
    """The model's own e-graph."""
    SATURATED = "saturated"
    """The e-graph of the last saturation rung that saturated below its limit."""
    BEST = "best"
    """The e-graph of the cheapest candidate so far."""


class Limit(enum.Enum):
    """A stage's node limit."""

    FIRST = "first"
    """The run's ``node_limit`` (the paper's 2,000)."""
    WIDE = "wide"
    """``growth`` times the first."""
    GROWN = "grown"
    """Twice the start's e-nodes, at least the first."""


class When(enum.Enum):
    """When a stage runs (a stage whose condition fails is skipped, or recorded as skipped)."""

    ALWAYS = "always"
    A_RUNG_SATURATED = "a rung saturated"
    """Some saturation rung saturated below its limit (else skipped: "no saturation rung
    saturated")."""
    MCTS_AT_NODE_LIMIT = "mcts stopped at its node limit"
    """The first MCTS stage stopped because its e-graph filled the node limit."""
    HAS_CANDIDATE = "a candidate exists"
    """Some stage has finished a candidate."""


@dataclass(frozen=True)
class Stage:
    """One stage of a schedule.

    kind: what it runs. name: its strategy label in the report (``strategy@node_limit``). Default:
        the kind's value. start, limit: its e-graph and node limit. Defaults SOURCE and FIRST.
    share: the share of the time left it may use: a number in (0, 1], or the name of a
        :class:`~tensor_eqsat.search.portfolio.PortfolioConfig` field holding one
        (``"ladder_share"``, ``"mcts_share"``), or ``"rest"``: all but ``extraction_reserve``.
        Default ``"rest"``.
    when: its condition. Default ALWAYS. enabled_by: a boolean PortfolioConfig field that turns
        it on (``"continue_mcts"``); None: always on. Default None.
    cost: the MCTS reward: ``"main"`` (the main extractor) or ``"ilp"`` (ILP-rewarded). Default main.
    construction: the Construction of a CONSTRUCTION stage.

    >>> Stage(StageKind.MCTS, "mcts-continued", start=Start.SATURATED, limit=Limit.GROWN).describe()
    'mcts-continued: mcts from saturated, limit grown, share rest'
    """

    kind: StageKind
    name: str = ""
    start: Start = Start.SOURCE
    limit: Limit = Limit.FIRST
    share: float | str = "rest"
    when: When = When.ALWAYS
    enabled_by: str | None = None
    cost: str = "main"
    construction: Any = None

    def __post_init__(self) -> None:
        if not self.name:
            name = getattr(self.construction, "name", None) if self.kind is StageKind.CONSTRUCTION else None
            object.__setattr__(self, "name", name or self.kind.value)
        if self.kind is StageKind.CONSTRUCTION and self.construction is None:
            raise ConfigError(f"stage {self.name}: a construction stage needs construction=")
        if isinstance(self.share, float | int) and not 0.0 < float(self.share) <= 1.0:
            raise ConfigError(f"stage {self.name}: share must be in (0, 1], got {self.share}")
        if self.cost not in ("main", "ilp"):
            raise ConfigError(f"stage {self.name}: cost must be 'main' or 'ilp', got {self.cost!r}")

    def describe(self) -> str:
        """One line for reports (``settings.portfolio.schedule``)."""
        parts = [f"{self.name}: {self.kind.value}"]
        if self.kind is not StageKind.LADDER:
            parts[0] += f" from {self.start.value}, limit {self.limit.value}"
        parts.append(f"share {self.share}")
        if self.when is not When.ALWAYS:
            parts.append(f"when {self.when.value}")
        if self.enabled_by is not None:
            parts.append(f"if {self.enabled_by}")
        if self.cost != "main":
            parts.append(f"{self.cost} reward")
        return ", ".join(parts)


AUTO_SCHEDULE: tuple[Stage, ...] = (
    # TENSAT saturation at the first limit: a baseline within seconds.
    Stage(StageKind.SATURATE, share="rest"),
    # The ladder within ladder_share of the time left (saturation gains fast where it gains),
    # then MCTS, then the ladder again with whatever time MCTS left.
    Stage(StageKind.LADDER, share="ladder_share"),
    Stage(StageKind.MCTS, share="mcts_share"),
    Stage(StageKind.LADDER, share=1.0),
    # Saturation applies multi-pattern rules only in its first k_multi iterations; MCTS may apply
    # them at any step, so it can still grow a saturated e-graph.
    Stage(
        StageKind.MCTS,
        "mcts-continued",
        start=Start.SATURATED,
        limit=Limit.GROWN,
        when=When.A_RUNG_SATURATED,
        enabled_by="continue_mcts",
    ),
    # The paper's limit can cut MCTS after one merge where two pay (ViT-Huge), which saturation
    # cannot see either.
    Stage(StageKind.MCTS, limit=Limit.WIDE, when=When.MCTS_AT_NODE_LIMIT, enabled_by="wide_mcts"),
    Stage(
        StageKind.MCTS,
        "mcts-ilp",
        start=Start.BEST,
        limit=Limit.GROWN,
        when=When.HAS_CANDIDATE,
        enabled_by="ilp_mcts",
        cost="ilp",
    ),
)
"""The ``auto`` search's schedule (issue 18, measured in docs/notebook/search.md)."""
