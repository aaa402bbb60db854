"""The e-graph environment MCTS searches over: one action applies one rule once.

State: an :class:`~tensor_eqsat.egraph.egraph.EGraph` (each tree node holds its own copy).
Actions: the rules in order, single- and multi-pattern alike (the paper's 139 actions: the
single rules first, then the multi rules). ``step(a)`` applies rule ``a`` to all its current
matches once and rebuilds (the engine's :func:`~tensor_eqsat.rewrite.rewrite.apply_rule`, the
artifact's one-iteration egg Runner with only that rule), then prices the e-graph with the main
extractor. Every step may add at most the e-nodes remaining under ``node_limit`` (checked between
matches, so a step ends at most one match's nodes past the limit; egg, and this environment
before, checked only between steps: issue 15 reports a multi-pattern step that grew reduced NASRNN
from 1,709 to 65,133 e-nodes); multi-pattern steps at most ``node_multi`` too (the artifact's
hook cap).

Done: the e-graph has ``node_limit`` e-nodes or more after the step (the paper: "stopped once a
rewrite rule application resulted in an e-graph of 2,000 or more e-nodes"), or the step ran past
``step_time_limit`` (egg's per-step time limit, 10 s in the artifact).

Pruning (:meth:`EGraphEnv.pruned_actions`), as the artifact did: a single rule whose left-hand
side has no match, a multi rule either of whose sources has no match; conditions and pair
compatibility are not looked at (``PruneMode.MATCHES`` looks at both and prunes more, never
wrongly).

Actions known to change nothing in the current state (pruned, or already applied there without
effect) are remembered until the state changes, and stepping them again returns at once: a
rollout's uniform actions are mostly such no-ops.

Steps are remembered by state *identity* (:data:`TRANSITIONS` of them, the most recently used):
every state a step leaves gets a fresh token that its copies share until they change, so an
action stepped again from a copy of the same state (a rollout's first action that a later
expansion of the same tree node draws again, or the real step after planning expanded it) takes
the remembered outcome and a copy of the resulting e-graph, with the same ids, instead of
applying the rule again: the step is deterministic, so nothing else changes. On MobileNet-v2 at
budget 32, about a fifth of the steps that change the e-graph were such repeats. Keying by content
hash instead would cost a hash before every step and would not give the same ids.

Costs are cached by :meth:`~tensor_eqsat.egraph.egraph.EGraph.content_hash`, which ignores class
ids and insertion order, so equal e-graphs reached by different action orders share one
extraction; the cache and the statistics are shared by all copies of one environment (the
artifact kept three per-thread caches keyed by a hash of the class map's iteration order).
"""

from __future__ import annotations

import itertools
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from tensor_eqsat.egraph.edges import has_edge
from tensor_eqsat.rewrite.ematch import Searcher
from tensor_eqsat.rewrite.multi import MultiRewrite, canonical_form
from tensor_eqsat.rewrite.pattern import PNode
from tensor_eqsat.rewrite.rewrite import Rewrite, apply_rule
from tensor_eqsat.search.mcts import StepResult
from tensor_eqsat.search.stop import StopReason

if TYPE_CHECKING:
    from tensor_eqsat.egraph.egraph import EGraph
    from tensor_eqsat.rewrite.pattern import Pattern

CostFn = Callable[["EGraph"], float]
"""The main extractor's cost of an e-graph (the reward signal)."""

AnyRule = Rewrite | MultiRewrite


class ExtractorCost:
    """A :data:`CostFn`: an extractor's reported cost of the e-graph priced by a cost model.
    A class rather than a closure so that environments can be set up in worker processes."""

    def __init__(self, extractor: Any, cost_model: Any) -> None:
        from tensor_eqsat.extract.greedy_ocf import GreedyOcfExtractor, OcfMemo

        self.extractor = extractor
        self.cost_model = cost_model
        # greedy-OCF re-prices only the classes a step changed (the same costs, faster).
        self._memo = OcfMemo() if isinstance(extractor, GreedyOcfExtractor) else None

    def __call__(self, egraph: EGraph) -> float:
        from tensor_eqsat.extract.egraph_problem import problem_from_egraph

        ep = problem_from_egraph(egraph, self.cost_model)
        if self._memo is not None:
            return float(self.extractor.extract_incremental(ep.problem, ep.enodes, self._memo).reported_cost)
        return float(self.extractor.extract(ep.problem).reported_cost)

    def __getstate__(self) -> dict[str, Any]:
        # A process that receives the cost function starts with an empty memo of its own.
        state = self.__dict__.copy()
        if state["_memo"] is not None:
            state["_memo"] = type(state["_memo"])()
        return state


TRANSITIONS = 256
"""Step outcomes an environment and its copies remember (see the module docstring); the
resulting e-graphs of changing steps are kept as copies, so this bounds their memory."""

_TOKENS = itertools.count(1)
"""State tokens, unique within a process."""


class PruneMode(Enum):
    """Which actions :meth:`EGraphEnv.pruned_actions` reports."""

    SOURCES = "sources"
    """Rules with a source pattern that has no match (the paper)."""
    MATCHES = "matches"
    """Rules with no match that satisfies their conditions (multi: no compatible pair)."""


@dataclass(frozen=True)
class EGraphEnvConfig:
    """Limits of one environment step.

    node_limit: the state is done once the e-graph has this many e-nodes or more. Default 2000.
    node_multi: e-nodes one multi-pattern step may add. Default 2000 (the artifact's hook cap).
    step_time_limit: seconds one step's rule application may take before the state is done
        (pricing the resulting e-graph is not counted). Default 10.0 (egg's limit in the
        artifact); None for no limit.
    match_limit: matches considered per step. Default None (all).
    prune: :class:`PruneMode`. Default SOURCES.
    """

    node_limit: int = 2000
    node_multi: int | None = 2000
    step_time_limit: float | None = 10.0
    match_limit: int | None = None
    prune: PruneMode = PruneMode.SOURCES

    def __post_init__(self) -> None:
        if self.node_limit < 1:
            raise ValueError(f"EGraphEnvConfig.node_limit must be at least 1, got {self.node_limit}")
        if self.node_multi is not None and self.node_multi < 1:
            raise ValueError(f"EGraphEnvConfig.node_multi must be at least 1, got {self.node_multi}")
        if self.step_time_limit is not None and self.step_time_limit <= 0:
            raise ValueError(f"EGraphEnvConfig.step_time_limit must be positive, got {self.step_time_limit}")


@dataclass
class EnvStats:
    """Work done by an environment and all its copies (for profiles and reports)."""

    steps: int = 0
    copies: int = 0
    extractions: int = 0
    cache_hits: int = 0
    prunings: int = 0
    apply_seconds: float = 0.0
    extract_seconds: float = 0.0
    hash_seconds: float = 0.0
    copy_seconds: float = 0.0
    prune_seconds: float = 0.0
    repeated_steps: int = 0
    """Steps that took a remembered outcome of the same action from the same state."""

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class _Transition:
    """A remembered step: the resulting e-graph (None if unchanged, kept as a private copy) and
    its token, and what the step returned."""

    egraph: EGraph | None
    token: int
    cost: float
    done: bool
    reason: StopReason | None
    info: dict[str, Any]
    idle: bool
    """The step changed nothing and the action is remembered as idle in the state."""


@dataclass
class _Shared:
    """What every copy of one environment shares."""

    rules: tuple[AnyRule, ...]
    cost_fn: CostFn
    config: EGraphEnvConfig
    prune_searchers: tuple[Searcher, ...]
    prune_sources: tuple[tuple[int, ...], ...]
    """Per rule: indices into ``prune_searchers`` of its (canonical) source patterns."""
    prune_edges: tuple[tuple[tuple[str, int, str], ...], ...]
    """Per searcher: the (op, child index, child op) edges of its pattern, each of which a
    match needs (:func:`~tensor_eqsat.egraph.edges.has_edge`)."""
    cache: dict[tuple[int, int, int], float] = field(default_factory=dict)
    transitions: OrderedDict[tuple[int, int], _Transition] = field(default_factory=OrderedDict)
    """(state token, action) -> the step's outcome, most recently used last."""
    stats: EnvStats = field(default_factory=EnvStats)
    token: int | None = None
    """The name states travel under between processes (set once they first travel)."""


class EGraphEnv:
    """An :class:`~tensor_eqsat.search.mcts.Environment` over an e-graph.

    egraph: the initial state (owned by the environment from now on; pass a copy to keep yours).
    rules: the actions, in order (single rules first, then multi rules, in the paper).
    cost_fn: the main extractor's cost of an e-graph.
    config: :class:`EGraphEnvConfig`; keyword overrides are accepted too.
    """

    def __init__(
        self,
        egraph: EGraph,
        rules: Sequence[AnyRule],
        cost_fn: CostFn,
        config: EGraphEnvConfig | None = None,
        **overrides: Any,
    ) -> None:
        from dataclasses import replace

        cfg = config or EGraphEnvConfig()
        if overrides:
            cfg = replace(cfg, **overrides)
        if not rules:
            raise ValueError("EGraphEnv needs at least one rule")
        # Prune checks are keyed by canonical source pattern: the 139 rules have far fewer
        # distinct sources (four relu-concat rules share ``(relu ?a)``), each searched once.
        distinct: dict[Pattern, int] = {}
        per_rule = []
        for r in rules:
            sources = (r.lhs,) if isinstance(r, Rewrite) else r.sources
            ids = []
            for src in sources:
                canon, _ = canonical_form(src)
                ids.append(distinct.setdefault(canon, len(distinct)))
            per_rule.append(tuple(ids))
        searchers = tuple(Searcher(p) for p in distinct)
        edges = tuple(tuple(dict.fromkeys(_edges(p))) for p in distinct)
        self._shared = _Shared(tuple(rules), cost_fn, cfg, searchers, tuple(per_rule), edges)
        self.egraph = egraph
        self.egraph.rebuild()
        self._cost: float | None = None
        self._cost_version = -1
        self._idle: frozenset[int] = frozenset()
        self._idle_version = -1
        self._token = 0
        self._token_version = -1

    def __reduce__(self) -> tuple[Any, ...]:
        # A state travels to and from worker processes without the shared part (rules, cost
        # function, cache): each process holds that once, under the environment's token.
        return (_restore, (_token(self._shared), self.egraph, self._cost, self._cost_version))

    def worker_initializer(self) -> tuple[Callable[..., None], tuple[Any, ...]]:
        """``(function, args)`` that set up a worker process to receive this environment's
        states (what :meth:`~tensor_eqsat.search.mcts.Mcts.run` gives a process pool)."""
        return _install, (_token(self._shared), self._shared)

    @classmethod
    def _from(cls, shared: _Shared, egraph: EGraph) -> EGraphEnv:
        env = cls.__new__(cls)
        env._shared = shared
        env.egraph = egraph
        env._cost = None
        env._cost_version = -1
        env._idle = frozenset()
        env._idle_version = -1
        env._token = 0
        env._token_version = -1
        return env

    # -- the Environment protocol ----------------------------------------------------------------
    @property
    def num_actions(self) -> int:
        return len(self._shared.rules)

    @property
    def rules(self) -> tuple[AnyRule, ...]:
        return self._shared.rules

    @property
    def config(self) -> EGraphEnvConfig:
        return self._shared.config

    @property
    def stats(self) -> EnvStats:
        return self._shared.stats

    def action_name(self, action: int) -> str:
        return self._shared.rules[action].name

    def cost(self) -> float:
        """The main extractor's cost of the current e-graph (cached by content hash)."""
        eg = self.egraph
        if self._cost is not None and self._cost_version == eg.version:
            return self._cost
        sh = self._shared
        t = time.perf_counter()
        key = (eg.content_hash(), eg.num_enodes, eg.num_classes)
        sh.stats.hash_seconds += time.perf_counter() - t
        cost = sh.cache.get(key)
        if cost is None:
            t = time.perf_counter()
            cost = float(sh.cost_fn(eg))
            sh.stats.extract_seconds += time.perf_counter() - t
            sh.stats.extractions += 1
            sh.cache[key] = cost
        else:
            sh.stats.cache_hits += 1
        self._cost, self._cost_version = cost, eg.version
        return cost

    def step(self, action: int) -> StepResult:
        """Apply rule ``action`` to all its current matches once, then price the e-graph."""
        sh = self._shared
        cfg = sh.config
        rule = sh.rules[action]
        eg = self.egraph
        if eg.num_enodes >= cfg.node_limit:
            # egg checks its limits before an iteration: a full e-graph is not touched
            return StepResult(self.cost(), False, True, StopReason.NODE_LIMIT, self._info(rule.name, None))
        if self._idle_version == eg.version and action in self._idle:
            # Known to change nothing in exactly this state (pruned, or applied without effect):
            # the same outcome as applying it, without searching again.
            sh.stats.steps += 1
            return StepResult(self.cost(), False, False, None, self._info(rule.name, None))
        key = (self._state_token(), action)
        known = sh.transitions.get(key)
        if known is not None:
            sh.transitions.move_to_end(key)
            return self._repeat(known, action)
        t0 = time.perf_counter()
        deadline = None if cfg.step_time_limit is None else t0 + cfg.step_time_limit
        # Exact node limit: the application stops once the e-graph reaches the limit, so a step
        # crosses it by at most one match's nodes.
        budget = cfg.node_limit - eg.num_enodes
        if isinstance(rule, MultiRewrite) and cfg.node_multi is not None:
            budget = min(budget, cfg.node_multi)
        report = apply_rule(eg, rule, node_budget=budget, match_limit=cfg.match_limit, deadline=deadline)
        elapsed = time.perf_counter() - t0
        # The limit bounds rule application, as egg's does; pricing the result comes after the
        # clock is read, so a slow cost function (an ILP reward) cannot end a state by load.
        timed_out = deadline is not None and t0 + elapsed >= deadline
        sh.stats.apply_seconds += elapsed
        sh.stats.steps += 1
        cost = self.cost()
        reason = None
        if eg.num_enodes >= cfg.node_limit:
            reason = StopReason.NODE_LIMIT
        elif timed_out:
            reason = StopReason.STEP_TIME_LIMIT
        idle = not report.changed and not report.budget_exhausted
        if idle:
            self._remember_idle(frozenset((action,)))
        info = self._info(rule.name, report)
        if reason is not StopReason.STEP_TIME_LIMIT:  # a cut-short step may not repeat
            snapshot = eg.copy() if report.changed else None
            known = _Transition(snapshot, self._state_token(), cost, reason is not None, reason, info, idle)
            sh.transitions[key] = known
            if len(sh.transitions) > TRANSITIONS:
                sh.transitions.popitem(last=False)
        return StepResult(cost, report.changed, reason is not None, reason, dict(info))

    def _state_token(self) -> int:
        """The token of the current state: shared with the copies made since it was reached."""
        version = self.egraph.version
        if self._token_version != version:
            self._token, self._token_version = next(_TOKENS), version
        return self._token

    def _repeat(self, known: _Transition, action: int) -> StepResult:
        """Take a remembered step's outcome (what stepping again would compute)."""
        sh = self._shared
        sh.stats.steps += 1
        sh.stats.repeated_steps += 1
        if known.egraph is not None:
            self.egraph.assign(known.egraph)  # in place: the caller may hold the e-graph
            # The version may now repeat one this environment saw in another state: whatever was
            # remembered by version belongs to that state.
            self._idle, self._idle_version = frozenset(), -1
            self._token, self._token_version = known.token, self.egraph.version
        self._cost, self._cost_version = known.cost, self.egraph.version
        if known.idle:
            self._remember_idle(frozenset((action,)))
        return StepResult(known.cost, known.egraph is not None, known.done, known.reason, dict(known.info))

    def _remember_idle(self, actions: frozenset[int]) -> None:
        """Record actions that change nothing in the current state (forgotten once it changes)."""
        version = self.egraph.version
        if self._idle_version != version:
            self._idle, self._idle_version = actions, version
        else:
            self._idle = self._idle | actions

    def pruned_actions(self) -> frozenset[int]:
        """Actions that cannot change the e-graph now (see :class:`PruneMode`)."""
        sh = self._shared
        t = time.perf_counter()
        eg = self.egraph
        eg.rebuild()
        if sh.config.prune is PruneMode.MATCHES:
            out = frozenset(i for i, r in enumerate(sh.rules) if not r.has_match(eg))
        else:
            found: dict[int, bool] = {}
            searchers = sh.prune_searchers
            edges = sh.prune_edges
            present: dict[tuple[str, int, str], bool] = {}

            def edge(e: tuple[str, int, str]) -> bool:
                hit = present.get(e)
                if hit is None:
                    hit = present[e] = has_edge(eg, *e)
                return hit

            def has(k: int) -> bool:
                # Most sources have no match; a missing edge of the pattern says so without
                # trying every class of its root op.
                hit = found.get(k)
                if hit is None:
                    hit = found[k] = all(map(edge, edges[k])) and bool(searchers[k].search(eg, 1))
                return hit

            out = frozenset(i for i, ids in enumerate(sh.prune_sources) if not all(has(k) for k in ids))
        sh.stats.prune_seconds += time.perf_counter() - t
        sh.stats.prunings += 1
        self._remember_idle(out)
        return out

    def same_state(self, other: Any) -> bool:
        """Whether ``other`` holds this state with the same ids (MCTS then reuses what it
        computed from ``other``'s state in the previous planning step)."""
        return isinstance(other, EGraphEnv) and self.egraph.same_as(other.egraph)

    def copy(self) -> EGraphEnv:
        t = time.perf_counter()
        env = EGraphEnv._from(self._shared, self.egraph.copy())
        env._cost, env._cost_version = self._cost, self._cost_version
        env._idle, env._idle_version = self._idle, self._idle_version
        env._token, env._token_version = self._state_token(), self._token_version
        self._shared.stats.copy_seconds += time.perf_counter() - t
        self._shared.stats.copies += 1
        return env

    # --------------------------------------------------------------------------------------------
    def _info(self, rule: str, report: Any) -> dict[str, Any]:
        eg = self.egraph
        info: dict[str, Any] = {"rule": rule, "enodes": eg.num_enodes, "classes": eg.num_classes}
        if report is not None:
            info["matches"] = report.matches
            info["applied"] = report.applied
            info["nodes_added"] = report.nodes_added
        return info


def _edges(p: Pattern) -> list[tuple[str, int, str]]:
    """The (op, child index, child op) edges of a pattern, parents first."""
    out: list[tuple[str, int, str]] = []
    if isinstance(p, PNode):
        for i, c in enumerate(p.children):
            if isinstance(c, PNode):
                out.append((p.op, i, c.op))
                out.extend(_edges(c))
    return out


_REGISTRY: dict[int, _Shared] = {}
"""The shared parts of environments whose states this process sends or receives, by token."""


def _token(shared: _Shared) -> int:
    # The token is kept in the shared part, so a worker's copy (a different object, unless the
    # worker was forked) sends its states back under the sender's token.
    if shared.token is None:
        shared.token = id(shared)
        _REGISTRY[shared.token] = shared
    return shared.token


def _install(token: int, shared: _Shared) -> None:
    # A worker's copy: its cost cache and statistics are its own from here on. Its remembered
    # steps start empty: state tokens are numbered per process, so the sender's would name the
    # worker's own states.
    shared.token = token
    shared.transitions = OrderedDict()
    _REGISTRY[token] = shared


def _restore(token: int, egraph: EGraph, cost: float | None, cost_version: int) -> EGraphEnv:
    shared = _REGISTRY.get(token)
    if shared is None:
        raise RuntimeError("an environment state arrived in a process that was not set up for it")
    env = EGraphEnv._from(shared, egraph)
    env._cost, env._cost_version = cost, cost_version
    return env
