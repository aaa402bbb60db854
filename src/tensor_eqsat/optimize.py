"""``optimize()``: a tensor graph in, a faster equivalent graph out, with an honest account.

The pipeline (DESIGN.md): the graph becomes an e-graph; a *construction* grows it with rewrite
rules under a node limit, either as the paper does (MCTS chooses each next rule, rewarded by the
*main* extractor's cost) or as TENSAT does (saturation; both in
:mod:`tensor_eqsat.search.construction`, or any :class:`~tensor_eqsat.search.construction.Construction`);
then the *final* extractor picks the cheapest graph from the e-graph. Both graphs are priced by
the same cost model (:meth:`~tensor_eqsat.cost.model.CostModel.graph_cost`), so the speedup
compares like with like, and the wall time covers everything from the e-graph's construction to
the last ILP. Every setting is in :class:`~tensor_eqsat.config.OptimizeConfig`.

``search="auto"`` runs the anytime portfolio instead (:mod:`tensor_eqsat.search.portfolio`):
several constructions within ``time_budget`` seconds, each one's e-graph final-extracted (the ILP
warm-started from the best graph so far, :func:`_graph_hint`), the cheapest under the cost model
winning; ``OptimizeResult.portfolio`` lists every candidate, and the other finalists are guard
alternatives.

Alternative rejected: a shared per-node cost cache across search states (class ids of forked
e-graph copies mean different classes; the cost model's own per-configuration cache is safe and
does the real work).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from typing import Any

from tensor_eqsat.clock import Deadline
from tensor_eqsat.config import OptimizeConfig, Search
from tensor_eqsat.cost.bounded import bound_timing
from tensor_eqsat.cost.model import CostModel
from tensor_eqsat.egraph.egraph import EGraph
from tensor_eqsat.egraph.enode import ENode
from tensor_eqsat.egraph.origins import applications
from tensor_eqsat.errors import ConfigError
from tensor_eqsat.extract.egraph_problem import problem_from_egraph
from tensor_eqsat.extract.ilp import IlpExtractor, IlpReward
from tensor_eqsat.extract.problem import ExtractionError, ExtractionProblem
from tensor_eqsat.extract.registry import ExtractorKind, make_extractor
from tensor_eqsat.extract.result import ExtractionResult
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.opspec import PROJECTION
from tensor_eqsat.ir.serialize import dumps
from tensor_eqsat.ir.summary import to_dot
from tensor_eqsat.outputs import write_dir
from tensor_eqsat.rounds import RoundReport, RoundsStop, more_rounds, with_counts
from tensor_eqsat.rules.sets import FOLD_FIRST, RuleSet, load_rule_set, resolve_rule_set
from tensor_eqsat.search.actions import Actions
from tensor_eqsat.search.construction import ConstructionReport, Progress, ProgressFn, StepLog
from tensor_eqsat.search.env import ExtractorCost
from tensor_eqsat.search.portfolio import (
    Extraction,
    Portfolio,
    PortfolioReport,
)
from tensor_eqsat.search.runner import Runner, RunnerConfig
from tensor_eqsat.search.stop import StopReason

__all__ = [
    "OptimizeConfig",
    "OptimizeResult",
    "OptimizeSettings",
    "OptimizeStats",
    "Progress",
    "RoundReport",
    "RoundsStop",
    "Search",
    "StepLog",
    "StopReason",
    "optimize",
    "save_run",
]

log = logging.getLogger(__name__)

AUTO_ILP_REWARD_SECONDS = 5.0
"""Each ILP solve that rewards the ``auto`` search's last MCTS (``mcts-ilp``) gets this many
seconds; past it the solver's incumbent is the reward."""


@dataclass(frozen=True)
class OptimizeSettings:
    """Every setting of a run as resolved (the model's k_multi and rule set filled in).

    The fields mirror :class:`~tensor_eqsat.config.OptimizeConfig`, flattened as the results
    database and run directories have always stored them; ``mcts`` holds every MCTS setting
    (None unless the search is MCTS); ``alternatives`` the extra extractors (stored only when
    there are some).
    """

    model: str | None
    search: str
    main_extractor: str
    final_extractor: str
    cost_model: str
    node_limit: int
    budget: int
    max_rollout_depth: int
    k_multi: int
    seed: int
    time_limit: float | None
    rules: str
    num_rules: int
    ilp_time_limit: float | None
    mcts: dict[str, Any] | None = None
    alternatives: tuple[str, ...] = ()
    time_budget: float | None = None
    memory_limit: int | None = None
    portfolio: dict[str, Any] | None = None
    reward: dict[str, Any] | None = None
    """The ILP reward's settings (``warm_start``, ``node_limit``, ``stall_limit``, ``time_limit``)
    of an MCTS run rewarded by ``ilp``."""
    rounds: int = 1
    """The most search rounds, 0 for until a fixpoint (``OptimizeConfig.rounds`` resolved)."""
    backtracks: int = 0
    """Backtracks at a fixpoint (``OptimizeConfig.backtracks`` resolved)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (``settings.json``); ``mcts`` only for an MCTS run; ``time_budget``,
        ``memory_limit`` and ``portfolio`` only when set (``portfolio`` for an ``auto`` run);
        ``reward`` only for an ILP-rewarded MCTS run; ``rounds`` only when not 1 (the paper's
        one search); ``backtracks`` only when not 0."""
        out = dict(self.__dict__)
        if out["rounds"] == 1:
            del out["rounds"]
        if out["backtracks"] == 0:
            del out["backtracks"]
        for key in ("mcts", "time_budget", "memory_limit", "portfolio", "reward"):
            if out[key] is None:
                del out[key]
        if out["alternatives"]:
            out["alternatives"] = list(out["alternatives"])
        else:
            del out["alternatives"]
        return out


@dataclass(frozen=True)
class OptimizeStats:
    """Timings and counters of a run.

    build_s: seconds to build the e-graph; initial_enodes: its size then.
    construction: the construction's own statistics (MCTS: initial and best main cost,
        simulations, environment counters; saturation: runner seconds, applications per rule).
    search_s: seconds of construction; enodes, classes: the e-graph's size after it.
    final_extraction_s: seconds of the final extraction (building the problem included);
    final_extraction: its extractor, status, reported and DAG cost, gap and solver seconds.
    costing_s: seconds to price both graphs.
    """

    build_s: float
    initial_enodes: int
    construction: dict[str, Any]
    search_s: float
    enodes: int
    classes: int
    final_extraction_s: float
    final_extraction: dict[str, Any]
    costing_s: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data, the construction's statistics inlined (``stats.json``)."""
        out: dict[str, Any] = {"build_s": self.build_s, "initial_enodes": self.initial_enodes}
        out.update(self.construction)
        out.update({k: v for k, v in self.__dict__.items() if k not in out and k != "construction"})
        return out


@dataclass(frozen=True)
class OptimizeResult:
    """What :func:`optimize` did.

    graph: the optimized graph; original: the input graph.
    original_cost_ms, optimized_cost_ms: both priced by the same cost model.
    wall_s: total seconds (e-graph construction, every extraction, the final extraction, costing).
    stop_reason: why construction stopped.
    steps: the per-step log; rule_counts: rule id -> times applied (MCTS: steps that applied it;
        saturation: iterations in which it changed the e-graph), whether or not the graph
        extracted uses the result (that is :attr:`rules_used`).
    settings: every setting as resolved; stats: timings and counters.
    alternatives: (label, graph) pairs, candidates for the never-slower guard: the extractions of
        the final e-graph by each of ``config.alternatives`` (labelled by extractor), and for an
        ``auto`` run the other finalists of the portfolio (labelled ``strategy@node_limit``).
    portfolio: what the ``auto`` search did (every candidate of every round, the winner); None
        for other searches.
    rounds: each search round (:class:`RoundReport`; ``OptimizeConfig.rounds``); rounds_stop:
        why no further round ran (:class:`RoundsStop`; see :attr:`fixpoint`).
    """

    graph: Graph
    original: Graph
    original_cost_ms: float
    optimized_cost_ms: float
    wall_s: float
    stop_reason: StopReason
    steps: tuple[StepLog, ...]
    rule_counts: dict[int, int]
    settings: OptimizeSettings
    stats: OptimizeStats
    alternatives: tuple[tuple[str, Graph], ...] = ()
    portfolio: PortfolioReport | None = None
    rounds: tuple[RoundReport, ...] = ()
    rounds_stop: RoundsStop | None = None

    @property
    def fixpoint(self) -> bool:
        """Whether the search reached its fixpoint: its last round gained nothing, so a further
        run on the graph handed back would find nothing either (with the same seed; a round
        cut short by the deadline does not count)."""
        return self.rounds_stop is RoundsStop.FIXPOINT

    @property
    def rules_used(self) -> dict[str, int]:
        """Rule name -> the applications whose e-nodes :attr:`graph` holds: what it was rewritten
        by, where :attr:`rule_counts` counts every change to the e-graph, chosen or not
        (:mod:`tensor_eqsat.egraph.origins`; over search rounds, the rounds leading to it)."""
        return dict(self.stats.final_extraction.get("rules_used", {}))

    @property
    def speedup_pct(self) -> float:
        """(original − optimized) / original × 100 (the paper's speedup)."""
        if self.original_cost_ms <= 0:
            return 0.0
        return (self.original_cost_ms - self.optimized_cost_ms) / self.original_cost_ms * 100.0

    def summary(self) -> dict[str, Any]:
        """The headline numbers (the CLI's JSON)."""
        return {
            "original_cost_ms": self.original_cost_ms,
            "optimized_cost_ms": self.optimized_cost_ms,
            "speedup_pct": self.speedup_pct,
            "wall_s": self.wall_s,
            "stop_reason": self.stop_reason.value,
            "steps": len(self.steps),
            "rule_counts": {str(k): v for k, v in sorted(self.rule_counts.items())},
            "rounds": [r.to_dict() for r in self.rounds],
            "rounds_stop": None if self.rounds_stop is None else self.rounds_stop.value,
            "fixpoint": self.fixpoint,
        }

    def to_dict(self) -> dict[str, Any]:
        """Everything but the graphs, as JSON-ready data."""
        out = {
            **self.summary(),
            "settings": self.settings.to_dict(),
            "stats": self.stats.to_dict(),
            "step_log": [s.to_dict() for s in self.steps],
        }
        if self.portfolio is not None:
            out["portfolio"] = self.portfolio.to_dict()
        return out


def optimize(
    graph: Graph | str,
    config: OptimizeConfig | None = None,
    *,
    progress: ProgressFn | None = None,
    deadline: Deadline | None = None,
    egraph: EGraph | None = None,
    **overrides: Any,
) -> OptimizeResult:
    """Optimize ``graph`` (a Graph, or a zoo model name): construct an e-graph, extract the
    cheapest graph, price both. ``config`` holds every setting (default: the paper's best
    practical one); ``overrides`` change single ones (:meth:`OptimizeConfig.with_overrides`);
    ``progress`` receives :class:`Progress` events. ``deadline``: the call's clock
    (:class:`~tensor_eqsat.clock.Deadline`), when a caller such as
    :func:`~tensor_eqsat.deliver.deliver` bounds more than the search; default: one made here
    from ``time_budget``. ``egraph``: the graph's e-graph when the caller has built it already
    (it is grown in place). Raises TensorEqsatError subclasses for bad graphs, rules, cost models
    and settings (ConfigError for an unknown search or extractor).

    This is the search alone; :func:`~tensor_eqsat.deliver.deliver` adds the numeric check, the
    never-slower guard and the write.

    >>> g = Graph()
    >>> x = g.input((1, 64), name="x")
    >>> g.output(g.matmul(g.matmul(x, g.weight((64, 64), name="w1")), g.weight((64, 64), name="w2")))
    >>> r = optimize(g, budget=4, node_limit=50, final_extractor="greedy-dag", target="a100")
    >>> r.speedup_pct, r.stop_reason, r.steps[0].rule   # x·(W1·W2): W1·W2 is folded at load time
    (50.0, <StopReason.NODE_LIMIT: 'node limit'>, 'matmul-assoc-1')
    """
    cfg = (config or OptimizeConfig()).with_overrides(**overrides)
    if deadline is None:
        budget = cfg.auto_time_budget() if cfg.search is Search.AUTO else cfg.time_budget
        deadline = Deadline.after(budget)
    name = graph if isinstance(graph, str) else cfg.model
    info = _zoo_info(name, required=isinstance(graph, str))
    source: Graph = info.build() if isinstance(graph, str) else graph
    cm = cfg.cost_model_object(source)
    bound_timing(cm, deadline)  # a measured cost model times ops within the deadline
    actions = Actions.from_rules(_resolve_rules(cfg.rules, info, cfg.search))
    k_multi = cfg.k_multi if cfg.k_multi is not None else (info.k_multi if info is not None else 1)
    run = _Run(cfg, name, cm, actions, k_multi, deadline)
    ts = time.perf_counter()
    first = _round(run, source, egraph, progress, None, 1)
    return more_rounds(run, first, time.perf_counter() - ts, progress, _round)


@dataclass(frozen=True)
class _Run:
    """What every round of one :func:`optimize` call shares: the settings, the cost model, the
    rules and the clock."""

    cfg: OptimizeConfig
    name: str | None
    cm: CostModel
    actions: Actions
    k_multi: int
    deadline: Deadline
    stalled: int = 0
    """Candidates in a row without gain at the end of the round this one continues from
    (:func:`~tensor_eqsat.rounds.more_rounds`), counted towards ``stall_candidates``."""


def _round(
    run: _Run,
    source: Graph,
    egraph: EGraph | None,
    progress: ProgressFn | None,
    hint: Graph | None,
    index: int,
) -> OptimizeResult:
    """Round ``index`` (1 for the first) of the search on ``source`` (the body of
    :func:`optimize`): a fresh e-graph (or the caller's ``egraph``), fold-first, the
    construction or the portfolio, the final extraction (warm-started from ``hint`` when given:
    a later round's input)."""
    cfg, name, cm, actions, k_multi, deadline = (
        run.cfg, run.name, run.cm, run.actions, run.k_multi, run.deadline,
    )  # fmt: skip
    t0 = deadline.start
    _emit(progress, t0, "build")
    tb = time.perf_counter()
    if egraph is None:
        egraph = EGraph.from_graph(source)
    folded = _fold_first(egraph, actions, cfg, deadline)
    build_s, initial_enodes = time.perf_counter() - tb, egraph.num_enodes
    # Every search is a schedule of stages (OptimizeConfig.schedule): auto's runs as the
    # portfolio; a one-stage schedule (mcts, saturate, a Construction) grows this e-graph itself.
    schedule = cfg.schedule()
    if cfg.search is Search.AUTO:
        limit = cfg.max_rounds()
        follow = limit is None or index < limit
        result = _optimize_auto(
            source, egraph, name, cfg, cm, actions, k_multi, progress, deadline, build_s, hint, follow,
            stalled=run.stalled,
        )  # fmt: skip
        return replace(result, rule_counts=with_counts(result.rule_counts, folded))
    construction = cfg.construction(cm, k_multi, schedule[0])
    ts = time.perf_counter()
    run_deadline = deadline.earlier(cfg.time_limit)
    if egraph.num_enodes >= cfg.capped_node_limit():
        # Nothing may be added: every construction would stop at once.
        report = ConstructionReport(StopReason.NODE_LIMIT)
    else:
        stop_at = _construction_deadline(cfg, run_deadline)
        report = construction.construct(egraph, actions, seed=cfg.seed, deadline=stop_at, progress=progress)
    search_s = time.perf_counter() - ts
    _emit(progress, t0, "extract", step=len(report.steps), enodes=egraph.num_enodes)
    optimized, extracted, final_s, used = _extract(egraph, cm, cfg, run_deadline.at, hint=hint)
    if extracted.stats.get("solver_status") == "userinterrupt":
        # SCIP caught the user's Ctrl-C and returned its incumbent: the run was interrupted, and
        # says so the same way in every phase (deliver() hands back the original).
        raise KeyboardInterrupt
    final = _extraction_stats(cfg, extracted, used)
    alternatives = _extract_alternatives(egraph, cm, cfg)
    tc = time.perf_counter()
    original_cost, optimized_cost = cm.graph_cost(source), cm.graph_cost(optimized)
    stats = OptimizeStats(
        build_s, initial_enodes, report.stats, search_s, egraph.num_enodes, egraph.num_classes,
        final_s, final, time.perf_counter() - tc,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    _emit(progress, t0, "done", step=len(report.steps), enodes=egraph.num_enodes)
    log.info("optimized %s: %.4f -> %.4f ms (%s, %.1fs)", name or "graph", original_cost, optimized_cost,
             report.stop_reason.value, wall)  # fmt: skip
    settings = _settings(cfg, name, cm, k_multi, actions)
    return OptimizeResult(
        optimized, source, original_cost, optimized_cost, wall, report.stop_reason, report.steps,
        with_counts(report.rule_counts, folded), settings, stats, alternatives,
    )  # fmt: skip


EXTRACTION_RESERVE = 0.2
"""Within a ``time_budget`` (which bounds the whole run), a one-construction search (``mcts``,
``saturate``, a Construction) stops this fraction of its time left before the deadline, so the
final extraction has time to solve (the ``auto`` portfolio's ``extraction_reserve``, same
default). Without it the construction ran to the deadline and the ILP got its floor
(:data:`~tensor_eqsat.config.MIN_BUDGET_ILP_SECONDS`): the longer the budget, the larger the
e-graph it could not solve in that floor (issue 35)."""


def _construction_deadline(cfg: OptimizeConfig, run: Deadline) -> float | None:
    """When a one-construction search must stop: ``run``'s deadline less
    :data:`EXTRACTION_RESERVE` of the time left within a time budget; ``run``'s own deadline
    under a ``time_limit`` (it bounds the construction alone, the ILP gets its own time) or with
    no limit."""
    left = run.left()
    if left is None or cfg.time_limit is not None or not cfg.has_budget():
        return run.at
    return run.before(EXTRACTION_RESERVE * max(left, 0.0)).at


FOLD_FIRST_ITERATIONS = 8
"""Iterations of the fold-first phase: a fold takes two (a bias absorbed, then the fold), and a
batch norm after another folded one one more; the phase stops earlier once nothing changes."""


def _fold_first(egraph: EGraph, actions: Actions, cfg: OptimizeConfig, deadline: Deadline) -> dict[int, int]:
    """The fold-first phase (``OptimizeConfig.fold_first``): the rule set's
    :data:`~tensor_eqsat.rules.sets.FOLD_FIRST` rules saturated on ``egraph`` in place, within
    the node limit and a tenth of the time left; rule id -> iterations in which it changed the
    e-graph, as a saturation counts them (``OptimizeResult.rule_counts``; one iteration folds
    every batch norm it matches), empty when the set has none of them or the phase is off."""
    if not cfg.fold_first:
        return {}
    rules = [r for r in actions.single if r.name in FOLD_FIRST]
    if not rules:
        return {}
    left = deadline.left()
    limit = cfg.capped_node_limit()
    runner = Runner(
        rules,
        node_limit=limit,
        iter_limit=FOLD_FIRST_ITERATIONS,
        time_limit=(left / 10 if left is not None else RunnerConfig().time_limit),
        k_multi=0,
    )
    report = runner.run(egraph)
    counts: dict[int, int] = {}
    for it in report.iterations:
        for name in it.applied:
            rid = actions.id_by_name[name]
            counts[rid] = counts.get(rid, 0) + 1
    return counts


def _optimize_auto(
    source: Graph,
    egraph: EGraph,
    name: str | None,
    cfg: OptimizeConfig,
    cm: CostModel,
    actions: Actions,
    k_multi: int,
    progress: ProgressFn | None,
    clock: Deadline,
    build_s: float,
    hint: Graph | None = None,
    rounds_follow: bool = False,
    stalled: int = 0,
) -> OptimizeResult:
    """The ``auto`` search: the portfolio (:mod:`tensor_eqsat.search.portfolio`) until the
    ``clock``'s deadline; the cheapest candidate is the result, and the other finalists are guard
    alternatives. With no finished candidate (interrupted or out of time at once) the result is
    the original graph."""
    t0, deadline = clock.start, clock.at
    initial_enodes = egraph.num_enodes
    portfolio = Portfolio(
        cfg.portfolio,
        runner=replace(cfg.runner, k_multi=k_multi),
        mcts=replace(cfg.mcts, time_limit=None),
        main_cost=ExtractorCost(cfg.extractor("main"), cm),
        node_limit=cfg.node_limit,
        node_cap=cfg.node_cap(),
        ilp_cost=IlpReward(cm, replace(cfg.ilp, time_limit=AUTO_ILP_REWARD_SECONDS))
        if cfg.portfolio.ilp_mcts
        else None,
        rounds_follow=rounds_follow,
        start_cost=cm.graph_cost(source),
        stalled=stalled,
    )
    ts = time.perf_counter()
    finalize = _finalizer(cm, cfg)
    report = portfolio.run(
        egraph, actions, finalize, seed=cfg.seed, deadline=deadline, progress=progress, hint=hint
    )
    search_s = time.perf_counter() - ts
    best = report.best
    if best is None:
        reason = StopReason.INTERRUPTED if report.stop is StopReason.INTERRUPTED else StopReason.TIME_LIMIT
        # No candidate finished: the original graph, and no extraction ran.
        optimized, creport, final = (
            source,
            ConstructionReport(reason),
            {"extractor": cfg.extractor_name("final"), "status": "none", "candidate": None},
        )
        enodes, classes, final_s = initial_enodes, egraph.num_classes, 0.0
    else:
        optimized, creport, final = best.graph, best.report, {**best.extraction, "candidate": best.label}
        enodes, classes, final_s = best.enodes, best.classes, best.extraction_s
    alternatives = tuple(
        (c.label, c.graph) for c in report.finalists(cfg.portfolio.finalists) if c is not best
    )
    if report.best_egraph is not None:
        alternatives += _extract_alternatives(report.best_egraph, cm, cfg)
    tc = time.perf_counter()
    original_cost = cm.graph_cost(source)
    optimized_cost = best.cost_ms if best is not None else original_cost
    construction = {**creport.stats, "portfolio_stop": report.stop.value}
    stats = OptimizeStats(
        build_s, initial_enodes, construction, search_s, enodes, classes, final_s, final,
        time.perf_counter() - tc,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    _emit(progress, t0, "done", step=len(creport.steps), enodes=enodes)
    won = best.label if best else "no candidate"
    log.info("optimized %s: %.4f -> %.4f ms (auto: %s, %s, %.1fs)", name or "graph", original_cost,
             optimized_cost, won, report.stop.value, wall)  # fmt: skip
    settings = _settings(cfg, name, cm, k_multi, actions)
    return OptimizeResult(
        optimized, source, original_cost, optimized_cost, wall, creport.stop_reason, creport.steps,
        creport.rule_counts, settings, stats, alternatives, report,
    )  # fmt: skip


def _finalizer(cm: CostModel, cfg: OptimizeConfig) -> Any:
    """The portfolio's final extraction (:func:`_extract`, an ILP with at most half the time
    left, so a later stage still has time, warm-started from the best graph so far), with the
    statistics a candidate reports."""

    def finalize(egraph: EGraph, deadline: float | None, hint: Graph | None) -> Extraction:
        graph, result, seconds, used = _extract(egraph, cm, cfg, deadline, share=0.5, hint=hint)
        stats = _extraction_stats(cfg, result, used)
        if "hint_cost" in result.stats:
            stats["hint_cost"] = result.stats["hint_cost"]
        # SCIP catches Ctrl-C itself and returns its incumbent: pass the interrupt on.
        stats["interrupted"] = result.stats.get("solver_status") == "userinterrupt"
        return Extraction(graph, cm.graph_cost(graph), stats, seconds)

    return finalize


def _extract(
    egraph: EGraph,
    cm: CostModel,
    cfg: OptimizeConfig,
    deadline: float | None,
    *,
    share: float = 1.0,
    hint: Graph | None = None,
) -> tuple[Graph, ExtractionResult, float, dict[str, int]]:
    """The one final extraction of every search: ``cfg``'s final extractor on ``egraph`` priced by
    ``cm``; an ILP gets ``share`` of the time left before ``deadline`` (at least
    MIN_ILP_SECONDS, within a time budget MIN_BUDGET_ILP_SECONDS) and, given a ``hint`` graph,
    starts from it where its nodes are in the e-graph. Returns the graph, the extractor's result,
    the seconds it took and the rule applications the graph holds (``rules_used``).

    The solver runs even with no time left: its warm start alone (greedy-dag) misses the merges
    the ILP finds, and a partitioned search's regions each reach their final extraction with their
    share spent (ViT-Base at 48 layers fell from +19.4 % to +0.0 % when it was skipped). It
    starts from the cheapest of greedy-dag's answer, the ``hint`` and the main extractor's answer
    (:func:`_main_start`), so a solve cut short hands back at least what the search was rewarded
    for, never less than a shorter search found (issue 35: with a 42 s share MCTS grew ViT-Base's
    layer to 892 e-nodes, the solve's 0.1 s floor returned greedy-dag's answer, the original, and
    48 layers in 60 s gained 0 % where 96 layers in 20 s gained 19.5 %)."""
    tf = time.perf_counter()
    problem = problem_from_egraph(egraph, cm)
    time_left = None if deadline is None else (deadline - time.perf_counter()) * share
    extractor = cfg.extractor("final", time_left)
    if isinstance(extractor, IlpExtractor):
        ilp_hint = None if hint is None else _graph_hint(egraph, problem, hint)
        result = extractor.extract(problem.problem, ilp_hint, starts=_main_start(problem.problem, cfg))
    else:
        result = extractor.extract(problem.problem)
    graph = problem.to_graph(result)
    # The applications whose e-nodes the graph holds (egraph/origins.py): what it was rewritten by.
    used = applications(egraph, problem.choice(result).values())
    return graph, result, time.perf_counter() - tf, used


def _main_start(problem: ExtractionProblem, cfg: OptimizeConfig) -> tuple[tuple[int, ...], ...]:
    """The main extractor's answer on ``problem``, as a start for the final ILP: the answer whose
    cost the search's reward followed (MCTS keeps the step that lowers it). None when the main
    extractor is greedy-dag (the ILP's own start) or an ILP (a second solve), or when it finds
    no acyclic answer."""
    main = cfg.extractor("main")
    if isinstance(main, IlpExtractor) or main.name == ExtractorKind.GREEDY_DAG.value:
        return ()
    try:
        return (tuple(main.extract(problem).choices),)
    except ExtractionError:
        return ()


def _graph_hint(egraph: EGraph, problem: Any, graph: Graph) -> list[int]:
    """``graph`` as an ILP hint on ``problem``: for each of its nodes found in ``egraph`` (by
    hash-cons lookup, bottom-up), its class chooses that node; -1 elsewhere. A graph from an
    earlier candidate's e-graph is usually mostly present in a later, larger one."""
    index = {node: i for i, node in enumerate(problem.enodes)}
    hint = [-1] * len(problem.problem.class_keys)

    def choose(enode: ENode) -> int | None:
        cid = egraph.lookup(enode)
        if cid is not None:
            i = index.get(egraph.canonicalize(enode))
            if i is not None:
                hint[problem.problem.node_class[i]] = i
        return cid

    ref: dict[tuple[int, int], int] = {}
    for node in graph.nodes:
        try:
            children = tuple(ref[r] for r in node.inputs)
        except KeyError:
            continue  # an input was not found: nor can this node be
        cid = choose(ENode(node.op, node.attrs, children))
        if cid is None:
            continue
        if len(node.shapes) == 1:
            ref[(node.id, 0)] = cid
        else:  # each output is its own class, chosen as the projection of this node
            for k in range(len(node.shapes)):
                pid = choose(ENode(PROJECTION, (k,), (cid,)))
                if pid is not None:
                    ref[(node.id, k)] = pid
    return hint


def _emit(progress: ProgressFn | None, t0: float, phase: str, **kw: Any) -> None:
    if progress is not None:
        progress(Progress(phase=phase, elapsed=time.perf_counter() - t0, **kw))


def _extraction_stats(cfg: OptimizeConfig, result: ExtractionResult, used: dict[str, int]) -> dict[str, Any]:
    """What a run reports of its final extraction (``stats["final_extraction"]``); ``rules_used``:
    rule name -> the applications whose e-nodes the extracted graph holds
    (:func:`~tensor_eqsat.egraph.origins.applications`)."""
    return {
        "rules_used": dict(used),
        "extractor": cfg.extractor_name("final"),
        "status": result.status.value,
        "reported_cost": result.reported_cost,
        "dag_cost": result.dag_cost(),
        "gap": result.gap,
        "solve_s": result.time_s,
    }


def _extract_alternatives(
    egraph: EGraph, cm: CostModel, cfg: OptimizeConfig
) -> tuple[tuple[str, Graph], ...]:
    """Extractions of the final e-graph by ``cfg.alternatives`` (guard candidates)."""
    if not cfg.alternatives:
        return ()
    problem = problem_from_egraph(egraph, cm)
    out = []
    for kind in cfg.alternatives:
        result = make_extractor(kind, ilp_config=cfg.ilp).extract(problem.problem)
        out.append((kind.value if isinstance(kind, ExtractorKind) else str(kind), problem.to_graph(result)))
    return tuple(out)


def _settings(
    cfg: OptimizeConfig, name: str | None, cm: CostModel, k_multi: int, actions: Actions
) -> OptimizeSettings:
    mcts = None
    auto = cfg.search is Search.AUTO
    if cfg.search is Search.MCTS:
        used = cfg.mcts_settings()
        mcts = {k: (v.value if isinstance(v, Enum) else v) for k, v in used.__dict__.items()}
    elif auto:  # what auto's MCTS stages ran with: its own budget, no time limit of their own
        used = replace(cfg.mcts, budget=cfg.portfolio.mcts_budget, time_limit=None)
        mcts = {k: (v.value if isinstance(v, Enum) else v) for k, v in used.__dict__.items()}
    return OptimizeSettings(
        model=name,
        search=cfg.search_name,
        main_extractor=cfg.extractor_name("main"),
        final_extractor=cfg.extractor_name("final"),
        cost_model=getattr(cm, "spec", type(cm).__name__),
        node_limit=cfg.node_limit,
        budget=cfg.portfolio.mcts_budget if auto else cfg.mcts.budget,
        max_rollout_depth=cfg.mcts.max_rollout_depth,
        k_multi=k_multi,
        seed=cfg.seed,
        time_limit=cfg.time_limit,
        rules=actions.set_name,
        num_rules=len(actions),
        ilp_time_limit=cfg.ilp.time_limit,
        mcts=mcts,
        alternatives=tuple(k.value if isinstance(k, ExtractorKind) else str(k) for k in cfg.alternatives),
        time_budget=cfg.auto_time_budget() if auto else cfg.time_budget,
        memory_limit=cfg.memory_limit,
        portfolio=cfg.portfolio.to_dict() if auto else None,
        reward=_reward_settings(cfg) if mcts is not None else None,
        rounds=cfg.max_rounds() or 0,
        backtracks=cfg.max_backtracks(),
    )


def _reward_settings(cfg: OptimizeConfig) -> dict[str, Any] | None:
    """What an ILP reward solve was allowed (None unless the main extractor is ``ilp``)."""
    if cfg.main_extractor is not ExtractorKind.ILP:
        return None
    return {
        "warm_start": cfg.reward_warm_start,
        "node_limit": cfg.reward_node_limit,
        "stall_limit": cfg.reward_stall_limit,
        "time_limit": cfg.ilp.time_limit if cfg.reward_time_limit is None else cfg.reward_time_limit,
    }


def _zoo_info(name: str | None, *, required: bool) -> Any:
    """The zoo's ModelInfo for ``name`` (None if it is not a zoo model and not ``required``)."""
    from tensor_eqsat import zoo

    if name is not None and name in zoo.names():
        return zoo.info(name)
    if required:
        raise ConfigError(f"{name}: no such zoo model (models: {', '.join(zoo.names())})")
    return None


def rule_set_for(rules: Any, model: str | None, search: Any = Search.AUTO) -> RuleSet:
    """The rules a run uses: ``rules`` as :class:`OptimizeConfig` takes them. ``"default"`` is
    the paper's rules; for a search other than ``auto`` (the paper's ``mcts`` and ``saturate``,
    or a construction of one's own) on a zoo ``model`` it is that model's rule set as the paper
    ran it (NASRNN's variant, ``ModelInfo.rule_set``), so that their figures reproduce the
    paper's.

    >>> rule_set_for("default", "nasrnn", Search.MCTS).name, rule_set_for("default", "nasrnn").name
    ('taso-nasrnn', 'taso')
    """
    return _resolve_rules(rules, _zoo_info(model, required=False), search)


def _resolve_rules(rules: Any, info: Any, search: Any) -> RuleSet:
    if isinstance(rules, RuleSet):
        return rules
    if isinstance(rules, str):
        if rules == "default":
            # ``auto`` is the product's search, not a reproduction: the paper swapped NASRNN's rule
            # 128 for a copy of 124 only because TASO could not run the graphs 128 makes
            paper = info is not None and search is not Search.AUTO
            return load_rule_set(info.rule_set if paper else "taso")
        return resolve_rule_set(rules)  # a rule set name or the path of a rule file
    return RuleSet("custom", tuple(sorted(rules, key=lambda r: r.id)))


RUN_FILES = (
    "settings.json",
    "stats.json",
    "steps.json",
    "original.json",
    "optimized.json",
    "original.dot",
    "optimized.dot",
    "portfolio.json",
    "rounds.json",
    "complete.json",
)
"""Every file :func:`save_run` may write into a run directory (the marker included)."""


def save_run(result: OptimizeResult, directory: str | Path) -> Path:
    """Write a run directory: settings.json, stats.json (headline numbers and stats),
    steps.json (the step log), original/optimized graphs as JSON and DOT, for an ``auto`` run
    portfolio.json (every candidate, the winner), rounds.json (each search round, why the last
    was the last, and whether the result is a fixpoint), and last the
    completion marker ``complete.json`` (see :func:`tensor_eqsat.outputs.write_dir`). Returns the
    directory; raises OutputError naming it when it cannot be written."""
    stats = {**result.summary(), "stats": result.stats.to_dict()}
    files: dict[str, str | bytes] = {
        "settings.json": json.dumps(result.settings.to_dict(), indent=2) + "\n",
        "stats.json": json.dumps(stats, indent=2, default=str) + "\n",
        "steps.json": json.dumps([s.to_dict() for s in result.steps], indent=2) + "\n",
        "original.json": dumps(result.original),
        "optimized.json": dumps(result.graph),
        "original.dot": to_dot(result.original, "original"),
        "optimized.dot": to_dot(result.graph, "optimized"),
    }
    if result.portfolio is not None:
        files["portfolio.json"] = json.dumps(result.portfolio.to_dict(), indent=2) + "\n"
    if result.rounds:
        rounds = {k: stats[k] for k in ("rounds", "rounds_stop", "fixpoint")}
        files["rounds.json"] = json.dumps(rounds, indent=2) + "\n"
    assert set(files) <= set(RUN_FILES)
    return write_dir(directory, files)
