"""The search tree of :class:`~tensor_eqsat.search.mcts.Mcts` and what a search reports.

An :class:`Environment` is what the search acts on (one state per tree node, ``step`` reports a
:class:`StepResult`); ``_Node`` holds a state and the per-action statistics of its children
(visits, value sums, immediate rewards, saturated and terminal flags, WU-UCT's in-flight visits);
:class:`StepPlan`, :class:`MctsStep` and :class:`MctsReport` are the data a step and a run return.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from tensor_eqsat.search.stop import StopReason


@dataclass(frozen=True)
class StepResult:
    """What one environment step reports.

    cost: the main extractor's cost of the new state.
    changed: False if the action changed nothing (the state is identical to the previous one).
    done: the new state is terminal (e.g. the e-graph reached its node limit).
    reason: why the state is terminal (e.g. :attr:`StopReason.NODE_LIMIT`); None if not done, and
        :attr:`StopReason.TERMINAL` is reported for a terminal state without one.
    info: environment-specific statistics copied into the step log (rule name, e-graph size...).
    """

    cost: float
    changed: bool
    done: bool = False
    reason: StopReason | None = None
    info: Mapping[str, Any] = field(default_factory=dict)


class Environment(Protocol):
    """A state that actions transform; MCTS owns copies of it, one per tree node.

    ``step`` mutates the state in place; ``copy`` must return an independent state (sharing
    immutable data and caches is fine). Costs must be deterministic for runs to be reproducible.
    """

    @property
    def num_actions(self) -> int:
        """Number of actions; actions are ``0 .. num_actions - 1``."""
        ...

    def cost(self) -> float:
        """The main extractor's cost of the current state."""
        ...

    def step(self, action: int) -> StepResult:
        """Apply ``action`` to the current state."""
        ...

    def pruned_actions(self) -> frozenset[int]:
        """Actions known to change nothing in the current state (may miss some, never wrong)."""
        ...

    def copy(self) -> Environment:
        """An independent copy of the current state."""
        ...


@dataclass(frozen=True)
class ChildStats:
    """Statistics of one root child after planning."""

    action: int
    visits: int
    mean_value: float
    reward: float
    saturated: bool
    done: bool
    best_cost: float = math.inf
    """The lowest main cost of any state a simulation through this child reached (the child's
    state, the states below it in the tree, its rollouts' states); inf if none was priced."""


@dataclass(frozen=True)
class StepPlan:
    """The outcome of one planning step.

    action: the chosen action, or None if every root action is pruned or saturated.
    simulations: simulations run in this step; inherited_visits: root visits carried over by
        subtree reuse (they count against the budget).
    tree_nodes: nodes in the tree at the end; max_depth: deepest selection path.
    pruned_root: root actions pruned before planning.
    aborted: planning ended early because selection reached a node whose children are all
        saturated.
    children: statistics of the root's existing children, by action.
    worker_seconds: root parallelism only: CPU seconds of each worker's tree (the load balance;
        the largest bounds the step on an idle machine). Default () otherwise.
    """

    action: int | None
    simulations: int
    inherited_visits: int
    tree_nodes: int
    max_depth: int
    pruned_root: int
    aborted: bool
    seconds: float
    children: tuple[ChildStats, ...]
    worker_seconds: tuple[float, ...] = ()


@dataclass(frozen=True)
class MctsStep:
    """One real step of :meth:`Mcts.run`.

    cost: the main extractor's cost after the step; best_cost: the lowest cost seen so far
    (initial state included); reward: max(previous cost − cost, 0) (unclipped if so configured).
    """

    index: int
    action: int
    reward: float
    cost: float
    best_cost: float
    changed: bool
    done: bool
    reason: StopReason | None
    plan: StepPlan
    step_seconds: float
    elapsed: float
    info: Mapping[str, Any]


@dataclass(frozen=True)
class MctsReport:
    """The result of :meth:`Mcts.run`; the environment passed in holds the final state."""

    stop_reason: StopReason
    steps: tuple[MctsStep, ...]
    initial_cost: float
    final_cost: float
    best_cost: float
    seconds: float

    @property
    def simulations(self) -> int:
        """Simulations run over all steps."""
        return sum(s.plan.simulations for s in self.steps)

    @property
    def actions(self) -> list[int]:
        """The actions applied to the real environment, in order."""
        return [s.action for s in self.steps]


class _Node:
    """A tree node: a state and per-action statistics of its children."""

    __slots__ = (
        "best",
        "children",
        "cost",
        "done",
        "env",
        "n_pruned",
        "n_reserved",
        "n_saturated",
        "n_visited",
        "pending",
        "pending_total",
        "pruned",
        "reward",
        "saturated",
        "twin",
        "value",
        "visits",
        "visits_total",
    )

    def __init__(self, env: Environment | None, cost: float, n_actions: int, pruned: frozenset[int]) -> None:
        self.env = env
        self.cost = cost
        self.children: list[_Node | None] = [None] * n_actions
        self.reward = [0.0] * n_actions
        self.done = [False] * n_actions
        self.visits = [0] * n_actions
        self.value = [0.0] * n_actions
        # the lowest cost a simulation through the action reached (FinalChoice.BEST_SEEN)
        self.best = [math.inf] * n_actions
        self.saturated = [False] * n_actions
        for a in pruned:
            self.saturated[a] = True
        self.pruned = pruned
        self.twin: _Node | None = None  # the previous tree's node of this state (search/twins.py)
        self.n_pruned = len(pruned)
        self.n_saturated = len(pruned)
        self.n_visited = 0
        self.visits_total = 0
        # In-flight simulations (workers > 1 only): WU-UCT's unobserved visits per action, and
        # actions whose expansion is running (reserved, not yet visited).
        self.pending = [0] * n_actions
        self.pending_total = 0
        self.n_reserved = 0

    def expandable(self) -> bool:
        n = len(self.children)
        k = self.n_visited + self.n_reserved
        return k < n and k + self.n_pruned < n

    def no_child_available(self) -> bool:
        # every tried child is saturated (the pruned ones are counted in n_saturated too)
        return self.n_visited == 0 or self.n_visited == self.n_saturated - self.n_pruned

    def all_saturated(self) -> bool:
        return self.n_saturated == len(self.children)

    def mark_saturated(self, action: int) -> None:
        if not self.saturated[action]:
            self.saturated[action] = True
            self.n_saturated += 1

    def count(self) -> int:
        return 1 + sum(c.count() for c in self.children if c is not None)

    def child_stats(self) -> tuple[ChildStats, ...]:
        """What a step reports of each expanded child."""
        out = []
        for a, child in enumerate(self.children):
            if child is not None:
                n = self.visits[a]
                mean = self.value[a] / n if n else 0.0
                out.append(
                    ChildStats(a, n, mean, self.reward[a], self.saturated[a], self.done[a], self.best[a])
                )
        return tuple(out)
