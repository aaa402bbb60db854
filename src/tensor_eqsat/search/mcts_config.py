"""Settings of :class:`~tensor_eqsat.search.mcts.Mcts`: the strategies it can switch between
(rollout policy, final choice, tie break, parallelism, backend) and :class:`MctsConfig`.

Defaults are the paper artifact's (``reference/paper-artifact.md`` §1) except the final choice
(best seen, not best mean value); the search itself and its rejected alternatives are described
in :mod:`tensor_eqsat.search.mcts`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from tensor_eqsat.errors import parse_enum


class RolloutPolicy(Enum):
    """How rollouts choose actions."""

    RANDOM = "random"
    """Uniform over all actions, pruned ones included (the paper's experiments)."""
    PRUNING = "pruning"
    """Uniform over the actions not pruned at the expanded child (all actions if none is left)."""


class TieBreak(Enum):
    """Which of the root children tied on the final choice's score is applied."""

    LOWEST_ACTION = "lowest-action"
    """The lowest action (the artifact: a strict ``>`` over actions in order)."""
    LEAST_APPLIED = "least-applied"
    """The action applied least often so far in this run, then the lowest."""


class Parallelism(Enum):
    """How ``workers`` > 1 share a planning step (see :mod:`tensor_eqsat.search.parallel`)."""

    ROOT = "root"
    """Root parallelism: each worker grows its own tree from the step's state with a share of
    the budget, and the root statistics are summed; one task per worker per step."""
    TREE = "tree"
    """Tree parallelism with WU-UCT's unobserved visits: one tree, each simulation's expansion
    and rollout a task of its own (pays only when a simulation is long, e.g. ILP rewards)."""


class Backend(Enum):
    """Where worker tasks run when ``workers`` > 1."""

    PROCESS = "process"
    """A pool of ``workers`` processes on this machine."""
    RAY = "ray"
    """Ray tasks on a local Ray instance or a cluster (the optional ``ray`` extra)."""


class FinalChoice(Enum):
    """How the action applied to the real environment is chosen among the root's children."""

    MEAN_VALUE = "mean-value"
    """Best mean value, ties by ``tie_break`` (the paper)."""
    MOST_VISITED = "most-visited"
    """Most visits, ties by ``tie_break``."""
    BEST_SEEN = "best-seen"
    """The child through which a simulation reached the lowest main cost (undiscounted: the
    run's objective is the final cost), ties by mean value, then by ``tie_break``."""


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


@dataclass(frozen=True)
class MctsConfig:
    """Settings of the search. Defaults are the paper artifact's, except ``final_choice``.

    budget: simulations (selection, expansion, rollout, backpropagation) per real step, a count,
        not a time; if every root child expanded within the budget changed nothing, planning
        goes on until one did (or the root is saturated). Default 128.
    max_rollout_depth: rollout steps after the first (the artifact's ``max_sim_step``); a
        rollout takes at most ``max_rollout_depth + 1`` steps (its counter is checked after
        stepping). Default 10, i.e. up to 11 steps.
    gamma: discount of rewards in rollouts and backpropagation. Default 0.99.
    exploration: c in UCT = mean + c·sqrt(ln N / n). Default 2·sqrt(2) (the artifact's
        ``Q/n + 2·sqrt(2 ln N / n)``).
    expand_probability: probability that selection stops to expand at a non-root node with
        untried actions. Default 0.5.
    rollout: how rollouts choose rules (:class:`RolloutPolicy`). Default RANDOM.
    prune_actions: ask the environment for pruned actions at each new node. Default True.
    final_choice: the rule each real step applies (:class:`FinalChoice`). Default BEST_SEEN;
        MEAN_VALUE is the paper's (its discounted mean over random rollouts can prefer a big gain
        now to the same gain after a small one, and a terminal child's exact value to children
        whose rollouts rarely find it).
    tie_break: :class:`TieBreak` (or its name) among root children tied on the final choice's
        score. Default LOWEST_ACTION (the artifact).
    subtree_reuse: keep the chosen child's subtree as the next root; its visits count against
        the next step's budget. Default False (the paper's runs).
    clip_rewards: reward = max(cost before − cost after, 0) (the paper, which clipped because its
        measured costs were noisy). False keeps negative rewards, so steps that make the main
        extractor's cost worse are penalised (with a deterministic cost model). Default True.
    terminal_saturated_nodes: a node whose actions are all pruned or saturated ends the
        simulation like a terminal state, instead of ending the whole planning step (the
        artifact). Default False.
    max_steps: real steps at most. Default 200.
    cost_threshold: stop once the cost falls below this; the artifact used 0.1 ms as a guard
        against failed extractions. Default None (off).
    stall_steps: stop once this many real steps in a row did not lower the best cost by more
        than a millionth (:data:`~tensor_eqsat.search.mcts.STEP_MIN_GAIN`): the search has
        converged for a caller who pays for every second of it. Default None (off: the paper
        stops at the node limit, the step limit or saturation; the PyTorch backend sets 8).
    time_limit: wall seconds for the whole run; planning stops early when it is reached and the
        run stops after that step. Default None (off).
    plan_time_limit: wall seconds per planning step (at least one simulation runs).
        Default None (off).
    workers: workers planning at once (see :meth:`Mcts.run`). Default 1 (sequential, the
        paper's runs; no worker is started). A pool starts :attr:`pool_workers` =
        min(workers, budget) processes (a step never runs more than ``budget`` simulations at
        once); the run still depends on ``workers``, as it always did.
    parallel: how workers share a step (:class:`Parallelism`). Default ROOT (one task per worker
        per step). ``subtree_reuse`` needs TREE when ``workers`` > 1.
    backend: where the workers run (:class:`Backend`). Default PROCESS; RAY needs ``workers`` > 1.
    address: the Ray cluster to join (``ray.init(address=...)``: ``auto``, ``ray://HOST:10001``);
        None starts a local Ray instance. Default None; only with ``backend`` RAY.
    """

    budget: int = 128
    max_rollout_depth: int = 10
    gamma: float = 0.99
    exploration: float = 2.0 * math.sqrt(2.0)
    expand_probability: float = 0.5
    rollout: RolloutPolicy = RolloutPolicy.RANDOM
    prune_actions: bool = True
    final_choice: FinalChoice = FinalChoice.BEST_SEEN
    tie_break: TieBreak = TieBreak.LOWEST_ACTION
    subtree_reuse: bool = False
    clip_rewards: bool = True
    terminal_saturated_nodes: bool = False
    max_steps: int = 200
    cost_threshold: float | None = None
    stall_steps: int | None = None
    time_limit: float | None = None
    plan_time_limit: float | None = None
    workers: int = 1
    parallel: Parallelism = Parallelism.ROOT
    backend: Backend = Backend.PROCESS
    address: str | None = None

    def __post_init__(self) -> None:
        checks = [
            ("budget", self.budget >= 1, "at least 1"),
            ("max_rollout_depth", self.max_rollout_depth >= 0, "at least 0"),
            ("gamma", 0.0 <= self.gamma <= 1.0, "in [0, 1]"),
            ("exploration", self.exploration >= 0.0, "at least 0"),
            ("expand_probability", 0.0 <= self.expand_probability <= 1.0, "in [0, 1]"),
            ("max_steps", self.max_steps >= 1, "at least 1"),
            ("stall_steps", self.stall_steps is None or _positive_int(self.stall_steps), "positive or None"),
            ("time_limit", self.time_limit is None or self.time_limit > 0, "positive"),
            ("plan_time_limit", self.plan_time_limit is None or self.plan_time_limit > 0, "positive"),
            ("workers", self.workers >= 1, "at least 1"),
        ]
        for name, ok, want in checks:
            if not ok:
                raise ValueError(f"MctsConfig.{name} must be {want}, got {getattr(self, name)!r}")
        if not isinstance(self.rollout, RolloutPolicy):
            raise ValueError(f"MctsConfig.rollout must be a RolloutPolicy, got {self.rollout!r}")
        kinds: tuple[tuple[str, type[Enum]], ...] = (
            ("final_choice", FinalChoice),
            ("tie_break", TieBreak),
            ("parallel", Parallelism),
            ("backend", Backend),
        )
        for name, kind in kinds:
            # by name too (``optimize(g, workers=2, backend="ray")``); frozen, hence __setattr__
            object.__setattr__(self, name, parse_enum(kind, getattr(self, name), f"MctsConfig.{name}"))
        if self.backend is Backend.RAY and self.workers == 1:
            raise ValueError("MctsConfig.backend 'ray' runs workers: MctsConfig.workers must be 2 or more")
        if self.address is not None and self.backend is not Backend.RAY:
            raise ValueError("MctsConfig.address is a Ray cluster to join: it needs MctsConfig.backend 'ray'")
        if self.subtree_reuse and self.workers > 1 and self.parallel is Parallelism.ROOT:
            raise ValueError(
                "MctsConfig.subtree_reuse keeps one tree across steps: with MctsConfig.workers > 1 it "
                "needs MctsConfig.parallel 'tree' (root parallelism grows new trees every step)"
            )

    @property
    def pool_workers(self) -> int:
        """Worker processes a pool needs: ``min(workers, budget)``. Root parallelism gives the
        workers past ``budget`` an empty share, and tree parallelism never has more than
        ``budget`` simulations in flight, so more processes would only sit idle.

        >>> MctsConfig(workers=200, budget=4).pool_workers
        4
        """
        return min(self.workers, self.budget)
