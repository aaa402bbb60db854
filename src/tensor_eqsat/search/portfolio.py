"""The anytime portfolio (issue 18): the best graph for the time a user gives.

No single construction wins everywhere: larger saturated e-graphs win on some models, MCTS on
others (docs/notebook/settings.md, "The anytime portfolio"). So ``search="auto"`` runs several
constructions one after another within a time budget, extracts each one's e-graph with the final
extractor (an ILP warm-started from the best graph so far, bounded by the time left), and keeps
the cheapest under the run's cost model. Every finished candidate is kept, so the deadline or a
Ctrl-C (KeyboardInterrupt) hands back the best found so far.

The schedule, in order (:data:`~tensor_eqsat.search.schedule.AUTO_SCHEDULE`, the same steps as
data; docs/notebook/ has the measurements behind it):

1. **TENSAT saturation at the first node limit** (the paper's 2,000 e-nodes): fast, and a
   baseline within seconds.
2. **Saturation at growing node limits**, ×``growth`` each (4k, 8k, ...), while the next rung is
   predicted to end within ``ladder_share`` of the time left. Each rung starts from scratch: a
   rung then equals ``--search saturate --node-limit N`` exactly (so every figure reproduces with
   one command), and its multi-pattern rules get the whole budget ``node_multi = N`` in their
   first iterations, as TENSAT gives them, which is where the larger limits gain (continuing a 2k
   e-graph would leave its multi-pattern budget spent at 2k). With growth 2 the rungs before the
   last cost at most as much as the last one, so starting over wastes at most half the ladder's
   time. The ladder ends for good at a rung that saturates (a larger limit would build the same
   e-graph), after ``stall_rungs`` rungs without gain, above ``max_node_limit`` or the memory
   limit, or when a rung was cut short by the deadline.
3. **MCTS at the first limit** (the paper's search; ``mcts_budget`` simulations per step, 16 as
   in the results grid), until it stops or ``mcts_share`` of the time left is spent.
4. **The ladder again**, now until the deadline: a rung predicted not to finish still runs, as a
   rung cut short still grows a larger e-graph and its warm-started extraction cannot be worse
   than the best so far (the time would otherwise go unused). Where another round may follow
   (``rounds_follow``), only rungs predicted to finish run: the time left goes to that round,
   and steps 5-7 run only in a round that has not gained by then.
5. **MCTS continued from the saturated e-graph**, when a rung saturated below its limit: the
   saturation applies multi-pattern rules only in its first ``k_multi`` iterations, MCTS may
   apply them at any step, so it can still grow the saturated e-graph (node limit twice its
   size).
6. **MCTS at a wider limit** (``growth`` times the first), when MCTS stopped at the first limit,
   with the time the ladder and step 5 left (the ladder ends early where saturation stops
   gaining): the paper's limit can stop MCTS one merge short of the next (ViT-Huge: 6.63 % at
   2,000 e-nodes, 13.26 % at 4,000, where saturation still gives 6.63 %).
7. Optionally (``ilp_mcts``), ILP-rewarded MCTS from the best e-graph with the time left.

A strategy that does not fit is recorded as skipped with the reason. The portfolio composes
:class:`~tensor_eqsat.search.construction.Construction` objects rather than being one: a
construction grows one e-graph, the portfolio compares extracted candidates, so it needs the
final extraction, which ``optimize()`` injects as ``finalize``.

Alternatives rejected: running the strategies in parallel processes (the machine this targets
has 2 cores, and ``mcts.workers`` already uses them); a fixed split of the budget (a rung that
saturates in 1 s would leave the rest idle).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from tensor_eqsat.errors import ConfigError
from tensor_eqsat.search.actions import Actions
from tensor_eqsat.search.construction import (
    Construction,
    ConstructionReport,
    MctsConstruction,
    Progress,
    ProgressFn,
    Saturation,
)
from tensor_eqsat.search.mcts import MctsConfig
from tensor_eqsat.search.runner import RunnerConfig
from tensor_eqsat.search.schedule import AUTO_SCHEDULE, Limit, Stage, StageKind, Start, When
from tensor_eqsat.search.stop import StopReason

if TYPE_CHECKING:
    from tensor_eqsat.egraph.egraph import EGraph
    from tensor_eqsat.ir.graph import Graph

log = logging.getLogger(__name__)

ROUND_MIN_GAIN = 1e-6
"""A search round gained something when its best graph costs less than the graph it started
from by more than this fraction (a millionth: what float rounding of a sum of kernel costs can
move, so that a fixpoint is not missed over noise; ``OptimizeConfig.rounds``)."""
DEFERRED = "optional stages"
"""What a round that gained reports as skipped for the optional stages it left to the next
(``Portfolio.rounds_follow``)."""
MIN_STAGE_SECONDS = 0.5
"""A strategy is not started with less time left than this: it could not finish a step."""
MIN_FIRST_STAGE_SECONDS = 0.2
"""The first strategy, while no candidate has finished, starts with this little time left: the
alternative is the original handed back unsearched, and a saturation cut short still extracts a
candidate (a 2 s budget left SqueezeNet 0.3 to 0.5 s here after start-up and the check's share;
its first rung reached 2,000 e-nodes in 0.2 s)."""


@dataclass(frozen=True)
class PortfolioConfig:
    """Settings of the ``auto`` search.

    growth: each saturation rung's node limit is the previous one's times this. Default 2.
    max_node_limit: the largest saturation rung. Default None: as large as time and the memory
        limit allow.
    mcts_budget: MCTS simulations per step. Default 16 (the results grid's budget: the paper's
        128 takes longer than a minute on some zoo models alone).
    ladder_share: before MCTS, a saturation rung starts only if it is predicted to end within this
        fraction of the time left; after MCTS, rungs run until the deadline. Default 0.5.
    mcts_share: MCTS (step 3) may use this fraction of the time left when it starts. Default 0.5.
    extraction_reserve: a construction stops this fraction of the time left before the deadline,
        so its extraction still fits. Default 0.2.
    stall_rungs: the ladder stops after this many rungs in a row that did not lower the best
        saturation cost (ResNeXt-50 gains nothing from 2k to 32k e-nodes). Default 2.
    continue_mcts: run step 5 (MCTS continued from a saturated e-graph). Default True.
    wide_mcts: run step 6 (MCTS at ``growth`` times the first limit, when MCTS stopped at the
        first limit). Default True.
    ilp_mcts: run step 7 (ILP-rewarded MCTS from the best e-graph, with the time left). Default
        False: it gains little, and one ILP-rewarded simulation (a rollout of up to 11 solves)
        cannot be cut short at the deadline (docs/notebook/settings.md, "ILP-rewarded MCTS").
    finalists: how many distinct candidates, cheapest first, the never-slower guard may measure.
        Default 3.
    stall_candidates: end the schedule once this many candidates in a row did not lower the
        best cost, the cost of the graph the run started from (``Portfolio.start_cost``) counting
        as the first best (the search has converged: its time is not spent on stages that find
        nothing new; the PyTorch backend sets 2, issue 42 item 5). Default None: every stage runs while
        time is left.
    stall_tolerance: for ``stall_candidates``, a candidate gained something only where it costs
        less than the best before it by more than this fraction of that best; smaller steps add
        up against the same best until one exceeds it (a search creeping by hundredths of a
        percent has converged for a user; the PyTorch backend sets 0.001). Default 0.0: any gain
        beyond float rounding.
    schedule: the stages, in order (:mod:`tensor_eqsat.search.schedule`). Default
        :data:`~tensor_eqsat.search.schedule.AUTO_SCHEDULE`, the steps above.
    """

    growth: int = 2
    max_node_limit: int | None = None
    mcts_budget: int = 16
    mcts_share: float = 0.5
    ladder_share: float = 0.5
    extraction_reserve: float = 0.2
    stall_rungs: int = 2
    wide_mcts: bool = True
    continue_mcts: bool = True
    ilp_mcts: bool = False
    finalists: int = 3
    stall_candidates: int | None = None
    stall_tolerance: float = 0.0
    schedule: tuple[Stage, ...] = AUTO_SCHEDULE

    def __post_init__(self) -> None:
        if not isinstance(self.growth, int) or self.growth < 2:
            raise ConfigError(f"PortfolioConfig.growth must be an integer >= 2, got {self.growth!r}")
        if self.max_node_limit is not None and self.max_node_limit < 1:
            raise ConfigError(f"PortfolioConfig.max_node_limit must be positive, got {self.max_node_limit}")
        if self.mcts_budget < 1:
            raise ConfigError(f"PortfolioConfig.mcts_budget must be positive, got {self.mcts_budget}")
        for name in ("mcts_share", "ladder_share", "extraction_reserve"):
            value = getattr(self, name)
            if not 0.0 < value < 1.0:
                raise ConfigError(f"PortfolioConfig.{name} must be in (0, 1), got {value}")
        if self.stall_rungs < 1:
            raise ConfigError(f"PortfolioConfig.stall_rungs must be positive, got {self.stall_rungs}")
        if self.finalists < 1:
            raise ConfigError(f"PortfolioConfig.finalists must be positive, got {self.finalists}")
        if self.stall_candidates is not None and (
            not isinstance(self.stall_candidates, int) or self.stall_candidates < 1
        ):
            raise ConfigError(
                "PortfolioConfig.stall_candidates must be a positive integer or None, "
                f"got {self.stall_candidates!r}"
            )
        if not 0.0 <= self.stall_tolerance < 1.0:
            raise ConfigError(
                f"PortfolioConfig.stall_tolerance must be in [0, 1), got {self.stall_tolerance!r}"
            )
        if not self.schedule:
            raise ConfigError("PortfolioConfig.schedule must have at least one stage")
        for stage in self.schedule:
            if isinstance(stage.share, str) and stage.share != "rest" and stage.share not in _SHARES:
                raise ConfigError(f"stage {stage.name}: share {stage.share!r} names no share setting")
            if stage.enabled_by is not None and stage.enabled_by not in _SWITCHES:
                raise ConfigError(f"stage {stage.name}: enabled_by {stage.enabled_by!r} names no switch")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready settings (the schedule as one line per stage)."""
        out = dict(self.__dict__)
        out["schedule"] = [stage.describe() for stage in self.schedule]
        return out


_SHARES = ("ladder_share", "mcts_share")
_SWITCHES = ("continue_mcts", "wide_mcts", "ilp_mcts")


@dataclass(frozen=True)
class Extraction:
    """A finished final extraction: the graph, its cost under the run's cost model (ms), the
    extractor's statistics (JSON-ready; ``"interrupted": True`` when the solver caught a Ctrl-C
    and returned early, which ends the portfolio after this candidate) and its seconds."""

    graph: Graph
    cost_ms: float
    stats: dict[str, Any]
    seconds: float


Finalize = Callable[["EGraph", "float | None", "Graph | None"], Extraction]
"""``finalize(egraph, deadline, hint)``: the final extraction of ``egraph``, bounded by
``deadline`` (a ``time.perf_counter()`` value), warm-started from ``hint`` (the best graph so
far) where its nodes are in the e-graph."""


@dataclass(frozen=True)
class Candidate:
    """One strategy's result.

    strategy: ``saturate``, ``mcts`` or ``mcts-continued``; settings: its node limit and the
    rest; stop_reason: why its construction stopped; enodes, classes: the e-graph's size;
    construction_s, extraction_s: seconds of each; cost_ms: the extracted graph's cost;
    extraction: the final extractor's statistics; report: the construction's report;
    graph: the extracted graph; round: the search round it belongs to (1 for the first;
    :func:`combine_rounds`).
    """

    index: int
    strategy: str
    settings: dict[str, Any]
    stop_reason: StopReason
    enodes: int
    classes: int
    construction_s: float
    extraction_s: float
    cost_ms: float
    extraction: dict[str, Any]
    report: ConstructionReport = field(repr=False)
    graph: Graph = field(repr=False)
    round: int = 1

    @property
    def label(self) -> str:
        """``strategy@node_limit``, e.g. ``saturate@4000``; from the second round on, the round
        follows (``saturate@4000 (round 2)``)."""
        label = f"{self.strategy}@{self.settings['node_limit']}"
        return label if self.round == 1 else f"{label} (round {self.round})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "round": self.round,
            "strategy": self.strategy,
            "settings": dict(self.settings),
            "cost_ms": self.cost_ms,
            "stop_reason": self.stop_reason.value,
            "enodes": self.enodes,
            "classes": self.classes,
            "construction_s": self.construction_s,
            "extraction_s": self.extraction_s,
            "seconds": self.construction_s + self.extraction_s,
            "final_extraction": dict(self.extraction),
        }


@dataclass(frozen=True)
class PortfolioReport:
    """What the portfolio did.

    candidates: every finished candidate, in the order run; winner: the index of the cheapest
    (None when none finished); stop: ``done`` (every strategy ran or was skipped), ``time
    limit`` or ``interrupted``; skipped: (strategy, reason) for strategies not run; seconds:
    the portfolio's wall time.
    """

    candidates: tuple[Candidate, ...]
    winner: int | None
    stop: StopReason
    skipped: tuple[tuple[str, str], ...]
    seconds: float
    best_egraph: EGraph | None = field(default=None, repr=False)

    @property
    def best(self) -> Candidate | None:
        return None if self.winner is None else self.candidates[self.winner]

    def finalists(self, n: int) -> list[Candidate]:
        """Up to ``n`` candidates, cheapest first, one per distinct cost (ties keep the earliest)."""
        seen: set[float] = set()
        out = []
        for c in sorted(self.candidates, key=lambda c: (c.cost_ms, c.index)):
            if c.cost_ms in seen:
                continue
            seen.add(c.cost_ms)
            out.append(c)
            if len(out) == n:
                break
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "stop": self.stop.value,
            "winner": self.winner,
            "seconds": self.seconds,
            "candidates": [c.to_dict() for c in self.candidates],
            "skipped": [{"strategy": s, "reason": r} for s, r in self.skipped],
        }


class _OutOfTime(Exception):
    """The deadline passed: the schedule ends with the candidates it has."""


def stalled_candidates(
    candidates: Sequence[Candidate], start_cost: float | None = None, before: int = 0, tolerance: float = 0.0
) -> int:
    """How many of the last ``candidates`` in a row did not lower the best cost before them by
    more than ``tolerance`` of it (``PortfolioConfig.stall_tolerance``; at least float
    rounding), the cost of the graph the run started from (``start_cost``, when given) counting
    as the first best, and ``before`` more in a row before the first candidate (a previous
    round's last ones, when this run continues from its best graph): a later round whose first
    candidates do not beat the graph it began with has converged as surely as one whose later
    candidates do not beat its first. A step within the tolerance leaves the best where it was,
    so that steps too small to count add up against it."""
    best, stalled = (float("inf") if start_cost is None else start_cost), before
    for c in candidates:
        if c.cost_ms < best * (1.0 - max(tolerance, 1e-9)):
            best, stalled = c.cost_ms, 0
        else:
            stalled += 1
    return stalled


class _Converged(Exception):
    """``stall_candidates`` candidates in a row gained nothing: the schedule ends early."""


@dataclass
class Portfolio:
    """The ``auto`` search: several constructions within a deadline, the cheapest extraction wins.

    config: :class:`PortfolioConfig`.
    runner: saturation limits (``node_limit``, ``node_multi`` are set per rung; ``k_multi`` is
        the model's).
    mcts: MCTS settings (``budget`` is replaced by ``config.mcts_budget``).
    main_cost: the MCTS reward (the main extractor's cost of an e-graph).
    node_limit: the first rung's node limit and MCTS's (the paper's 2,000).
    node_cap: no e-graph grows beyond this many e-nodes (from the memory limit). Default None.
    rounds_follow: another round may follow this run (``OptimizeConfig.rounds``), which then
        ends early where it gained: the ladder after MCTS starts a rung only if it is predicted
        to finish, and the optional stages (those with ``enabled_by``: MCTS continued, MCTS at a
        wider limit, ILP-rewarded MCTS) are skipped once a candidate beats ``start_cost``, as
        the time is better spent on a new round from the best graph (NASNet-A: one round ran to
        its deadline, 15 s of it MCTS continued on a 13,000-e-node e-graph for no gain, and a
        second run on its result gained 4 to 6 points, 2.3 of them in its first 0.6 s). A round
        that gains nothing before them still runs them, so a fixpoint is one of the whole
        schedule. Default False.
    start_cost: the cost of the graph this run starts from: with ``rounds_follow``, the cost a
        candidate must beat for the optional stages to be skipped; with ``stall_candidates``, the
        best cost before the first candidate (a candidate that does not beat it gained nothing).
        Default None: no stage is skipped for a gain, and the first candidate sets the best.
    stalled: candidates in a row that gained nothing before this run (the last ones of the round
        this one continues from), counted towards ``stall_candidates``. Default 0.
    """

    config: PortfolioConfig
    runner: RunnerConfig
    mcts: MctsConfig
    main_cost: Callable[[EGraph], float]
    node_limit: int
    node_cap: int | None = None
    ilp_cost: Callable[[EGraph], float] | None = None
    rounds_follow: bool = False
    start_cost: float | None = None
    stalled: int = 0
    _candidates: list[Candidate] = field(default_factory=list, init=False, repr=False)
    _skipped: list[tuple[str, str]] = field(default_factory=list, init=False, repr=False)
    _best_egraph: Any = field(default=None, init=False, repr=False)

    def run(
        self,
        source: EGraph,
        actions: Actions,
        finalize: Finalize,
        *,
        seed: int,
        deadline: float | None,
        progress: ProgressFn | None = None,
        hint: Graph | None = None,
    ) -> PortfolioReport:
        """Run the schedule (module docstring) on copies of ``source`` until it ends, the
        ``deadline`` passes, or KeyboardInterrupt; return every finished candidate. ``hint``:
        the graph the first candidate's extraction starts from (a later round's input graph, so
        that an extraction cut short is no worse than it); later ones start from the best so
        far. Default None."""
        t0 = time.perf_counter()
        self._candidates, self._skipped, self._best_egraph = [], [], None
        stop = StopReason.DONE
        try:
            self._schedule(source, actions, finalize, seed, deadline, progress, t0, hint)
        except _OutOfTime:
            stop = StopReason.TIME_LIMIT
        except _Converged:
            stop = StopReason.DONE
            n = self.config.stall_candidates
            self._skipped.append(
                ("the rest of the schedule", f"converged: {n} candidate(s) in a row without gain")
            )
        except KeyboardInterrupt:
            stop = StopReason.INTERRUPTED
            log.warning("interrupted: returning the best of %d candidate(s)", len(self._candidates))
        cands = tuple(self._candidates)
        winner = min(cands, key=lambda c: (c.cost_ms, c.index)).index if cands else None
        seconds = time.perf_counter() - t0
        return PortfolioReport(cands, winner, stop, tuple(self._skipped), seconds, self._best_egraph)

    # --------------------------------------------------------------------------------------------
    def _schedule(
        self,
        source: EGraph,
        actions: Actions,
        finalize: Finalize,
        seed: int,
        deadline: float | None,
        progress: ProgressFn | None,
        t0: float,
        hint: Graph | None = None,
    ) -> None:
        """Run ``config.schedule`` (:mod:`tensor_eqsat.search.schedule`) stage by stage."""
        cfg = self.config
        first = self._cap(self.node_limit)
        run = _Stage(self, source, actions, finalize, seed, deadline, progress, t0, hint)
        ladder: _Ladder | None = None
        first_mcts: list[Candidate | None] = []  # the first MCTS stage's candidate, once it ran
        deferred = False  # optional stages left to a later round (``rounds_follow``)
        for stage in cfg.schedule:
            if stage.enabled_by is not None and not getattr(cfg, stage.enabled_by):
                continue
            if stage.enabled_by is not None and self._gained():
                if not deferred:  # (one line for them all)
                    self._skipped.append(
                        (DEFERRED, "the round gained: the next round starts from its best graph")
                    )
                deferred = True
                continue
            share = self._share(stage.share)
            if stage.kind is StageKind.SATURATE:
                limit = self._limit(stage.limit, first, source.num_enodes)
                rung = run.saturate(limit, share=share)
                ladder = ladder or _Ladder(limit, rung)
                continue
            if stage.kind is StageKind.LADDER:
                ladder = ladder or _Ladder(first, run.saturate(first))
                self._climb(run, ladder, share)
                continue
            start = self._start(stage, run, source, first_mcts)
            if start is None:
                continue
            limit = self._limit(stage.limit, first, start.num_enodes)
            if stage.limit is Limit.WIDE and limit <= first:
                continue  # the memory limit leaves no wider limit
            if stage.kind is StageKind.MCTS:
                cost = self.ilp_cost if stage.cost == "ilp" else None
                cand = run.mcts(stage.name, start, limit, share=share, cost=cost)
                if not first_mcts:
                    first_mcts.append(cand)
            else:
                run.construct(stage.name, stage.construction, start, limit, share=share)

    def _gained(self) -> bool:
        """Whether another round follows and a candidate beat ``start_cost`` (by more than a
        millionth, the rounds' own measure of a gain)."""
        if not self.rounds_follow or self.start_cost is None or not self._candidates:
            return False
        return min(c.cost_ms for c in self._candidates) < self.start_cost * (1 - ROUND_MIN_GAIN)

    def _start(
        self, stage: Stage, run: _Stage, source: EGraph, first_mcts: list[Candidate | None]
    ) -> EGraph | None:
        """The e-graph ``stage`` starts from, or None when its condition fails (recorded as
        skipped where the reason is worth telling)."""
        if stage.when is When.A_RUNG_SATURATED and run.saturated_egraph is None:
            self._skipped.append((stage.name, "no saturation rung saturated"))
            return None
        if stage.when is When.MCTS_AT_NODE_LIMIT and not (
            first_mcts and first_mcts[0] is not None and first_mcts[0].stop_reason is StopReason.NODE_LIMIT
        ):
            return None
        if stage.when is When.HAS_CANDIDATE and self._best_egraph is None:
            return None
        if stage.cost == "ilp" and self.ilp_cost is None:
            return None
        if stage.start is Start.SATURATED:
            return run.saturated_egraph
        if stage.start is Start.BEST:
            return self._best_egraph
        return source

    def _limit(self, limit: Limit, first: int, start_enodes: int) -> int:
        if limit is Limit.WIDE:
            return self._cap(self.config.growth * first)
        if limit is Limit.GROWN:
            return self._cap(max(2 * start_enodes, first))
        return first

    def _share(self, share: float | str) -> float:
        if share == "rest":
            return 1.0 - self.config.extraction_reserve
        return float(getattr(self.config, share) if isinstance(share, str) else share)

    def _climb(self, run: _Stage, ladder: _Ladder, share: float) -> None:
        """Saturate at growing node limits while the next rung is predicted to end within
        ``share`` of the time left; ``ladder.done`` once it ends for good (saturated, memory,
        ``max_node_limit``, no gain, or a rung cut short by the deadline)."""
        cfg = self.config
        while not ladder.done:
            last, nxt = ladder.last, ladder.limit * cfg.growth
            label = f"saturate@{nxt}"
            why = None
            if last.stop_reason is StopReason.SATURATED:
                ladder.done = True  # a larger limit would build the same e-graph
                break
            if cfg.max_node_limit is not None and nxt > cfg.max_node_limit:
                why = f"above max_node_limit {cfg.max_node_limit}"
            elif self.node_cap is not None and nxt > self.node_cap:
                why = f"above the memory limit ({self.node_cap} e-nodes)"
            elif run.stalled(cfg.stall_rungs):
                why = f"no gain in the last {cfg.stall_rungs} rungs"
            if why is not None:
                self._skipped.append((label, why))
                ladder.done = True
                break
            if last.stop_reason is StopReason.TIME_LIMIT:
                ladder.done = True  # the previous rung was cut short: a larger one cannot finish
                break
            # The next rung's time: the ratio the last two rungs showed (bounded to [1.5, 4]: one
            # noisy rung must not stop or unleash the ladder), growth^1.3 before there are two.
            # With all the time left (share 1), the rung runs even if predicted not to finish: a
            # rung cut short still grows a larger e-graph, and its extraction, warm-started from
            # the best graph so far, cannot be worse; the time would otherwise go unused.
            predicted = (last.construction_s + last.extraction_s) * run.growth_ratio(cfg.growth**1.3)
            left = run.left()
            if self.rounds_follow and share >= 1.0:
                share = 1.0 - cfg.extraction_reserve  # a rung that finishes, or the next round
            if share < 1.0 and left is not None and predicted > left * share:
                break
            ladder.limit, ladder.last = nxt, run.saturate(nxt)

    def _cap(self, n: int) -> int:
        return n if self.node_cap is None else max(1, min(n, self.node_cap))


@dataclass
class _Ladder:
    """Where the saturation ladder stands: its last rung's limit and candidate, and whether it
    has ended for good."""

    limit: int
    last: Candidate
    done: bool = False


@dataclass
class _Stage:
    """Runs one strategy and records its candidate (the portfolio's inner loop)."""

    portfolio: Portfolio
    source: EGraph
    actions: Actions
    finalize: Finalize
    seed: int
    deadline: float | None
    progress: ProgressFn | None
    t0: float
    hint: Any = None
    saturated_egraph: Any = None
    _rung_times: list[tuple[int, float]] = field(default_factory=list)

    def left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.perf_counter()

    def stalled(self, rungs: int) -> bool:
        """Whether the last ``rungs`` saturation rungs all failed to beat the rungs before them."""
        costs = [c.cost_ms for c in self.portfolio._candidates if c.strategy == "saturate"]
        if len(costs) <= rungs:
            return False
        return min(costs[-rungs:]) >= min(costs[:-rungs]) * (1 - 1e-9)

    def growth_ratio(self, default: float) -> float:
        """How much longer the last saturation rung took than the one before, within [1.5, 4]
        (``default`` before two rungs ran)."""
        if len(self._rung_times) < 2:
            return default
        (_, a), (_, b) = self._rung_times[-2:]
        return min(max(b / a if a > 0 else default, 1.5), 4.0)

    def saturate(self, node_limit: int, *, share: float | None = None) -> Candidate:
        p = self.portfolio
        runner = replace(p.runner, node_limit=node_limit, node_multi=node_limit)
        settings = {"node_limit": node_limit, "k_multi": runner.k_multi}
        egraph = self.source.copy()
        share = 1.0 - p.config.extraction_reserve if share is None else share
        cand = self._run("saturate", Saturation(runner), egraph, settings, share=share)
        self._rung_times.append((node_limit, cand.construction_s + cand.extraction_s))
        if cand.stop_reason is StopReason.SATURATED:
            self.saturated_egraph = egraph
        return cand

    def mcts(
        self, strategy: str, start: EGraph, node_limit: int, *, share: float, cost: Any = None
    ) -> Candidate | None:
        p = self.portfolio
        cfg = replace(p.mcts, budget=p.config.mcts_budget)
        if start.num_enodes >= node_limit:
            p._skipped.append((f"{strategy}@{node_limit}", "the e-graph is already at the node limit"))
            return None
        settings = {
            "node_limit": node_limit,
            "budget": cfg.budget,
            "max_rollout_depth": cfg.max_rollout_depth,
        }
        if strategy != "mcts":
            settings["from_enodes"] = start.num_enodes
        construction = MctsConstruction(cfg, p.main_cost if cost is None else cost, node_limit)
        return self._run(strategy, construction, start.copy(), settings, share=share)

    def construct(
        self, strategy: str, construction: Construction, start: EGraph, node_limit: int, *, share: float
    ) -> Candidate:
        """A user's construction as a stage: it grows a copy of ``start``."""
        return self._run(strategy, construction, start.copy(), {"node_limit": node_limit}, share=share)

    def _run(
        self,
        strategy: str,
        construction: Construction,
        egraph: EGraph,
        settings: dict[str, Any],
        *,
        share: float,
    ) -> Candidate:
        p = self.portfolio
        label = f"{strategy}@{settings['node_limit']}"
        left = self.left()
        least = MIN_STAGE_SECONDS if p._candidates else MIN_FIRST_STAGE_SECONDS
        if left is not None and left < least:
            p._skipped.append((label, f"{max(left, 0.0):.1f} s left"))
            raise _OutOfTime
        ts = time.perf_counter()
        # The construction stops early enough for its extraction: the larger of the share's
        # reserve and 1.5x the slowest extraction so far (a larger e-graph extracts slower; the
        # last candidate may have been a small MCTS e-graph), but never more than half the time
        # left (an ILP cut at its cap says little about the next).
        slowest = max((c.extraction_s for c in p._candidates), default=0.0)
        reserve = 0.0 if left is None else max(left * (1.0 - share), min(1.5 * slowest, left / 2))
        stop_at = None if left is None else ts + left - reserve
        self._emit(label, egraph.num_enodes)
        offset = self._labelled(label)
        report = construction.construct(
            egraph, self.actions, seed=self.seed, deadline=stop_at, progress=offset
        )
        construction_s = time.perf_counter() - ts
        best = min(p._candidates, key=lambda c: (c.cost_ms, c.index)) if p._candidates else None
        ext = self.finalize(egraph, self.deadline, best.graph if best is not None else self.hint)
        cand = Candidate(
            len(p._candidates), strategy, settings, report.stop_reason, egraph.num_enodes, egraph.num_classes,
            construction_s, ext.seconds, ext.cost_ms, ext.stats, report, ext.graph,
        )  # fmt: skip
        if best is None or cand.cost_ms < best.cost_ms:
            p._best_egraph = egraph  # kept for extra extractions (guard candidates)
        p._candidates.append(cand)
        log.info("%s: %.4f ms (%s, %.1f s + %.1f s)", label, cand.cost_ms, report.stop_reason.value,
                 construction_s, ext.seconds)  # fmt: skip
        best_cost = min(c.cost_ms for c in p._candidates)
        self._emit(label, egraph.num_enodes, best_cost)
        if ext.stats.get("interrupted"):
            raise KeyboardInterrupt  # the solver caught the user's Ctrl-C: the run ends here
        if self.deadline is not None and time.perf_counter() >= self.deadline:
            raise _OutOfTime
        stall = p.config.stall_candidates
        tol = p.config.stall_tolerance
        if stall is not None and stalled_candidates(p._candidates, p.start_cost, p.stalled, tol) >= stall:
            raise _Converged
        return cand

    def _emit(self, label: str, enodes: int, best: float | None = None) -> None:
        if self.progress is not None:
            elapsed = time.perf_counter() - self.t0
            phase = "stage" if best is None else "candidate"
            self.progress(Progress(phase, stage=label, enodes=enodes, best_cost=best, elapsed=elapsed))

    def _labelled(self, label: str) -> ProgressFn | None:
        progress = self.progress
        if progress is None:
            return None
        # Events of the construction inside, labelled with the stage they belong to.
        return lambda ev: progress(replace(ev, stage=label))


def combine_rounds(reports: list[PortfolioReport]) -> PortfolioReport:
    """One report for several rounds of the portfolio (``OptimizeConfig.rounds``): every round's
    candidates, numbered on in the order run and marked with their round (1 for the first); the
    winner the cheapest of them all (ties keep the earliest); the last round's stop; every
    round's skipped strategies (a later round's named with its round); the rounds' seconds
    summed; the e-graph of the winner's round. Every candidate is a whole graph priced by the
    same cost model, so they compare across rounds.
    """
    if len(reports) == 1:
        return reports[0]
    cands: list[Candidate] = []
    skipped: list[tuple[str, str]] = []
    egraphs: list[Any] = []
    for n, report in enumerate(reports, start=1):
        for c in report.candidates:
            cands.append(replace(c, index=len(cands), round=n))
            egraphs.append(report.best_egraph)
        skipped += [(s if n == 1 else f"{s} (round {n})", why) for s, why in report.skipped]
    winner = min(cands, key=lambda c: (c.cost_ms, c.index)).index if cands else None
    best_egraph = egraphs[winner] if winner is not None else reports[-1].best_egraph
    seconds = sum(r.seconds for r in reports)
    return PortfolioReport(tuple(cands), winner, reports[-1].stop, tuple(skipped), seconds, best_egraph)


def node_cap_for(memory_limit: int | None, bytes_per_enode: float) -> int | None:
    """E-nodes that fit in ``memory_limit`` bytes at ``bytes_per_enode`` each (None: no limit).

    >>> node_cap_for(2 * 1024**3, 20_000.0)
    107374
    """
    if memory_limit is None:
        return None
    return max(1, math.floor(memory_limit / bytes_per_enode))
