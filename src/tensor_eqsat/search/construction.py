"""Construction: how an e-graph grows before the final extraction, as a small extension point.

A :class:`Construction` takes the initial e-graph and the rule set as actions, grows the e-graph
in place, and returns a :class:`ConstructionReport`: why it stopped, one :class:`StepLog` per
step, rule counts by rule id, and its own statistics. Two are built in:

* :class:`MctsConstruction`, the paper's: Monte Carlo tree search chooses each next rule,
  rewarded by the main extractor's cost (:mod:`tensor_eqsat.search.mcts` over
  :class:`~tensor_eqsat.search.env.EGraphEnv`);
* :class:`Saturation`, TENSAT's: every rule each iteration, the multi-pattern rules in the first
  ``k_multi`` iterations (:class:`~tensor_eqsat.search.runner.Runner`).

A new strategy is a class with a ``construct`` method of the same signature, passed to
``optimize(graph, search=MyConstruction())``; ``optimize()`` needs no change. Rules are keyed by
rule id in reports (:class:`~tensor_eqsat.search.actions.Actions` keeps the id beside each
rewrite), whatever the strategy keys its own statistics by.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from tensor_eqsat.search.actions import Actions
from tensor_eqsat.search.collector import fewer_collections
from tensor_eqsat.search.env import EGraphEnv
from tensor_eqsat.search.mcts import Mcts, MctsConfig, MctsStep
from tensor_eqsat.search.runner import Runner, RunnerConfig
from tensor_eqsat.search.stop import StopReason

if TYPE_CHECKING:
    from tensor_eqsat.egraph.egraph import EGraph


@dataclass(frozen=True)
class Progress:
    """A progress event for live displays.

    phase: ``"build"``, ``"search"``, ``"extract"`` or ``"done"``; in a schedule of stages
    (``auto``) also ``"stage"`` (a stage starts) and ``"candidate"`` (a stage's candidate is
    extracted; ``best_cost`` is the best so far).
    step: real steps (MCTS) taken so far; simulations / budget: within the current step.
    stage: the stage of a schedule the event belongs to (``auto``'s candidates, as
    ``strategy@node_limit``), None outside one.
    rule: the last rule applied; enodes: the e-graph's size; best_cost: the main extractor's best
    cost so far (None before it is known); elapsed: seconds since whatever emitted the event
    started (a construction, a stage). at: when the event was made, on the ``perf_counter``
    clock: a display shows ``at - deadline.start``, the call's one clock, with no offsets.
    """

    phase: str
    step: int = 0
    simulations: int = 0
    budget: int = 0
    rule: str | None = None
    enodes: int = 0
    best_cost: float | None = None
    elapsed: float = 0.0
    stage: str | None = None
    at: float = field(default_factory=time.perf_counter)


ProgressFn = Callable[[Progress], None]


@dataclass(frozen=True)
class StepLog:
    """One construction step: an MCTS action, or a saturation iteration.

    rule_ids: the rule applied (MCTS), or every rule that changed the e-graph in the iteration.
    rule: the rule's name (MCTS only).
    reward, cost, best_cost: the main extractor's view after the step (MCTS only; None for
        saturation, which does not extract between iterations).
    enodes, classes: the e-graph's size after the step.
    simulations: MCTS simulations spent choosing the step.
    seconds: time of the step (planning included); elapsed: since the construction started.
    """

    index: int
    rule_ids: tuple[int, ...]
    rule: str | None
    reward: float | None
    cost: float | None
    best_cost: float | None
    enodes: int
    classes: int
    simulations: int
    seconds: float
    elapsed: float

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class ConstructionReport:
    """What a construction did.

    stop_reason: why it stopped.
    steps: the per-step log.
    rule_counts: rule id -> times applied (MCTS: steps that applied it; saturation: iterations in
        which it changed the e-graph).
    stats: the strategy's own statistics, JSON-ready (they appear in ``OptimizeResult.stats``).
    """

    stop_reason: StopReason
    steps: tuple[StepLog, ...] = ()
    rule_counts: dict[int, int] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Construction(Protocol):
    """Grows an e-graph with rewrite rules (the extension point of ``optimize()``).

    ``name`` is recorded in the run's settings. ``construct`` mutates ``egraph`` in place and
    must stop by ``deadline`` (a ``time.perf_counter()`` value; None for no limit); every random
    choice flows from ``seed``; ``progress``, if given, receives :class:`Progress` events.
    """

    @property
    def name(self) -> str: ...

    def construct(
        self,
        egraph: EGraph,
        actions: Actions,
        *,
        seed: int,
        deadline: float | None,
        progress: ProgressFn | None,
    ) -> ConstructionReport: ...


def _remaining(deadline: float | None) -> float | None:
    """Seconds left until ``deadline`` (at least a microsecond, as limits must be positive)."""
    return None if deadline is None else max(deadline - time.perf_counter(), 1e-6)


@dataclass(frozen=True)
class MctsConstruction:
    """The paper's construction: MCTS picks each rule, rewarded by the main extractor's cost.

    config: the search settings; its ``time_limit`` is replaced by the time to the deadline.
    main_cost: the main extractor's cost of an e-graph (the reward signal).
    node_limit: the e-graph is full at this many e-nodes; multi-pattern rules may add at most
        this many at once (the artifact's node_multi = n_nodes).
    """

    config: MctsConfig
    main_cost: Callable[[EGraph], float]
    node_limit: int
    name: str = "mcts"

    def construct(
        self,
        egraph: EGraph,
        actions: Actions,
        *,
        seed: int,
        deadline: float | None,
        progress: ProgressFn | None,
    ) -> ConstructionReport:
        t0 = time.perf_counter()
        env = EGraphEnv(
            egraph, actions.rewrites, self.main_cost, node_limit=self.node_limit, node_multi=self.node_limit
        )
        stats: dict[str, Any] = {}
        stats["initial_main_cost"] = env.cost()
        stats["initial_main_extraction_s"] = time.perf_counter() - t0
        last: dict[str, Any] = {"rule": None, "best": stats["initial_main_cost"]}

        def emit(**kw: Any) -> None:
            if progress is not None:
                progress(Progress("search", elapsed=time.perf_counter() - t0, **kw))

        def on_simulation(step: int, done: int, budget: int) -> None:
            emit(
                step=step,
                simulations=done,
                budget=budget,
                rule=last["rule"],
                enodes=env.egraph.num_enodes,
                best_cost=last["best"],
            )

        def on_step(s: MctsStep) -> None:
            last["rule"] = env.action_name(s.action)
            last["best"] = s.best_cost
            emit(step=s.index + 1, rule=last["rule"], enodes=s.info["enodes"], best_cost=s.best_cost)

        cfg = replace(self.config, time_limit=_remaining(deadline))
        with fewer_collections():
            report = Mcts(cfg, seed=seed).run(env, on_step=on_step, on_simulation=on_simulation)
        steps = tuple(
            StepLog(
                index=s.index,
                rule_ids=(actions.ids[s.action],),
                rule=env.action_name(s.action),
                reward=s.reward,
                cost=s.cost,
                best_cost=s.best_cost,
                enodes=int(s.info["enodes"]),
                classes=int(s.info["classes"]),
                simulations=s.plan.simulations,
                seconds=s.plan.seconds + s.step_seconds,
                elapsed=s.elapsed,
            )
            for s in report.steps
        )
        stats["simulations"] = report.simulations
        stats["search"] = env.stats.as_dict()
        if any(s.plan.worker_seconds for s in report.steps):
            # root parallelism: each step's CPU seconds per worker tree (the load balance)
            stats["worker_cpu_s"] = [list(s.plan.worker_seconds) for s in report.steps]
        stats["main_best_cost"] = report.best_cost
        reward_report = getattr(self.main_cost, "report", None)
        if callable(reward_report):
            # e.g. IlpReward's solves by status (those made in this process)
            stats["reward"] = reward_report()
        counts = Counter(actions.ids[a] for a in report.actions)
        return ConstructionReport(report.stop_reason, steps, dict(counts), stats)


@dataclass(frozen=True)
class Saturation:
    """TENSAT's construction: every rule each iteration until a limit or saturation.

    config: the runner's limits; its ``time_limit`` is replaced by the time to the deadline, if
        there is one.
    """

    config: RunnerConfig
    name: str = "saturate"

    def construct(
        self,
        egraph: EGraph,
        actions: Actions,
        *,
        seed: int,
        deadline: float | None,
        progress: ProgressFn | None,
    ) -> ConstructionReport:
        # Saturation makes no random choice, so the seed is unused.
        cfg = self.config
        if deadline is not None:
            cfg = replace(cfg, time_limit=max(deadline - time.perf_counter(), 1e-6))
        report = Runner(actions.single, actions.multi, cfg).run(egraph)
        ids = actions.id_by_name
        counts: Counter[int] = Counter()
        steps = []
        elapsed = 0.0
        for it in report.iterations:
            applied = tuple(sorted(ids[n] for n, k in it.applied.items() if k))
            counts.update(applied)
            elapsed += it.total_time
            steps.append(
                StepLog(
                    index=it.index,
                    rule_ids=applied,
                    rule=None,
                    reward=None,
                    cost=None,
                    best_cost=None,
                    enodes=it.enodes,
                    classes=it.classes,
                    simulations=0,
                    seconds=it.total_time,
                    elapsed=elapsed,
                )
            )
        applications = sorted(report.applied.items(), key=lambda x: ids[x[0]])
        stats = {"runner_s": report.seconds, "applications": {str(ids[n]): k for n, k in applications}}
        return ConstructionReport(report.stop_reason, tuple(steps), dict(counts), stats)
