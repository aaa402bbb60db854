"""``OptimizeConfig``: every setting of one ``optimize()`` run, in one frozen, validated record.

The configuration nests the settings of the parts it drives: :class:`~tensor_eqsat.search.mcts.MctsConfig`
(the paper's search), :class:`~tensor_eqsat.search.runner.RunnerConfig` (TENSAT's saturation) and
:class:`~tensor_eqsat.extract.ilp.IlpConfig` (ILP extraction). The CLI, ``bench.Settings`` and
library callers all build one, so a setting is declared once: here or in the nested config.
``optimize(graph, config=None, **overrides)`` applies overrides with
:meth:`OptimizeConfig.with_overrides`, the pattern ``Mcts`` and ``EGraphEnv`` use.

Adding a setting (e.g. a target device, guard settings, parallel rollout workers):

1. Add a field with a default to :class:`OptimizeConfig` (or to the nested config it belongs
   to), state the default in the docstring, and validate it in ``__post_init__``.
2. Read it where it is used: in :meth:`OptimizeConfig.construction` for construction settings,
   or in ``optimize()`` for pipeline settings.
3. If it should be recorded with the run, add it to
   :class:`~tensor_eqsat.optimize.OptimizeSettings` and its ``to_dict()`` (new keys only: the
   existing keys are read by the results database and by users' scripts).
4. Give the CLI a flag that sets it: one ``Flag`` in ``commands/_flags.py`` (its help starts
   with the field's documented sentence), and ``bench.Settings`` a field if sweeps vary it.

A nested setting can be overridden by its own name when that name is not also a top-level field
(``optimize(g, budget=16)`` sets ``mcts.budget``); ILP settings take an ``ilp_`` prefix
(``ilp_time_limit``); anything else needs the nested object (``mcts=MctsConfig(...)``).
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import TYPE_CHECKING, Any

from tensor_eqsat.cost.model import CostModel, CostModelError, KernelCostModel
from tensor_eqsat.cost.spec import check_spec, graph_options, parse_cost_model
from tensor_eqsat.errors import ConfigError, check_positive_int, parse_enum
from tensor_eqsat.extract.ilp import IlpBackend, IlpConfig, IlpReward
from tensor_eqsat.extract.registry import Extractor, ExtractorKind, make_extractor, parse_kind
from tensor_eqsat.ir.cast import precision
from tensor_eqsat.rules.rule_spec import RuleSpec
from tensor_eqsat.rules.sets import RuleSet
from tensor_eqsat.search.construction import Construction, MctsConstruction, Saturation
from tensor_eqsat.search.env import ExtractorCost
from tensor_eqsat.search.mcts import MctsConfig
from tensor_eqsat.search.portfolio import PortfolioConfig, node_cap_for
from tensor_eqsat.search.runner import RunnerConfig
from tensor_eqsat.search.schedule import Stage, StageKind
from tensor_eqsat.target.targets import Target, TargetError, default_target
from tensor_eqsat.target.targets import get_target as _get_target

if TYPE_CHECKING:
    from tensor_eqsat.ir.graph import Graph

TENSAT_ITER_LIMIT = 10_000
"""TENSAT's iteration limit in the paper's baseline runs (``run_exp_main.sh``: n_iter)."""
TENSAT_TIME_LIMIT = 3600.0
"""TENSAT's saturation time limit in the paper's baseline runs (n_sec), seconds."""
MIN_ILP_SECONDS = 1.0
"""The least time an ILP solve gets when a run's ``time_limit`` is used up: enough to return the
greedy-dag warm start, which the solver keeps as its incumbent, checked (that limit bounds the
construction alone; the extraction may end after it)."""
MIN_BUDGET_ILP_SECONDS = 0.1
"""The same within a ``time_budget`` (``auto``'s included), which bounds the whole call: an ILP
solve gets at least this (the solver still runs: its greedy-dag warm start alone misses the
merges it finds, and a partitioned search's regions reach their final extraction with their
share spent). At 1 s, ``optimize squeezenet --time-budget 2`` ended after 2.4 s."""
REWARD_NODE_LIMIT = 100
"""Branch-and-bound nodes per ILP reward solve (``OptimizeConfig.reward_node_limit``): few enough
to be several times faster than a time limit, enough to keep rewards within a percent of the
optimum (measured in docs/notebook/settings.md, "ILP reward node limit")."""
AUTO_TIME_BUDGET = 60.0
"""The ``auto`` search's time budget when none is given, seconds (issue 18: "a user who gives the
tool a minute")."""
AUTO_BACKTRACKS = 1
"""Backtracks of the ``auto`` search at a fixpoint (``OptimizeConfig.backtracks``): the restart
without the dominant merge, which took NASRNN from 46.07 % to 48.12 % and BERT from 28.67 % to
30.45 % within 60 s; backtracking from runner-ups alone reached 47.97 % on NASRNN, and a 60 s
budget leaves no time for a second backtrack there (docs/search.md, "Backtracking")."""
BYTES_PER_ENODE = 34_000.0
"""Memory one e-node costs, bytes, for turning ``memory_limit`` into node limits: the e-graph with
its analysis (shapes, hash-cons, parents), the extraction problem built from it and the ILP model,
per e-node; the largest figure ``benchmarks/egraph_memory.py`` measured on the zoo, rounded up, so
a limit is not exceeded on the models measured (docs/notebook/settings.md, "Memory per e-node")."""


class Search(Enum):
    """The built-in constructions, by name (any :class:`Construction` object may be given too)."""

    MCTS = "mcts"
    SATURATE = "saturate"
    AUTO = "auto"


ExtractorChoice = ExtractorKind | str | Extractor


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


@dataclass(frozen=True)
class OptimizeConfig:
    """Every setting of :func:`~tensor_eqsat.optimize.optimize`. Defaults are the paper's best
    practical setting.

    search: how the e-graph is built: ``"mcts"`` (the paper), ``"saturate"`` (TENSAT), ``"auto"`` (the
        anytime portfolio of both, :mod:`tensor_eqsat.search.portfolio`), or a
        :class:`~tensor_eqsat.search.construction.Construction` object. Default mcts.
    main_extractor: the extractor whose cost rewards MCTS: ``greedy-tree`` (the paper's DCF),
        ``greedy-ocf`` (OCF), ``greedy-dag``, ``ilp``, or an Extractor object. Default
        greedy-ocf. Unused by saturation.
    final_extractor: the extractor of the result, by name or as an object. Default ilp.
    target: where the model will run (:mod:`tensor_eqsat.target.targets`): a target name
        (``ort-cpu``, ``torch-cpu``, ``cuda``, ``a100``, ...) or a Target. It picks the cost model
        (unless ``cost_model`` is given), and, in :func:`~tensor_eqsat.deliver.deliver`, the
        runtime of the numeric check and of the never-slower guard. Default None: in
        :func:`~tensor_eqsat.deliver.deliver`, the source's default (:func:`resolve_target`:
        ``ort-cpu`` for an ONNX file, else ``cuda`` with a GPU, else the recorded ``h200``
        profile); :func:`~tensor_eqsat.optimize.optimize` alone the same but for ONNX (``cuda``
        or ``h200``). The paper's cost model is ``target="a100"``.
    cost_model: a cost-model spec (``roofline``, ``roofline:p100``, ``measured:cpu``, ...) or a
        CostModel. Default None: the target's.
    node_limit: construction stops once the e-graph has this many e-nodes; multi-pattern rules
        may add at most this many at once (the artifact: n_nodes = node_multi = 2000). Default 2000.
    k_multi: saturation iterations with multi-pattern rules. Default None: the zoo model's value
        when the graph is a zoo model (a name, or ``model=``), else 1.
    seed: seeds every random choice. Default 0.
    time_limit: seconds for the construction alone of an ``mcts`` or ``saturate`` run:
        construction stops by then (MCTS planning stops early; saturation stops between rules),
        and a final ILP gets what remains of it (at least :data:`MIN_ILP_SECONDS`, at most
        ``ilp.time_limit``). ``time_budget`` bounds the whole call instead (ConfigError with
        both, or with ``auto``). Default None: none for MCTS,
        ``runner.time_limit`` (TENSAT's 3600 s) for saturation, and ``ilp.time_limit`` for the
        final ILP.
    rules: the rewrite rules: ``"default"`` (the paper's 139 rules; for a search other than
        ``auto``, the model's rule set, see ``ModelInfo.rule_set``: the NASRNN variant for
        ``nasrnn``), a rule set name, the path of a rule file, a RuleSet or RuleSpecs.
        Default ``"default"``.
    model: the zoo name of the graph when it is a Graph built from the zoo (for k_multi and the
        rule set). Default None.
    mcts: the search's settings. Default ``MctsConfig()`` (budget 128, rollouts of up to 11
        steps); its ``time_limit`` is replaced by ``time_limit`` above.
    runner: saturation limits. Default TENSAT's baseline: ``iter_limit`` 10,000 and
        ``time_limit`` 3600 s; its ``node_limit``, ``node_multi`` and ``k_multi`` are taken from
        the fields above.
    ilp: ILP settings, for the main and the final extractor. Default ``IlpConfig(time_limit=600)``
        (the artifact's 600 s per solve).
    reward_warm_start: with the ``ilp`` main extractor, warm-start each reward solve from the
        previous solve's answer carried over to the new e-graph
        (:class:`~tensor_eqsat.extract.ilp.IlpReward`); the answers stay exact, only the solve
        time changes. Default True.
    reward_time_limit: seconds per reward solve of the ``ilp`` main extractor (an answer at the
        limit is the solver's best, never worse than greedy-dag). A time limit makes the reward,
        and so the search, depend on the machine's speed and load. Default None:
        ``ilp.time_limit``, a backstop that ``reward_node_limit`` keeps from being reached.
    reward_node_limit: branch-and-bound nodes per reward solve of the ``ilp`` main extractor
        (:attr:`IlpConfig.node_limit`): each reward is the best answer found within them, the
        same on any machine, so ILP-rewarded MCTS gives one result per seed. Default
        :data:`REWARD_NODE_LIMIT` (100); None solves each reward to optimality (the paper; up to
        ``reward_time_limit``). The final extraction is not affected.
    reward_stall_limit: LP iterations, strong branching's included, that a reward solve of the
        ``ilp`` main extractor may spend without improving its answer
        (:attr:`IlpConfig.stall_limit`): it bounds the work at one branch-and-bound node (strong
        branching, cut rounds, restarts), which ``reward_node_limit`` does not, and like it is
        the same on any machine. It stops a solve without changing its path: a solve that never
        goes that long without a better answer gives the same reward. Default None (no limit): no
        limit low enough to speed up SqueezeNet leaves every other model's search as it was
        (docs/notebook/search.md, "ILP rewards"). The final extraction is not affected.
    alternatives: extractors (names) whose extractions of the final e-graph are returned beside
        the result (``OptimizeResult.alternatives``), as further candidates for the never-slower
        guard (:mod:`tensor_eqsat.target.guard`), which measures them on the target and keeps the
        fastest. Default ``()``: none.
    time_budget: seconds for the whole call, from its start: loading, search, extractions, and in
        :func:`~tensor_eqsat.deliver.deliver` the numeric check, the guard and the write
        (:mod:`tensor_eqsat.clock`). ``auto`` returns the best graph found by then (default
        :data:`AUTO_TIME_BUDGET`, 60 s). Not together with ``time_limit`` (ConfigError).
        Default None.
    memory_limit: bytes the e-graph may use: every node limit is capped at ``memory_limit /``
        :data:`BYTES_PER_ENODE` e-nodes (:meth:`node_cap`). Default None: no cap.
    partition: in :func:`~tensor_eqsat.deliver.deliver`, cut a graph whose e-graph would not fit
        the node limit with room to grow into regions and optimize each distinct region once
        (:mod:`tensor_eqsat.partition`); :func:`~tensor_eqsat.optimize.optimize` searches the
        graph it is given whole. Default True; the paper's experiments turn it off.
    portfolio: the ``auto`` search's settings. Default ``PortfolioConfig()``; its first rung and
        MCTS use ``node_limit``.
    fold_first: before the search, apply the rule set's fold-first rules
        (:data:`~tensor_eqsat.rules.sets.FOLD_FIRST`: batch norm folded into the convolution or
        product before it, rules 300-303) to a fixpoint, as rules in the e-graph: every batch
        norm gets its folded alternative (a convolution carrying a bias) before any search step,
        so that the bias-carrying merges can match everywhere, and the extraction still picks
        whichever is cheaper. A rule set without them (the paper's) is searched as it was.
        Default True.
    rounds: the most search rounds (docs/search.md, "Rounds"): a round that gained something,
        with time left, is followed by another from its best graph, in a fresh e-graph with the
        same rules, limits and portfolio, as a node limit bounds how deep one e-graph sees; 0
        repeats until a round gains nothing (a fixpoint) or the deadline. Default None: 0 for
        ``auto``, 1 for ``mcts``, ``saturate`` and a Construction (the paper's runs).
    backtracks: at a fixpoint with time left, the rounds backtrack this many times, each time a
        new chain of rounds to its own fixpoint: first from the original graph, holding back in
        its first rounds the multi-pattern rule the best graph holds most, then from the cheapest
        candidate of any round that no round started from (docs/search.md, "Backtracking"), as
        the best graph of one chain can block merges that another still allows. Default None:
        :data:`AUTO_BACKTRACKS` for ``auto``, 0 for the rest (the paper's runs).

    Raises ConfigError (a TensorEqsatError and a ValueError) for an unknown search or extractor
    name, or an out-of-range value.

    >>> cfg = OptimizeConfig().with_overrides(budget=16, search="saturate", ilp_time_limit=60)
    >>> cfg.mcts.budget, cfg.search_name, cfg.ilp.time_limit
    (16, 'saturate', 60)
    """

    search: Search | str | Construction = Search.MCTS
    main_extractor: ExtractorChoice = ExtractorKind.GREEDY_OCF
    final_extractor: ExtractorChoice = ExtractorKind.ILP
    target: str | Target | None = None
    cost_model: str | CostModel | None = None
    node_limit: int = 2000
    k_multi: int | None = None
    seed: int = 0
    time_limit: float | None = None
    rules: str | RuleSet | Sequence[RuleSpec] = "default"
    model: str | None = None
    mcts: MctsConfig = field(default_factory=MctsConfig)
    runner: RunnerConfig = field(
        default_factory=lambda: RunnerConfig(iter_limit=TENSAT_ITER_LIMIT, time_limit=TENSAT_TIME_LIMIT)
    )
    ilp: IlpConfig = field(default_factory=lambda: IlpConfig(time_limit=600.0))
    alternatives: tuple[ExtractorKind | str, ...] = ()
    time_budget: float | None = None
    memory_limit: int | None = None
    portfolio: PortfolioConfig = field(default_factory=PortfolioConfig)
    reward_warm_start: bool = True
    reward_time_limit: float | None = None
    reward_node_limit: int | None = REWARD_NODE_LIMIT
    reward_stall_limit: int | None = None
    partition: bool = True
    fold_first: bool = True
    rounds: int | None = None
    backtracks: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.target, str):
            try:
                object.__setattr__(self, "target", _get_target(self.target))
            except TargetError as exc:
                raise ConfigError(str(exc)) from None
        elif self.target is not None and not isinstance(self.target, Target):
            raise ConfigError(f"target: expected a name or a Target, got {type(self.target).__name__}")
        if isinstance(self.cost_model, str):
            try:
                check_spec(self.cost_model)  # before any work, not after the e-graph is built
            except CostModelError as exc:
                raise ConfigError(str(exc)) from None
        if isinstance(self.search, str | Search):
            object.__setattr__(self, "search", _parse_search(self.search))
        elif not isinstance(self.search, Construction):
            raise ConfigError(f"search: expected a name or a Construction, got {type(self.search).__name__}")
        for name in ("main_extractor", "final_extractor"):
            value = getattr(self, name)
            if not isinstance(value, Extractor):
                object.__setattr__(self, name, parse_kind(value))
        object.__setattr__(self, "alternatives", tuple(parse_kind(k) for k in self.alternatives))
        if not _is_int(self.seed) or self.seed < 0:
            raise ConfigError(f"seed must be a non-negative integer, got {self.seed!r}")
        for name in ("time_limit", "time_budget", "reward_time_limit"):
            value = getattr(self, name)
            if value is not None and not (_is_number(value) and value == value):
                raise ConfigError(f"{name} must be a number of seconds or None, got {value!r}")
        if self.k_multi is not None and not _is_int(self.k_multi):
            raise ConfigError(f"k_multi must be an integer or None, got {self.k_multi!r}")
        if not _is_int(self.node_limit) or self.node_limit < 1:
            raise ConfigError(f"node_limit must be a positive integer, got {self.node_limit!r}")
        if self.k_multi is not None and self.k_multi < 0:
            raise ConfigError(f"k_multi must be at least 0, got {self.k_multi}")
        if self.time_limit is not None and not self.time_limit > 0:
            raise ConfigError(f"time_limit must be positive or None, got {self.time_limit!r}")
        budget, memory = self.time_budget, self.memory_limit
        if budget is not None and not 0 < budget < float("inf"):
            raise ConfigError(f"time_budget must be a positive number of seconds or None, got {budget!r}")
        if memory is not None and (not isinstance(memory, int) or memory < 1):
            raise ConfigError(f"memory_limit must be a positive number of bytes or None, got {memory!r}")
        if self.time_limit is not None and self.search is Search.AUTO:
            raise ConfigError(
                "time_limit bounds one construction and does not apply to the auto search: "
                "give time_budget, which bounds the whole run",
                cli="--time-limit bounds one construction and does not apply to --search auto: "
                "give --time-budget, which bounds the whole command",
            )
        if self.time_limit is not None and budget is not None:
            raise ConfigError(
                "give time_budget (the whole run, check and guard included) or time_limit (the "
                "construction alone), not both",
                cli="give --time-budget (the whole command, check and guard included) or "
                "--time-limit (the construction alone), not both",
            )
        if self.reward_time_limit is not None and not self.reward_time_limit > 0:
            raise ConfigError(f"reward_time_limit must be positive or None, got {self.reward_time_limit!r}")
        if self.rounds is not None and (not _is_int(self.rounds) or self.rounds < 0):
            raise ConfigError(
                f"rounds must be a non-negative integer (0: until a fixpoint) or None, got {self.rounds!r}"
            )
        if self.backtracks is not None and (not _is_int(self.backtracks) or self.backtracks < 0):
            raise ConfigError(f"backtracks must be a non-negative integer or None, got {self.backtracks!r}")
        check_positive_int(self.reward_node_limit, "reward_node_limit")
        check_positive_int(self.reward_stall_limit, "reward_stall_limit")
        if self.reward_stall_limit is not None and self.ilp.backend is not IlpBackend.SCIP:
            raise ConfigError("reward_stall_limit needs the scip ILP backend (HiGHS counts no LP iterations)")
        if ExtractorKind.ILP in (self.main_extractor, self.final_extractor, *self.alternatives):
            # Checked here, not after a search that would end in "needs pyscipopt".
            why = self.ilp.backend.unavailable()
            if why is not None:
                raise ConfigError(why)

    def with_overrides(self, **overrides: Any) -> OptimizeConfig:
        """A copy with ``overrides`` applied: top-level fields (nested configs included) first,
        then nested settings by name (see the module docstring). ConfigError for unknown names."""
        top = {f.name for f in dataclasses.fields(self)}
        cfg = replace(self, **{k: v for k, v in overrides.items() if k in top}) if overrides else self
        nested: dict[str, dict[str, Any]] = {"mcts": {}, "runner": {}, "ilp": {}, "portfolio": {}}
        for key, value in overrides.items():
            if key in top:
                continue
            nested[_nested_owner(key)][key.removeprefix("ilp_")] = value
        changes = {name: replace(getattr(cfg, name), **kv) for name, kv in nested.items() if kv}
        return replace(cfg, **changes) if changes else cfg

    @property
    def search_name(self) -> str:
        """The construction's name (``mcts``, ``saturate`` or a custom one)."""
        search = self.search
        return search.value if isinstance(search, Search) else str(getattr(search, "name", search))

    def extractor(self, which: str, time_left: float | None = None) -> Extractor:
        """A fresh main (``which="main"``) or final extractor.

        time_left: seconds left of the run's ``time_limit`` or ``time_budget``; an ILP solve gets
        at most that (but at least :data:`MIN_ILP_SECONDS`, within a time budget
        :data:`MIN_BUDGET_ILP_SECONDS`, so it can still return its greedy-dag warm start), on top
        of ``ilp.time_limit``. Default None: ``ilp.time_limit`` alone.

        >>> cfg = OptimizeConfig(ilp=IlpConfig(time_limit=60))
        >>> cfg.extractor("final", time_left=5.0).config.time_limit
        5.0
        >>> cfg.extractor("final", time_left=-2.0).config.time_limit  # the run's time is used up
        1.0
        >>> replace(cfg, time_budget=2.0).extractor("final", time_left=-2.0).config.time_limit
        0.1
        >>> cfg.extractor("final", time_left=500.0).config.time_limit
        60
        """
        choice = self.main_extractor if which == "main" else self.final_extractor
        if isinstance(choice, Extractor):
            return choice
        ilp = self.ilp
        if time_left is not None:
            cap = max(time_left, MIN_BUDGET_ILP_SECONDS if self.has_budget() else MIN_ILP_SECONDS)
            ilp = replace(ilp, time_limit=cap if ilp.time_limit is None else min(ilp.time_limit, cap))
        return make_extractor(choice, ilp_config=ilp)

    def has_budget(self) -> bool:
        """Whether a time budget bounds the whole run (``time_budget``, or ``auto``'s default).

        >>> OptimizeConfig(search="auto").has_budget(), OptimizeConfig(search="saturate").has_budget()
        (True, False)
        """
        return self.search is Search.AUTO or self.time_budget is not None

    def main_cost(self, cost_model: CostModel) -> ExtractorCost | IlpReward:
        """The reward's cost function: the main extractor's cost of an e-graph. With the ``ilp``
        main extractor each solve has ``reward_node_limit``, ``reward_stall_limit`` and
        ``reward_time_limit`` (if set)
        and, with ``reward_warm_start``, starts from the previous solve's answer."""
        if self.main_extractor is ExtractorKind.ILP:
            ilp = replace(self.ilp, node_limit=self.reward_node_limit, stall_limit=self.reward_stall_limit)
            if self.reward_time_limit is not None:
                ilp = replace(ilp, time_limit=self.reward_time_limit)
            if self.reward_warm_start:
                return IlpReward(cost_model, ilp)
            return ExtractorCost(make_extractor(ExtractorKind.ILP, ilp_config=ilp), cost_model)
        return ExtractorCost(self.extractor("main"), cost_model)

    def extractor_name(self, which: str) -> str:
        choice = self.main_extractor if which == "main" else self.final_extractor
        return choice.value if isinstance(choice, ExtractorKind) else str(getattr(choice, "name", choice))

    def node_cap(self) -> int | None:
        """The most e-nodes ``memory_limit`` allows (None without a limit).

        >>> OptimizeConfig(memory_limit=680_000_000).node_cap()
        20000
        """
        return node_cap_for(self.memory_limit, BYTES_PER_ENODE)

    def max_rounds(self) -> int | None:
        """The most search rounds (``rounds``), None for no limit (until a fixpoint).

        >>> OptimizeConfig(search="auto").max_rounds(), OptimizeConfig(search="mcts").max_rounds()
        (None, 1)
        >>> OptimizeConfig(search="saturate", rounds=0).max_rounds()  # until a fixpoint
        >>> OptimizeConfig(search="auto", rounds=3).max_rounds()
        3
        """
        rounds = self.rounds
        if rounds is None:
            rounds = 0 if self.search is Search.AUTO else 1
        return rounds or None

    def max_backtracks(self) -> int:
        """How many times the rounds go on from a runner-up at a fixpoint (``backtracks``).

        >>> OptimizeConfig(search="auto").max_backtracks(), OptimizeConfig(search="mcts").max_backtracks()
        (1, 0)
        """
        if self.backtracks is not None:
            return self.backtracks
        return AUTO_BACKTRACKS if self.search is Search.AUTO else 0

    def run_time_limit(self) -> float | None:
        """Seconds for an ``mcts`` or ``saturate`` run: ``time_limit``, else ``time_budget``."""
        return self.time_limit if self.time_limit is not None else self.time_budget

    def auto_time_budget(self) -> float:
        """Seconds for an ``auto`` run: ``time_budget``, else :data:`AUTO_TIME_BUDGET`."""
        return self.time_budget if self.time_budget is not None else AUTO_TIME_BUDGET

    def resolved_target(self, source: str | None = None) -> Target:
        """The target: ``target``, else the default for ``source`` (see :func:`resolve_target`).

        >>> OptimizeConfig().resolved_target("m.ONNX").name
        'ort-cpu'
        >>> OptimizeConfig(target="cuda").resolved_target().name
        'cuda'
        """
        return resolve_target(self.target, source)

    def cost_model_spec(self) -> str | CostModel:
        """``cost_model``, else the target's cost-model spec; without a target, the default
        target's, as the command line has it (:func:`resolve_target`: ``cuda`` where PyTorch sees
        a GPU, else the recorded ``h200`` profile; issue 44: the library priced with the paper's
        2019 ``roofline:a100`` where the command line used ``h200``). The paper's figures are
        reproduced with ``target="a100"`` (``bench --paper``, the accuracy table).

        >>> OptimizeConfig().cost_model_spec() in ("recorded:h200", "measured:cuda")
        True
        >>> OptimizeConfig(target="a100").cost_model_spec(), OptimizeConfig(target="h200").cost_model_spec()
        ('roofline:a100', 'recorded:h200')
        """
        if self.cost_model is not None:
            return self.cost_model
        return resolve_target(self.target).cost_model

    def cost_model_object(self, graph: Graph | None = None) -> CostModel:
        """The cost model, built once per run, the same way for every caller: a spec string is
        parsed with what it needs from ``graph`` (``measured:ort-*`` times large weights from
        where the graph keeps them, :func:`~tensor_eqsat.cost.spec.graph_options`).

        >>> OptimizeConfig(target="a100").cost_model_object().spec
        'roofline:a100'
        """
        spec = self.cost_model_spec()
        if not isinstance(spec, str):
            return spec
        options = graph_options(spec, graph) if graph is not None else {}
        model = parse_cost_model(spec, **options)
        if graph is not None and isinstance(model, KernelCostModel):
            # A float16 or bfloat16 graph is priced in its precision (DESIGN.md decision 17).
            model = model.with_dtype(precision(graph))
        return model

    def mcts_settings(self) -> MctsConfig:
        """The MCTS settings as used: ``mcts`` with this config's time limit."""
        return replace(self.mcts, time_limit=self.run_time_limit())

    def schedule(self) -> tuple[Stage, ...]:
        """The search as a schedule of stages (:mod:`tensor_eqsat.search.schedule`): ``auto`` is
        ``portfolio.schedule``; ``mcts``, ``saturate`` and a Construction object are one stage
        each, run on the run's own e-graph with these settings (the paper's runs).

        >>> [s.kind.value for s in OptimizeConfig(search="mcts").schedule()]
        ['mcts']
        >>> len(OptimizeConfig(search="auto").schedule()) > 1
        True
        """
        if self.search is Search.AUTO:
            return self.portfolio.schedule
        if self.search is Search.SATURATE:
            return (Stage(StageKind.SATURATE),)
        if self.search is Search.MCTS:
            return (Stage(StageKind.MCTS),)
        return (Stage(StageKind.CONSTRUCTION, construction=self.search),)

    def construction(self, cost_model: CostModel, k_multi: int, stage: Stage | None = None) -> Construction:
        """The construction of a one-stage schedule's ``stage`` (default: this config's), made
        from these settings: TENSAT's saturation at the node limit, the paper's MCTS with this
        config's reward, or the stage's own construction."""
        stage = stage or self.schedule()[0]
        if stage.kind is StageKind.SATURATE:
            n = self.capped_node_limit()
            return Saturation(replace(self.runner, node_limit=n, node_multi=n, k_multi=k_multi))
        if stage.kind is StageKind.MCTS:
            # A picklable cost function: with ``mcts.workers`` > 1, states are priced in workers.
            return MctsConstruction(self.mcts, self.main_cost(cost_model), self.capped_node_limit())
        if stage.kind is StageKind.CONSTRUCTION:
            assert isinstance(stage.construction, Construction)
            return stage.construction
        raise ConfigError(
            f"stage {stage.name}: a {stage.kind.value} stage runs in a schedule (search 'auto')"
        )

    def capped_node_limit(self) -> int:
        """``node_limit``, capped by :meth:`node_cap`."""
        cap = self.node_cap()
        return self.node_limit if cap is None else min(self.node_limit, cap)


_NESTED = {
    "mcts": {f.name for f in dataclasses.fields(MctsConfig)},
    "runner": {f.name for f in dataclasses.fields(RunnerConfig)},
    "ilp": {"ilp_" + f.name for f in dataclasses.fields(IlpConfig)},
    "portfolio": {f.name for f in dataclasses.fields(PortfolioConfig)},
}


def setting_names() -> list[str]:
    """Every name :meth:`OptimizeConfig.with_overrides` accepts: the fields, then the nested
    settings reachable by name (``budget``, ``iter_limit``, ``ilp_time_limit``, ...)."""
    top = [f.name for f in dataclasses.fields(OptimizeConfig)]
    counts: dict[str, int] = {}
    for keys in _NESTED.values():
        for k in keys:
            counts[k] = counts.get(k, 0) + 1
    return top + sorted(k for k, n in counts.items() if n == 1 and k not in top)


def _nested_owner(key: str) -> str:
    owners = [name for name, keys in _NESTED.items() if key in keys]
    if len(owners) != 1:
        why = "is ambiguous" if owners else "is not a setting"
        raise ConfigError(f"{key!r} {why}; pass mcts=, runner=, ilp= or portfolio= (see OptimizeConfig)")
    return owners[0]


def resolve_target(target: str | Target | None, source: str | None = None) -> Target:
    """The one place a run's target is decided: ``target`` when given (a name or a Target), else
    the default of the model ``source`` (a zoo name or a file path; None for an in-memory
    graph): ``ort-cpu`` for an ONNX file, whatever the case of its suffix, else ``a100``.

    >>> resolve_target(None, "model.onnx").name, resolve_target("torch-cpu", "model.onnx").name
    ('ort-cpu', 'torch-cpu')
    """
    if isinstance(target, Target):
        return target
    if target is not None:
        return _get_target(target)
    return default_target(source)


def _parse_search(search: Search | str) -> Search:
    return parse_enum(Search, search, "search")
