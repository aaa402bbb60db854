"""``optimize()``: a tensor graph in, a faster equivalent graph out, with an honest account.

The pipeline (DESIGN.md): the graph becomes an e-graph; *construction* grows it with rewrite
rules under a node limit, either as the paper does (``search="mcts"``: Monte Carlo tree search
chooses each next rule, rewarded by the *main* extractor's cost; ``search/mcts.py`` and
``search/env.py``) or as TENSAT does (``search="saturate"``: every rule each iteration, the
multi-pattern rules in the first ``k_multi`` iterations; ``search/runner.py``); then the *final*
extractor picks the cheapest graph from the e-graph. Both graphs are priced by the same cost model
(:meth:`~tensor_eqsat.cost.model.CostModel.graph_cost`), so the speedup compares like with like,
and the wall time covers everything from the e-graph's construction to the last ILP.

Defaults are the paper's best practical setting: MCTS with budget 128, rollouts of up to 11
steps, greedy-ocf (the paper's OCF) as the main extractor and ILP as the final one, a 2,000
e-node limit and the paper's 139 rules (the NASRNN variant for ``nasrnn``).

Alternatives rejected: one configuration object for everything (most calls change one or two
settings; the MCTS knobs beyond budget and depth stay in :class:`~tensor_eqsat.search.mcts.MctsConfig`),
and a shared per-node cost cache across search states (class ids of forked e-graph copies mean
different classes; the cost model's own per-configuration cache is safe and does the real work).
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any

from tensor_eqsat.cost.model import CostModel
from tensor_eqsat.cost.spec import DEFAULT_SPEC, parse_cost_model
from tensor_eqsat.egraph.egraph import EGraph
from tensor_eqsat.errors import TensorEqsatError
from tensor_eqsat.extract.egraph_problem import problem_from_egraph
from tensor_eqsat.extract.ilp import IlpConfig
from tensor_eqsat.extract.registry import ExtractorKind, make_extractor, parse_kind
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.serialize import dumps
from tensor_eqsat.ir.summary import to_dot
from tensor_eqsat.outputs import write_dir
from tensor_eqsat.rules.rule_spec import RuleSpec
from tensor_eqsat.rules.sets import RuleSet, load_rule_set, resolve_rule_set
from tensor_eqsat.search.actions import Actions
from tensor_eqsat.search.env import EGraphEnv
from tensor_eqsat.search.mcts import Mcts, MctsConfig, MctsStep, MctsStop
from tensor_eqsat.search.runner import Runner

log = logging.getLogger(__name__)

TENSAT_ITER_LIMIT = 10_000
"""TENSAT's iteration limit in the paper's baseline runs (``run_exp_main.sh``: n_iter)."""
TENSAT_TIME_LIMIT = 3600.0
"""TENSAT's saturation time limit in the paper's baseline runs (n_sec), seconds."""


class Search(Enum):
    """Construction strategies."""

    MCTS = "mcts"
    SATURATE = "saturate"


@dataclass(frozen=True)
class Progress:
    """A progress event for live displays.

    phase: ``"build"``, ``"search"``, ``"extract"`` or ``"done"``.
    step: real steps (MCTS) taken so far; simulations / budget: within the current step.
    rule: the last rule applied; enodes: the e-graph's size; best_cost: the main extractor's best
    cost so far (None before it is known); elapsed: seconds since optimize() started.
    """

    phase: str
    step: int = 0
    simulations: int = 0
    budget: int = 0
    rule: str | None = None
    enodes: int = 0
    best_cost: float | None = None
    elapsed: float = 0.0


@dataclass(frozen=True)
class StepLog:
    """One construction step: an MCTS action, or a saturation iteration.

    rule_ids: the rule applied (MCTS), or every rule that changed the e-graph in the iteration.
    rule: the rule's name (MCTS only).
    reward, cost, best_cost: the main extractor's view after the step (MCTS only; None for
        saturation, which does not extract between iterations).
    enodes, classes: the e-graph's size after the step.
    simulations: MCTS simulations spent choosing the step.
    seconds: time of the step (planning included); elapsed: since optimize() started.
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
class OptimizeResult:
    """What :func:`optimize` did.

    graph: the optimized graph; original: the input graph.
    original_cost_ms, optimized_cost_ms: both priced by the same cost model.
    wall_s: total seconds (e-graph construction, every extraction, the final extraction, costing).
    stop_reason: why construction stopped (``"node limit"``, ``"saturated"``, ``"time limit"``,
        ``"iteration limit"``, ``"step limit"``, ...).
    steps: the per-step log; rule_counts: rule id -> times applied (MCTS: steps that applied it;
        saturation: iterations in which it changed the e-graph).
    settings: every setting as resolved; stats: timings and counters.
    """

    graph: Graph
    original: Graph
    original_cost_ms: float
    optimized_cost_ms: float
    wall_s: float
    stop_reason: str
    steps: tuple[StepLog, ...]
    rule_counts: dict[int, int]
    settings: dict[str, Any]
    stats: dict[str, Any] = field(default_factory=dict)

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
            "stop_reason": self.stop_reason,
            "steps": len(self.steps),
            "rule_counts": {str(k): v for k, v in sorted(self.rule_counts.items())},
        }

    def to_dict(self) -> dict[str, Any]:
        """Everything but the graphs, as JSON-ready data."""
        return {
            **self.summary(),
            "settings": self.settings,
            "stats": self.stats,
            "step_log": [s.to_dict() for s in self.steps],
        }


def optimize(
    graph: Graph | str,
    *,
    search: Search | str = Search.MCTS,
    main_extractor: ExtractorKind | str = ExtractorKind.GREEDY_OCF,
    final_extractor: ExtractorKind | str = ExtractorKind.ILP,
    cost_model: str | CostModel = DEFAULT_SPEC,
    node_limit: int = 2000,
    budget: int = 128,
    max_rollout_depth: int = 10,
    k_multi: int | None = None,
    seed: int = 0,
    time_limit: float | None = None,
    rules: str | RuleSet | Sequence[RuleSpec] = "default",
    ilp_time_limit: float | None = 600.0,
    mcts: MctsConfig | None = None,
    model: str | None = None,
    progress: Callable[[Progress], None] | None = None,
) -> OptimizeResult:
    """Optimize a tensor graph: construct an e-graph, extract the cheapest graph, price both.

    graph: a :class:`~tensor_eqsat.ir.graph.Graph`, or a zoo model name (built at its defaults).
    search: ``"mcts"`` (the paper) or ``"saturate"`` (TENSAT). Default mcts.
    main_extractor: the extractor whose cost rewards MCTS (``greedy-tree`` = the paper's DCF,
        ``greedy-ocf`` = OCF, ``greedy-dag``, ``ilp``). Default greedy-ocf. Unused by saturate.
    final_extractor: the extractor of the result. Default ilp.
    cost_model: a cost-model spec (``roofline``, ``roofline:p100``, ``measured:cpu``, ...) or a
        CostModel. Default roofline (A100 profile).
    node_limit: construction stops once the e-graph has this many e-nodes; multi-pattern rules
        may add at most this many at once (the artifact: n_nodes = node_multi = 2000). Default 2000.
    budget: MCTS simulations per step. Default 128.
    max_rollout_depth: the artifact's max_sim_step; rollouts take up to this + 1 steps. Default 10.
    k_multi: saturation iterations with multi-pattern rules. Default: the zoo model's value when
        the graph is a zoo model (``graph`` a name, or ``model=``), else 1.
    seed: seeds every random choice. Default 0.
    time_limit: seconds for construction (MCTS planning stops early; saturation stops between
        rules). Default None (MCTS) / TENSAT's 3600 s (saturate). Final extraction is bounded by
        ``ilp_time_limit`` on top.
    rules: ``"default"`` (the paper's 139 rules; the NASRNN variant for ``nasrnn``), a rule set
        name, the path of a rule file, a RuleSet or RuleSpecs.
    ilp_time_limit: seconds per ILP solve (main or final). Default 600 (the artifact's).
    mcts: further MCTS settings (gamma, exploration, rollout policy, subtree reuse, ...); its
        budget, depth and time limit are replaced by the arguments above.
    model: the zoo name of ``graph`` when it is a Graph built from the zoo (for k_multi, rules).
    progress: called with :class:`Progress` events, for live displays.

    Raises TensorEqsatError subclasses for bad graphs, rules or cost models, and ValueError for
    unknown search or extractor names.

    >>> from tensor_eqsat.ir.graph import Graph
    >>> g = Graph()
    >>> x = g.input((1, 64), name="x")
    >>> y = g.matmul(g.matmul(x, g.weight((64, 64), name="w1")), g.weight((64, 64), name="w2"))
    >>> g.output(y)
    >>> r = optimize(g, budget=4, node_limit=50, final_extractor="greedy-dag")
    >>> r.speedup_pct, r.stop_reason, r.steps[0].rule   # x·(W1·W2): W1·W2 is folded at load time
    (50.0, 'node limit', 'matmul-assoc-1')
    """
    t0 = time.perf_counter()
    kind = _parse_search(search)
    main_kind = parse_kind(main_extractor)
    final_kind = parse_kind(final_extractor)
    name = graph if isinstance(graph, str) else model
    source = _zoo_graph(graph) if isinstance(graph, str) else graph
    cm = parse_cost_model(cost_model) if isinstance(cost_model, str) else cost_model
    ruleset = _resolve_rules(rules, name)
    actions = Actions.from_rules(ruleset)
    km = k_multi if k_multi is not None else _zoo_k_multi(name)
    if km < 0:
        raise ValueError(f"k_multi must be at least 0, got {km}")
    ilp_config = IlpConfig(time_limit=ilp_time_limit)

    def emit(phase: str, **kw: Any) -> None:
        if progress is not None:
            progress(Progress(phase=phase, elapsed=time.perf_counter() - t0, **kw))

    emit("build")
    tb = time.perf_counter()
    egraph = EGraph.from_graph(source)
    initial_enodes = egraph.num_enodes
    build_s = time.perf_counter() - tb
    settings: dict[str, Any] = {
        "model": name,
        "search": kind.value,
        "main_extractor": main_kind.value,
        "final_extractor": final_kind.value,
        "cost_model": getattr(cm, "spec", type(cm).__name__),
        "node_limit": node_limit,
        "budget": budget,
        "max_rollout_depth": max_rollout_depth,
        "k_multi": km,
        "seed": seed,
        "time_limit": time_limit,
        "rules": actions.set_name,
        "num_rules": len(actions),
        "ilp_time_limit": ilp_time_limit,
    }
    stats: dict[str, Any] = {"build_s": build_s, "initial_enodes": initial_enodes}

    ts = time.perf_counter()
    steps: list[StepLog]
    rule_counts: dict[int, int]
    if egraph.num_enodes >= node_limit:
        # nothing may be added; both searches would stop at once (MCTS after a wasted plan)
        steps, rule_counts, stop = [], {}, "node limit"
    elif kind is Search.MCTS:
        cfg = replace(
            mcts or MctsConfig(), budget=budget, max_rollout_depth=max_rollout_depth, time_limit=time_limit
        )
        settings["mcts"] = {k: (v.value if isinstance(v, Enum) else v) for k, v in cfg.__dict__.items()}
        steps, rule_counts, stop = _run_mcts(
            egraph, actions, cm, main_kind, ilp_config, node_limit, cfg, seed, stats, emit
        )
    else:
        steps, rule_counts, stop = _run_saturate(egraph, actions, node_limit, km, time_limit, stats, t0)
    stats["search_s"] = time.perf_counter() - ts
    stats["enodes"] = egraph.num_enodes
    stats["classes"] = egraph.num_classes
    emit("extract", step=len(steps), enodes=egraph.num_enodes)

    tf = time.perf_counter()
    problem = problem_from_egraph(egraph, cm)
    result = make_extractor(final_kind, ilp_config=ilp_config).extract(problem.problem)
    optimized = problem.to_graph(result)
    stats["final_extraction_s"] = time.perf_counter() - tf
    stats["final_extraction"] = {
        "extractor": final_kind.value,
        "status": result.status.value,
        "reported_cost": result.reported_cost,
        "dag_cost": result.dag_cost(),
        "gap": result.gap,
        "solve_s": result.time_s,
    }
    tc = time.perf_counter()
    original_cost = cm.graph_cost(source)
    optimized_cost = cm.graph_cost(optimized)
    stats["costing_s"] = time.perf_counter() - tc
    wall = time.perf_counter() - t0
    emit("done", step=len(steps), enodes=egraph.num_enodes)
    log.info(
        "optimized %s: %.4f -> %.4f ms (%s, %.1fs)",
        name or "graph",
        original_cost,
        optimized_cost,
        stop,
        wall,
    )
    return OptimizeResult(
        graph=optimized,
        original=source,
        original_cost_ms=original_cost,
        optimized_cost_ms=optimized_cost,
        wall_s=wall,
        stop_reason=stop,
        steps=tuple(steps),
        rule_counts=rule_counts,
        settings=settings,
        stats=stats,
    )


def _run_mcts(
    egraph: EGraph,
    actions: Actions,
    cm: CostModel,
    main_kind: ExtractorKind,
    ilp_config: IlpConfig,
    node_limit: int,
    cfg: MctsConfig,
    seed: int,
    stats: dict[str, Any],
    emit: Callable[..., None],
) -> tuple[list[StepLog], dict[int, int], str]:
    extractor = make_extractor(main_kind, ilp_config=ilp_config)

    def main_cost(eg: EGraph) -> float:
        return extractor.extract(problem_from_egraph(eg, cm).problem).reported_cost

    env = EGraphEnv(egraph, actions.rewrites, main_cost, node_limit=node_limit, node_multi=node_limit)
    t = time.perf_counter()
    stats["initial_main_cost"] = env.cost()
    stats["initial_main_extraction_s"] = time.perf_counter() - t
    last: dict[str, Any] = {"rule": None, "best": stats["initial_main_cost"], "step": 0}

    def on_simulation(step: int, done: int, budget: int) -> None:
        emit(
            "search",
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
        emit("search", step=s.index + 1, rule=last["rule"], enodes=s.info["enodes"], best_cost=s.best_cost)

    report = Mcts(cfg, seed=seed).run(env, on_step=on_step, on_simulation=on_simulation)
    steps = [
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
    ]
    counts = Counter(actions.ids[a] for a in report.actions)
    stats["simulations"] = report.simulations
    stats["search"] = env.stats.as_dict()
    stats["main_best_cost"] = report.best_cost
    stop = report.terminal_reason if report.stop_reason is MctsStop.TERMINAL else None
    return steps, dict(counts), stop or report.stop_reason.value


def _run_saturate(
    egraph: EGraph,
    actions: Actions,
    node_limit: int,
    k_multi: int,
    time_limit: float | None,
    stats: dict[str, Any],
    t0: float,
) -> tuple[list[StepLog], dict[int, int], str]:
    runner = Runner(
        actions.single,
        actions.multi,
        node_limit=node_limit,
        iter_limit=TENSAT_ITER_LIMIT,
        time_limit=TENSAT_TIME_LIMIT if time_limit is None else time_limit,
        k_multi=k_multi,
        node_multi=node_limit,
    )
    start = time.perf_counter() - t0
    report = runner.run(egraph)
    ids = {r.name: i for r, i in zip(actions.rewrites, actions.ids, strict=True)}
    counts: Counter[int] = Counter()
    steps = []
    elapsed = start
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
    stats["runner_s"] = report.seconds
    stats["applications"] = {
        str(ids[n]): k for n, k in sorted(report.applied.items(), key=lambda x: ids[x[0]])
    }
    return steps, dict(counts), report.stop_reason.value


def _parse_search(search: Search | str) -> Search:
    if isinstance(search, Search):
        return search
    try:
        return Search(search)
    except ValueError:
        known = ", ".join(s.value for s in Search)
        raise ValueError(f"unknown search {search!r} (known: {known})") from None


def _zoo_graph(name: str) -> Graph:
    from tensor_eqsat import zoo

    if name not in zoo.names():
        raise TensorEqsatError(f"{name}: no such zoo model (models: {', '.join(zoo.names())})")
    return zoo.get(name)


def _zoo_k_multi(name: str | None) -> int:
    from tensor_eqsat import zoo

    if name is not None and name in zoo.names():
        return zoo.info(name).k_multi
    return 1


def _resolve_rules(rules: str | RuleSet | Sequence[RuleSpec], model: str | None) -> RuleSet:
    if isinstance(rules, RuleSet):
        return rules
    if isinstance(rules, str):
        if rules == "default":
            # the paper replaced one multi-pattern rule for NASRNN (TASO could not run its result)
            return load_rule_set("taso-nasrnn" if model == "nasrnn" else "taso")
        return resolve_rule_set(rules)
    return RuleSet("custom", tuple(sorted(rules, key=lambda r: r.id)))


def save_run(result: OptimizeResult, directory: str | Path) -> Path:
    """Write a run directory: settings.json, stats.json (headline numbers and stats),
    steps.json (the step log), original/optimized graphs as JSON and DOT, and last the
    completion marker ``complete.json`` (see :func:`tensor_eqsat.outputs.write_dir`). Returns the
    directory; raises OutputError naming it when it cannot be written."""
    stats = {**result.summary(), "stats": result.stats}
    files = {
        "settings.json": json.dumps(result.settings, indent=2) + "\n",
        "stats.json": json.dumps(stats, indent=2, default=str) + "\n",
        "steps.json": json.dumps([s.to_dict() for s in result.steps], indent=2) + "\n",
        "original.json": dumps(result.original),
        "optimized.json": dumps(result.graph),
        "original.dot": to_dot(result.original, "original"),
        "optimized.dot": to_dot(result.graph, "optimized"),
    }
    return write_dir(directory, files)
